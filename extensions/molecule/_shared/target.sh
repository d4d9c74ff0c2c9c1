#!/usr/bin/env bash
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Test equipment for the molecule scenarios: a Debian root file system (bookworm unless
# told otherwise) booted with systemd-nspawn, reached by Ansible through community.docker.nsenter.
#
#   target.sh image               build (once) the cached root file system tarball
#   target.sh unpack NAME DIR     unpack the image into DIR/root (with the cached packages), not booted
#   target.sh start NAME DIR      unpack the image into DIR, boot it, print the init PID
#   target.sh stop NAME DIR       power the target off and remove DIR
#
# Environment: KUBEHW_TARGET_CACHE (default <repo>/.cache/molecule), KUBEHW_TARGET_SUITE
# (default bookworm; start records it in DIR, so stop needs no setting), KUBEHW_TARGET_MIRROR
# (default: read from this machine's apt sources).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
cache="${KUBEHW_TARGET_CACHE:-$repo/.cache/molecule}"
suite="${KUBEHW_TARGET_SUITE:-bookworm}"
# Bump when the package list or the way the image is built changes, so stale images are rebuilt.
image_rev=3
image="$cache/$suite-minbase-r$image_rev.tar"
include="systemd,systemd-sysv,dbus,python3,python3-apt,ca-certificates,gpg"

die() { echo "target.sh: $*" >&2; exit 1; }

mirror_from_apt_sources() {
    # deb822 first (bookworm default), then one-line sources.list entries.
    local url=""
    if [ -r /etc/apt/sources.list.d/debian.sources ]; then
        url="$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources)"
    fi
    if [ -z "$url" ] && [ -r /etc/apt/sources.list ]; then
        url="$(awk '$1 == "deb" && $0 !~ /security/ {for (i = 2; i <= NF; i++) if ($i ~ /^[a-z+]+:\/\//) {print $i; exit}}' /etc/apt/sources.list)"
    fi
    [ -n "$url" ] || die "no Debian mirror found in /etc/apt/sources.list(.d); set KUBEHW_TARGET_MIRROR"
    echo "$url"
}

build_image() {
    [ -s "$image" ] && return 0
    command -v mmdebstrap >/dev/null || die "mmdebstrap is missing (apt-get install mmdebstrap, or make setup)"
    mkdir -p "$cache"
    # Serialise concurrent scenarios of one suite: only one of them builds the image (another suite's
    # image builds at the same time).
    exec 9>"$cache/.image-$suite.lock"
    flock 9
    if [ -s "$image" ]; then
        exec 9>&-
        return 0
    fi
    local mirror="${KUBEHW_TARGET_MIRROR:-$(mirror_from_apt_sources)}"
    # Global, so the EXIT trap still sees it after this function returns.
    build_tmp="$image.tmp"
    trap 'rm -f "$build_tmp"' EXIT
    echo "target.sh: mmdebstrap $suite from $mirror (once)" >&2
    # mmdebstrap rather than debootstrap: the same minbase package set (required packages and apt, plus
    # $include) for half the CPU (measured on bookworm: 35 against 73 CPU seconds), since apt installs
    # the packages in a few dpkg runs instead of one per package, and it writes the tarball directly.
    # The merged-usr hook lays out /usr as debootstrap does (directory symlinks, usr-is-merged), instead
    # of installing usrmerge and perl. Package lists stay, as debootstrap leaves them: the roles install
    # from them. mmdebstrap itself empties /etc/machine-id (systemd then makes one per boot) and removes
    # the downloaded .debs.
    # dpkg in the image unpacks without fsync (force-unsafe-io), as in Debian's official container images
    # (/etc/dpkg/dpkg.cfg.d/docker-apt-speedup): a target lives for one scenario, and the packages its roles install
    # would otherwise wait on a sync of every file they unpack.
    # Check-Valid-Until is off for the build only (a mirror may be a dated snapshot, whose sid Release has
    # expired); the customize hook keeps it off in the image only for suites whose Release expires.
    # shellcheck disable=SC2016  # "$1" in a hook is the root file system, expanded by mmdebstrap's shell
    mmdebstrap --variant=minbase --include="$include" \
        --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
        --skip=cleanup/apt/lists \
        --aptopt='Acquire::Check-Valid-Until "false"' \
        --customize-hook='rm -f "$1/etc/apt/apt.conf.d/99mmdebstrap"' \
        --customize-hook='echo force-unsafe-io >"$1/etc/dpkg/dpkg.cfg.d/kubehw-unsafe-io"' \
        --customize-hook='if grep -qs "^Valid-Until:" "$1"/var/lib/apt/lists/*_dists_'"$suite"'_*Release; then
            echo "Acquire::Check-Valid-Until \"false\";" >"$1/etc/apt/apt.conf.d/99kubehw-snapshot-mirror"; fi' \
        --format=tar "$suite" "$build_tmp" "$mirror" >&2
    mv "$build_tmp" "$image"
    # Let go of the lock now: the target booted next would inherit the descriptor and hold it while it runs, so the
    # real node (tests/support/real_node.py) or another scenario of the suite would wait for that target's end.
    exec 9>&-
}

# Downloaded packages are kept per suite: a sid package must never reach a bookworm target.
archives_of() {
    echo "$cache/apt-archives/$1"
}

# systemd 256 and later refuse to boot on cgroup v1 (258 dropped it), and nspawn gives a container
# the host's hybrid layout unless told otherwise; older images keep the host's layout.
needs_unified_cgroup() {
    local lib version
    lib="$(find "$1/usr/lib" -maxdepth 3 -name 'libsystemd-shared-*.so' -print -quit)"
    version="$(basename "${lib:-libsystemd-shared-0.so}" .so)"
    version="${version#libsystemd-shared-}"
    [ "${version%%[!0-9]*}" -ge 256 ] 2>/dev/null
}

init_pid() {
    # The nspawn process' child is the container's PID 1 (systemd).
    local nspawn_pid="$1"
    pgrep -P "$nspawn_pid" | head -n1
}

# The root file system of a target in DIR/root, not booted: also what the real node of tests/support/real_node.py
# starts from (its own way, with the kubelet's cgroup needs), and what stop() removes.
unpack() {
    local name="$1" dir="$2"
    build_image
    stop "$name" "$dir" >/dev/null 2>&1 || true
    local archives
    archives="$(archives_of "$suite")"
    mkdir -p "$dir/root" "$archives"
    echo "$suite" >"$dir/suite"
    tar -C "$dir/root" --numeric-owner -xf "$image"
    echo "$name" >"$dir/root/etc/hostname"
    # Packages downloaded by earlier runs are hard-linked in (not bind-mounted: apt locks that
    # directory, and scenarios may run side by side); stop() keeps the new ones.
    find "$archives" -maxdepth 1 -name '*.deb' -exec cp -al -t "$dir/root/var/cache/apt/archives/" {} + 2>/dev/null || true
}

start() {
    local name="$1" dir="$2"
    command -v systemd-nspawn >/dev/null || die "systemd-nspawn is missing (apt-get install systemd-container)"
    unpack "$name" "$dir"
    local cgroup_env=()
    if needs_unified_cgroup "$dir/root"; then cgroup_env=(SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1); fi
    env "${cgroup_env[@]}" setsid systemd-nspawn -D "$dir/root" -M "$name" -b --register=no --keep-unit \
        --console=pipe </dev/null >"$dir/console.log" 2>&1 &
    echo $! >"$dir/nspawn.pid"
    local pid="" state=""
    for _ in $(seq 1 120); do
        pid="$(init_pid "$(cat "$dir/nspawn.pid")" || true)"
        if [ -n "$pid" ]; then
            state="$(nsenter -t "$pid" -a systemctl is-system-running 2>/dev/null || true)"
            case "$state" in running|degraded) break ;; esac
        fi
        kill -0 "$(cat "$dir/nspawn.pid")" 2>/dev/null || { cat "$dir/console.log" >&2; die "systemd-nspawn exited"; }
        sleep 0.5
    done
    case "$state" in running|degraded) ;; *) cat "$dir/console.log" >&2; die "target $name did not boot (state: ${state:-none})" ;; esac
    echo "$pid"
}

stop() {
    local name="$1" dir="$2" nspawn_pid pid
    if [ -s "$dir/nspawn.pid" ]; then
        nspawn_pid="$(cat "$dir/nspawn.pid")"
        if kill -0 "$nspawn_pid" 2>/dev/null; then
            pid="$(init_pid "$nspawn_pid" || true)"
            # The target is thrown away: killing its PID 1 makes the kernel end every process
            # of its PID namespace at once, and nspawn exits after it (a clean poweroff takes ~10 s).
            if [ -n "$pid" ]; then kill -s KILL "$pid" 2>/dev/null || true; fi
            for _ in $(seq 1 40); do kill -0 "$nspawn_pid" 2>/dev/null || break; sleep 0.25; done
            kill "$nspawn_pid" 2>/dev/null || true
            for _ in $(seq 1 20); do kill -0 "$nspawn_pid" 2>/dev/null || break; sleep 0.25; done
        fi
    fi
    # Only ever remove the directory this script created; keep its downloads for the next run,
    # with the packages of the suite it was started with.
    if [ -d "$dir/root" ]; then
        local archives
        archives="$(archives_of "$(cat "$dir/suite" 2>/dev/null || echo "$suite")")"
        mkdir -p "$archives"
        # Through a temporary name and a rename, so a scenario starting meanwhile never links a half-copied file.
        local deb
        for deb in "$dir/root/var/cache/apt/archives/"*.deb; do
            if [ ! -e "$deb" ] || [ -e "$archives/${deb##*/}" ]; then continue; fi
            if cp "$deb" "$archives/.${deb##*/}.$$"; then mv -f "$archives/.${deb##*/}.$$" "$archives/${deb##*/}" || true; fi
        done
        rm -rf --one-file-system "$dir/root"
    fi
    # The console log stays for a post-mortem until the next start.
    rm -f "$dir/nspawn.pid" "$dir/suite"
}

case "${1:-}" in
    image) build_image; echo "$image" ;;
    unpack) [ $# -eq 3 ] || die "usage: $0 unpack NAME DIR"; unpack "$2" "$3" ;;
    start) [ $# -eq 3 ] || die "usage: $0 start NAME DIR"; start "$2" "$3" ;;
    stop) [ $# -eq 3 ] || die "usage: $0 stop NAME DIR"; stop "$2" "$3" ;;
    *) die "usage: $0 image | unpack NAME DIR | start NAME DIR | stop NAME DIR" ;;
esac
