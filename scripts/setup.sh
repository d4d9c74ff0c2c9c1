#!/usr/bin/env bash
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Prepare a development/CI machine for kubehw.devices. Idempotent: a second run only checks
# stamps and takes seconds. Reaches only PyPI and Debian's package mirrors.
#
#   .venv/                         pinned tools from requirements-dev.txt
#   .cache/collections/            test-only collections unpacked from the PyPI `ansible` wheel,
#                                  plus ansible_collections/kubehw/devices -> this checkout
#   ~/.ansible/test/cache/         offline replacement for ansible-test's pip bootstrap download
#   .cache/k8s-bin/, .cache/k8s-release/
#                                  the Kubernetes binaries of the test control plane: unpacked from ../shared/k8s/bin or
#                                  $KUBEHW_K8S_ASSETS, else downloaded from the official release locations (or
#                                  $KUBEHW_K8S_MIRROR) and verified as tests/support/k8s_release.json says
#   system-wide (root only)        the Debian packages of DEB_PACKAGES that were missing; their names are
#                                  appended to .cache/debian-packages-installed-by-setup.txt (make clean
#                                  prints them, with the command that removes them)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck source=scripts/apt.sh
. "$ROOT/scripts/apt.sh"

# The interpreter .venv is built on: $PYTHON if set, else Debian's python3.11 where present, else python3.11 from PATH.
# Debian builds its Python with profile-guided and link-time optimisation; a default source build (pyenv's, first in
# PATH on some machines) has neither, and everything the tests run in Python (pytest, ansible-playbook, the modules)
# costs about a quarter more CPU on it (docs/development.md).
if [ -z "${PYTHON:-}" ]; then
    if [ -x /usr/bin/python3.11 ]; then PYTHON=/usr/bin/python3.11; else PYTHON=python3.11; fi
fi
VENV="$ROOT/.venv"
CACHE="$ROOT/.cache"
ANSIBLE_WHEEL_VERSION="12.3.0"
# Collections the tests, molecule scenarios and lint need; kubernetes.core is also galaxy.yml's one dependency, which
# the install tests take from here in place of Galaxy.
TEST_COLLECTIONS="kubernetes.core community.general community.docker ansible.posix"
# Debian packages the role scenarios and the real node use: root file systems, nspawn targets, local apt repos, the
# relays between the real node's network and the host's (socat).
DEB_PACKAGES="mmdebstrap systemd-container dpkg-dev gpg iproute2 shellcheck ca-certificates socat"

log() { printf '[setup] %s\n' "$*"; }

installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

install_debian_packages() {
    local missing=() pkg
    for pkg in $DEB_PACKAGES; do
        if ! installed "$pkg"; then
            missing+=("$pkg")
        fi
    done
    if [ "${#missing[@]}" -eq 0 ]; then
        log "Debian packages present"
        return 0
    fi
    if ! can_apt_get_install; then
        log "WARNING: missing Debian packages (${missing[*]}); not root or no apt-get, role scenarios may fail"
        return 0
    fi
    log "apt-get install ${missing[*]} (system-wide)"
    apt_install_recorded "${missing[@]}"
}

apt_install_recorded() {
    # Install Debian packages and record their names for make clean's list of what to purge.
    apt_get_install "$@"
    mkdir -p "$CACHE"
    printf '%s\n' "$@" >>"$CACHE/debian-packages-installed-by-setup.txt"
}

make_venv() {
    # Debian splits venv and ensurepip (which ansible-test's sanity environments use too) out of its Python: install
    # python3.X-venv when a venv cannot be made without it.
    local why package
    if why="$("$PYTHON" -m venv "$VENV" 2>&1)"; then
        return 0
    fi
    rm -rf "$VENV"
    package="python$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')-venv"
    if installed "$package" || ! can_apt_get_install; then
        log "ERROR: $PYTHON -m venv does not work; install $package (Debian) or name another Python in PYTHON"
        printf '%s\n' "$why" >&2
        return 1
    fi
    log "apt-get install $package (system-wide: $PYTHON -m venv needs it)"
    apt_install_recorded "$package"
    "$PYTHON" -m venv "$VENV"
}

create_venv() {
    # The stamp names the interpreter too: .venv is made again when another one is chosen.
    local stamp="$VENV/.requirements.sha256" want interpreter
    interpreter="$("$PYTHON" -c 'import sys; print(sys.executable)')"
    want="$(sha256sum <requirements-dev.txt | cut -d' ' -f1) $interpreter"
    if [ -x "$VENV/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
        log ".venv up to date"
        return 0
    fi
    if [ -x "$VENV/bin/python" ] && [ "$(cut -s -d' ' -f2- "$stamp" 2>/dev/null)" != "$interpreter" ]; then
        log "making .venv again with $interpreter"
        rm -rf "$VENV"
    fi
    if [ ! -x "$VENV/bin/python" ]; then
        log "creating .venv with $interpreter"
        make_venv
    fi
    log "installing requirements-dev.txt into .venv"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r requirements-dev.txt
    echo "$want" >"$stamp"
}

unpack_collections() {
    local wheel_dir="$CACHE/downloads" stamp="$CACHE/collections/.stamp"
    local want="ansible==$ANSIBLE_WHEEL_VERSION $TEST_COLLECTIONS"
    mkdir -p "$wheel_dir" "$CACHE/collections/ansible_collections"
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
        log "test collections up to date"
    else
        if ! compgen -G "$wheel_dir/ansible-$ANSIBLE_WHEEL_VERSION-*.whl" >/dev/null; then
            log "downloading ansible==$ANSIBLE_WHEEL_VERSION wheel (collections only are used)"
            "$VENV/bin/python" -m pip download -q --disable-pip-version-check --no-deps \
                -d "$wheel_dir" "ansible==$ANSIBLE_WHEEL_VERSION"
        fi
        # shellcheck disable=SC2086  # the collection list is meant to split into arguments
        "$VENV/bin/python" "$ROOT/scripts/unpack_collections.py" \
            "$(compgen -G "$wheel_dir/ansible-$ANSIBLE_WHEEL_VERSION-*.whl" | head -n1)" \
            "$CACHE/collections" $TEST_COLLECTIONS
        echo "$want" >"$stamp"
    fi
    # The checkout itself, reachable as kubehw.devices by ansible-playbook, molecule and pytest.
    mkdir -p "$CACHE/collections/ansible_collections/kubehw"
    ln -sfn ../../../.. "$CACHE/collections/ansible_collections/kubehw/devices"
}

install_pip_bootstrap() {
    # ansible-test downloads get-pip from a host this network cannot reach; it uses a cached copy if present.
    local version target
    version="$("$VENV/bin/python" - <<'EOF'
import os, re, ansible_test
path = os.path.join(os.path.dirname(ansible_test.__file__), '_internal', 'python_requirements.py')
with open(path) as f:
    print(re.search(r"pip='([0-9.]+)'", f.read()).group(1))
EOF
)"
    target="$HOME/.ansible/test/cache/get_pip_${version//./_}.py"
    mkdir -p "$(dirname "$target")"
    if ! cmp -s "$ROOT/scripts/get_pip_offline.py" "$target"; then
        log "installing offline pip bootstrap for ansible-test as $target"
        cp "$ROOT/scripts/get_pip_offline.py" "$target"
    fi
}

prepare_kubernetes_binaries() {
    local found
    if found="$("$VENV/bin/python" -m tests.support.k8s_binaries locate)"; then
        log "Kubernetes binaries: $found"
        return 0
    fi
    log "no Kubernetes binaries (KUBEHW_K8S_ASSETS, ../shared/k8s/bin): downloading the pinned release"
    if ! found="$("$VENV/bin/python" -m tests.support.k8s_binaries download)"; then
        # The rule of scripts/run_tests.py: where every stage must run (CI=true, KUBEHW_REQUIRE_ALL_STAGES=1), a machine
        # without the binaries fails here, with the reason above, instead of reaching the cluster stages.
        if "$VENV/bin/python" -c 'import sys; sys.path.insert(0, "scripts"); import run_tests
sys.exit(0 if run_tests.every_stage_required() else 1)'; then
            log "ERROR: no Kubernetes binaries and the pinned release could not be downloaded (see above); every stage must run here (CI=true or KUBEHW_REQUIRE_ALL_STAGES=1): set KUBEHW_K8S_ASSETS to a folder of them or KUBEHW_K8S_MIRROR to a mirror of the release"
            return 1
        fi
        log "WARNING: no Kubernetes binaries and the pinned release could not be downloaded (see above); make demo and the cluster stages need them"
        return 0
    fi
    log "Kubernetes binaries: $found"
}

install_debian_packages
create_venv
unpack_collections
install_pip_bootstrap
prepare_kubernetes_binaries
log "done"
