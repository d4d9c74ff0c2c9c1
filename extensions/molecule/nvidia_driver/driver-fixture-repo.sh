#!/usr/bin/env bash
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Builds a signed, flat apt repository of TEST FIXTURE packages named like the ones the
# nvidia_driver role installs on Debian 12 from NVIDIA's CUDA repository (cuda-drivers-550,
# nvidia-persistenced, firmware-misc-nonfree), because that repository is not reachable from CI.
# The packages hold shell scripts and a dummy unit, not NVIDIA software. Nothing here tests a GPU.
#
#   driver-fixture-repo.sh DEST    DEST gets Packages, Release, InRelease, the .debs and fixture-key.asc
set -euo pipefail
# shellcheck source=/dev/null
. "$(dirname "$0")/../_shared/sign-flat-repo.sh"

dest="${1:?usage: driver-fixture-repo.sh DEST}"
version="550.54.15-1+kubehwfixture"
marker="kubehw.devices TEST FIXTURE, not NVIDIA software"

for tool in dpkg-deb dpkg-scanpackages gpg; do
    command -v "$tool" >/dev/null || { echo "driver-fixture-repo.sh: $tool is missing (apt-get install dpkg-dev gpg)" >&2; exit 1; }
done

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
rm -rf "$dest"
mkdir -p "$dest"

# package NAME DEPENDS -- then files as PATH=MODE=CONTENT-FILE triples
package() {
    local name="$1" depends="$2"; shift 2
    local root="$work/pkg/$name"
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
        echo " Stand-in for $name in kubehw.devices role tests."
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

package nvidia-persistenced "" \
    "/usr/bin/nvidia-persistenced=0755=$work/nvidia-persistenced" \
    "/lib/systemd/system/nvidia-persistenced.service=0644=$work/nvidia-persistenced.service"
package cuda-drivers-550 "nvidia-persistenced (= $version)" \
    "/usr/bin/nvidia-smi=0755=$work/nvidia-smi"
package firmware-misc-nonfree "" \
    "/usr/lib/firmware/nvidia/KUBEHW_TEST_FIXTURE=0644=$work/firmware-readme"

cd "$dest"
# A throwaway key per build; the role copies it from a path on the host (air-gapped style).
sign_flat_repo "$work" "kubehw.devices TEST FIXTURE driver repository <fixture@kubehw.invalid>"
