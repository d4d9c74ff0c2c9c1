#!/usr/bin/env bash
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Builds a signed, flat apt repository of TEST FIXTURE packages named like NVIDIA's or Docker's, because their
# repositories are not reachable from CI. The packages hold shell scripts and a dummy unit, not NVIDIA or Docker
# software. Nothing here tests a GPU.
#
#   fixture-repo.sh toolkit DEST     nvidia-container-toolkit and its dependencies, two versions;
#                                    nvidia-container-runtime hands every call to runc
#   fixture-repo.sh driver DEST      what the nvidia_driver role installs on Debian 12 from the CUDA
#                                    repository (cuda-drivers-550, nvidia-persistenced, firmware-misc-nonfree)
#   fixture-repo.sh containerd DEST  containerd.io, which the container_runtime role installs from Docker's
#                                    repository; it depends on the distribution's containerd, which is what runs
#                                    (so it proves the repository path, key and package, not a containerd 1.7)
#
# DEST gets Packages, Release, InRelease, the .debs, the signing key fixture-key.asc and its
# fingerprint fixture-key.fpr (what a site pins: the roles check the key against it).
set -euo pipefail

kind="${1:-}"
dest="${2:-}"
case "$kind" in toolkit|driver|containerd) ;; *) echo "usage: fixture-repo.sh toolkit|driver|containerd DEST" >&2; exit 2 ;; esac
[ -n "$dest" ] || { echo "usage: fixture-repo.sh toolkit|driver|containerd DEST" >&2; exit 2; }
marker="kubehw.devices TEST FIXTURE, not NVIDIA or Docker software"
vendor="NVIDIA's"

for tool in dpkg-deb dpkg-scanpackages gpg; do
    command -v "$tool" >/dev/null || { echo "fixture-repo.sh: $tool is missing (apt-get install dpkg-dev gpg)" >&2; exit 1; }
done

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
rm -rf "$dest"
mkdir -p "$dest"

# package NAME VERSION DEPENDS -- then files as PATH=MODE=CONTENT-FILE triples
package() {
    local name="$1" version="$2" depends="$3"; shift 3
    local root="$work/pkg/$name-$version"
    mkdir -p "$root/DEBIAN" "$root/usr/share/doc/$name"
    {
        echo "Package: $name"
        echo "Version: $version"
        echo "Architecture: all"
        echo "Maintainer: kubehw.devices tests <fixture@kubehw.invalid>"
        [ -n "$depends" ] && echo "Depends: $depends"
        echo "Section: utils"
        echo "Priority: optional"
        echo "Description: $marker"
        echo " Stand-in for $vendor $name in kubehw.devices role tests."
    } >"$root/DEBIAN/control"
    echo "$marker" >"$root/usr/share/doc/$name/KUBEHW_TEST_FIXTURE"
    local triple path mode src
    for triple in "$@"; do
        path="${triple%%=*}"; triple="${triple#*=}"
        mode="${triple%%=*}"; src="${triple#*=}"
        install -D -m "$mode" "$src" "$root$path"
    done
    dpkg-deb --root-owner-group -Zgzip --build "$root" "$dest/${name}_${version}_all.deb" >/dev/null
}

# Index the .debs in DEST as a flat apt repository and sign it with a throwaway key made for this build,
# as a real mirror is signed; the key and its fingerprint are published next to the packages.
sign_repo() {
    local uid="$1"; shift
    cd "$dest"
    dpkg-scanpackages "$@" . /dev/null 2>/dev/null >Packages
    gzip -9nk Packages
    {
        echo "Origin: kubehw.devices test fixtures"
        echo "Label: kubehw.devices TEST FIXTURE (not NVIDIA or Docker)"
        echo "Date: $(LC_ALL=C date -u '+%a, %d %b %Y %H:%M:%S UTC')"
        echo "SHA256:"
        for f in Packages Packages.gz; do
            printf ' %s %s %s\n' "$(sha256sum "$f" | cut -d' ' -f1)" "$(stat -c %s "$f")" "$f"
        done
    } >Release
    export GNUPGHOME="$work/gnupg"
    mkdir -m 0700 "$GNUPGHOME"
    gpg --batch --quiet --passphrase '' --quick-gen-key "$uid" ed25519 sign 1d 2>/dev/null
    gpg --batch --quiet --armor --export >fixture-key.asc
    gpg --batch --with-colons --list-keys 2>/dev/null | awk -F: '$1 == "fpr" { print $10; exit }' >fixture-key.fpr
    gpg --batch --quiet --clearsign -o InRelease Release
    gpg --batch --quiet -abs -o Release.gpg Release
}

toolkit() {
    cat >"$work/nvidia-container-runtime" <<'SCRIPT'
#!/bin/sh
# kubehw.devices TEST FIXTURE, not NVIDIA software: records the call, then runs runc.
echo "$*" >>/run/kubehw-fixture-nvidia-container-runtime.log 2>/dev/null || true
exec runc "$@"
SCRIPT

    cat >"$work/nvidia-container-runtime-hook" <<'SCRIPT'
#!/bin/sh
# kubehw.devices TEST FIXTURE, not NVIDIA software: a prestart hook that does nothing.
exit 0
SCRIPT

    cat >"$work/nvidia-container-cli" <<'SCRIPT'
#!/bin/sh
# kubehw.devices TEST FIXTURE, not NVIDIA software.
echo "nvidia-container-cli: kubehw.devices test fixture, no GPU support" >&2
exit 1
SCRIPT

    local version upstream
    for version in 1.17.7-1+kubehwfixture 1.17.8-1+kubehwfixture; do
        upstream="${version%%-*}"
        sed "s/@VERSION@/$upstream/" >"$work/nvidia-ctk-$version" <<'SCRIPT'
#!/bin/sh
# kubehw.devices TEST FIXTURE, not NVIDIA software: answers the nvidia-ctk calls the roles make.
case "$1 $2" in
    "--version "*|"-v "*)
        echo "NVIDIA Container Toolkit CLI version @VERSION@ (kubehw.devices TEST FIXTURE)" ;;
    "cdi generate")
        spec='---
cdiVersion: 0.5.0
kind: nvidia.com/gpu
# kubehw.devices TEST FIXTURE: no real device behind this specification
devices:
  - name: all
    containerEdits:
      env:
        - KUBEHW_FIXTURE_GPU=all
containerEdits:
  env:
    - NVIDIA_CTK_FIXTURE_VERSION=@VERSION@'
        out=""
        for arg in "$@"; do case "$arg" in --output=*) out="${arg#--output=}" ;; esac; done
        if [ -n "$out" ]; then printf '%s\n' "$spec" >"$out"; else printf '%s\n' "$spec"; fi ;;
    *)
        echo "nvidia-ctk (kubehw.devices test fixture): unsupported call: $*" >&2
        exit 1 ;;
esac
SCRIPT
        package libnvidia-container1 "$version" ""
        package libnvidia-container-tools "$version" "libnvidia-container1 (>= $version)" \
            "/usr/bin/nvidia-container-cli=0755=$work/nvidia-container-cli"
        package nvidia-container-toolkit-base "$version" "" \
            "/usr/bin/nvidia-ctk=0755=$work/nvidia-ctk-$version" \
            "/usr/bin/nvidia-container-runtime=0755=$work/nvidia-container-runtime"
        package nvidia-container-toolkit "$version" \
            "nvidia-container-toolkit-base (= $version), libnvidia-container-tools (>= $version), runc" \
            "/usr/bin/nvidia-container-runtime-hook=0755=$work/nvidia-container-runtime-hook"
    done
    sign_repo "kubehw.devices TEST FIXTURE repository <fixture@kubehw.invalid>" --multiversion
}

driver() {
    local version="550.54.15-1+kubehwfixture"
    # nvidia-smi answers like the real one: the version once "the driver is loaded" (a marker file
    # the test creates), otherwise the error the real one prints before a reboot.
    cat >"$work/nvidia-smi" <<'SCRIPT'
#!/bin/sh
# kubehw.devices TEST FIXTURE, not NVIDIA software.
if [ -e /run/kubehw-fixture-driver-loaded ]; then
    case "$*" in
        *--query-gpu=driver_version*) echo "550.54.15" ;;
        *) echo "kubehw.devices test fixture: no GPU" ;;
    esac
    exit 0
fi
echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
exit 9
SCRIPT

    cat >"$work/nvidia-persistenced" <<'SCRIPT'
#!/bin/sh
# kubehw.devices TEST FIXTURE, not NVIDIA software: stays up like the daemon does.
exec sleep infinity
SCRIPT

    cat >"$work/nvidia-persistenced.service" <<'UNIT'
[Unit]
Description=kubehw.devices TEST FIXTURE standing in for the NVIDIA Persistence Daemon

[Service]
ExecStart=/usr/bin/nvidia-persistenced

[Install]
WantedBy=multi-user.target
UNIT

    echo "$marker" >"$work/firmware-readme"

    package nvidia-persistenced "$version" "" \
        "/usr/bin/nvidia-persistenced=0755=$work/nvidia-persistenced" \
        "/lib/systemd/system/nvidia-persistenced.service=0644=$work/nvidia-persistenced.service"
    package cuda-drivers-550 "$version" "nvidia-persistenced (= $version)" \
        "/usr/bin/nvidia-smi=0755=$work/nvidia-smi"
    package firmware-misc-nonfree "$version" "" \
        "/usr/lib/firmware/nvidia/KUBEHW_TEST_FIXTURE=0644=$work/firmware-readme"
    sign_repo "kubehw.devices TEST FIXTURE driver repository <fixture@kubehw.invalid>"
}

containerd() {
    vendor="Docker's"
    package containerd.io "1.7.27-1+kubehwfixture" "containerd"
    sign_repo "kubehw.devices TEST FIXTURE containerd.io repository <fixture@kubehw.invalid>"
}

"$kind"
