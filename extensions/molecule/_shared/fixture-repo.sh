#!/usr/bin/env bash
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Builds a signed, flat apt repository of TEST FIXTURE packages named like NVIDIA's
# (nvidia-container-toolkit and its dependencies), because NVIDIA's repository is not
# reachable from CI. The packages contain shell scripts, not NVIDIA software:
# nvidia-container-runtime hands every call to runc. Nothing here tests a GPU.
#
#   fixture-repo.sh DEST    DEST gets Packages, Release, InRelease, the .debs and fixture-key.asc
set -euo pipefail
# shellcheck source=/dev/null
. "$(dirname "$0")/sign-flat-repo.sh"

dest="${1:?usage: fixture-repo.sh DEST}"
versions="1.17.7-1+kubehwfixture 1.17.8-1+kubehwfixture"
marker="kubehw.devices TEST FIXTURE, not NVIDIA software"

for tool in dpkg-deb dpkg-scanpackages gpg; do
    command -v "$tool" >/dev/null || { echo "fixture-repo.sh: $tool is missing (apt-get install dpkg-dev gpg)" >&2; exit 1; }
done

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
rm -rf "$dest"
mkdir -p "$dest"

# package NAME VERSION DEPENDS -- then files as PATH=CONTENT-FILE pairs
package() {
    local name="$1" version="$2" depends="$3"; shift 3
    local root="$work/$name-$version"
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
        echo " Stand-in for NVIDIA's $name in kubehw.devices role tests."
    } >"$root/DEBIAN/control"
    echo "$marker" >"$root/usr/share/doc/$name/KUBEHW_TEST_FIXTURE"
    local pair path src
    for pair in "$@"; do
        path="${pair%%=*}"; src="${pair#*=}"
        install -D -m 0755 "$src" "$root$path"
    done
    dpkg-deb --root-owner-group -Zgzip --build "$root" "$dest/${name}_${version}_all.deb" >/dev/null
}

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

for version in $versions; do
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
        "/usr/bin/nvidia-container-cli=$work/nvidia-container-cli"
    package nvidia-container-toolkit-base "$version" "" \
        "/usr/bin/nvidia-ctk=$work/nvidia-ctk-$version" \
        "/usr/bin/nvidia-container-runtime=$work/nvidia-container-runtime"
    package nvidia-container-toolkit "$version" \
        "nvidia-container-toolkit-base (= $version), libnvidia-container-tools (>= $version), runc" \
        "/usr/bin/nvidia-container-runtime-hook=$work/nvidia-container-runtime-hook"
done

cd "$dest"
# A throwaway key per build: the role takes the mirror's key by URL, as for a real mirror.
sign_flat_repo "$work" "kubehw.devices TEST FIXTURE repository <fixture@kubehw.invalid>" --multiversion
