#!/usr/bin/env bash
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Test equipment of the host_preflight scenario, run on the controller against a target's root file system (the
# directory systemd-nspawn boots, so no module runs inside the target): a host ready for the GPU roles, each thing
# such a host can lack, and what changed in it since a mark.
#
#   host-state.sh ready ROOT          the fixture trees and the headers of the running kernel (once, in prepare)
#   host-state.sh lack WHAT ROOT      make the host lack WHAT: os-release, kernel-headers or containerd-1.5
#   host-state.sh restore WHAT ROOT   give it back
#   host-state.sh mark ROOT           remember this moment
#   host-state.sh changed ROOT        every path created or changed since the mark (the journal aside)
#
# The target shares this machine's kernel and its /sys and /proc, which no test may change, so what the preflight
# reads there comes from fixture trees (a sysfs with an NVIDIA GPU, one without, one whose firmware says Secure Boot
# is on; a procfs with no GPU module, one with nouveau loaded, one with NVIDIA's driver loaded), picked by the
# role's *_root variables. **None of this tests a GPU.**
set -euo pipefail

die() { echo "host-state.sh: $*" >&2; exit 1; }

gpu() {   # an NVIDIA H100 on the fixture PCI bus under $1
    local dev="$1/bus/pci/devices/0000:17:00.0"
    mkdir -p "$dev"
    printf '0x10de\n' >"$dev/vendor"
    printf '0x2330\n' >"$dev/device"
    printf '0x030200\n' >"$dev/class"
    printf '0\n' >"$dev/numa_node"
}

ready() {
    local root="$1" srv="$1/srv"
    gpu "$srv/kubehw-fixture-sys"
    gpu "$srv/kubehw-fixture-sys-secure-boot"
    local efivars="$srv/kubehw-fixture-sys-secure-boot/firmware/efi/efivars"
    mkdir -p "$efivars" "$srv/kubehw-fixture-sys-no-gpu/bus/pci/devices"
    # Four bytes of attributes, then the value: 1, Secure Boot is on.
    printf '\006\000\000\000\001' >"$efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
    mkdir -p "$srv/kubehw-fixture-proc" "$srv/kubehw-fixture-proc-nouveau" "$srv/kubehw-fixture-proc-driver/driver/nvidia"
    printf 'ext4 1085440 1 - Live 0x0000000000000000\n' >"$srv/kubehw-fixture-proc/modules"
    printf 'nouveau 3096576 0 - Live 0x0000000000000000\next4 1085440 1 - Live 0x0000000000000000\n' \
        >"$srv/kubehw-fixture-proc-nouveau/modules"
    printf 'nvidia 54140928 0 - Live 0x0000000000000000\next4 1085440 1 - Live 0x0000000000000000\n' \
        >"$srv/kubehw-fixture-proc-driver/modules"
    printf 'NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n' \
        >"$srv/kubehw-fixture-proc-driver/driver/nvidia/version"
    # The target runs this machine's kernel, whose headers no Debian mirror carries: the ready host has them.
    mkdir -p "$root/lib/modules/$(uname -r)/build"
}

lack() {
    local root="$2"
    case "$1" in
        # A release the driver role does not install on: os-release for the preflight, debian_version for Ansible's
        # facts, which the driver role reads.
        os-release)
            rm -f "$root/etc/os-release"
            printf '%s\n' 'PRETTY_NAME="Debian GNU/Linux 11 (bullseye)"' 'NAME="Debian GNU/Linux"' 'VERSION_ID="11"' \
                'VERSION="11 (bullseye)"' 'VERSION_CODENAME=bullseye' 'ID=debian' >"$root/etc/os-release"
            mv "$root/etc/debian_version" "$root/etc/debian_version.kubehw"
            printf '11.11\n' >"$root/etc/debian_version" ;;
        kernel-headers) rm -rf "$root/lib/modules/$(uname -r)/build" ;;
        # An installed containerd older than the drop-in files the roles write (Ubuntu 22.04's first one).
        containerd-1.5)
            printf '%s\n' '#!/bin/sh' 'echo "containerd github.com/containerd/containerd 1.5.9 1.5.9-0ubuntu3"' \
                >"$root/usr/local/bin/containerd"
            chmod 0755 "$root/usr/local/bin/containerd" ;;
        *) die "nothing called $1 to lack" ;;
    esac
}

restore() {
    local root="$2"
    case "$1" in
        os-release)
            rm -f "$root/etc/os-release"
            ln -s ../usr/lib/os-release "$root/etc/os-release"
            mv "$root/etc/debian_version.kubehw" "$root/etc/debian_version" ;;
        kernel-headers) mkdir -p "$root/lib/modules/$(uname -r)/build" ;;
        containerd-1.5) rm -f "$root/usr/local/bin/containerd" ;;
        *) die "nothing called $1 to restore" ;;
    esac
}

mark_file() { echo "$1/../kubehw-mark"; }

case "${1:-}" in
    ready) [ $# -eq 2 ] || die "usage: $0 ready ROOT"; ready "$2" ;;
    lack) [ $# -eq 3 ] || die "usage: $0 lack WHAT ROOT"; lack "$2" "$3" ;;
    restore) [ $# -eq 3 ] || die "usage: $0 restore WHAT ROOT"; restore "$2" "$3" ;;
    # The mark lies beside the root, so making it changes nothing inside; times compare to the nanosecond.
    mark) [ $# -eq 2 ] || die "usage: $0 mark ROOT"; touch "$(mark_file "$2")" ;;
    changed)
        [ $# -eq 2 ] || die "usage: $0 changed ROOT"
        [ -e "$(mark_file "$2")" ] || die "no mark beside $2"
        # ctime, not mtime: dpkg gives the files it unpacks the package's times. The journal records every module
        # the runs start (systemd-journald, not the preflight).
        find "$2" -xdev -cnewer "$(mark_file "$2")" -not -path "$2/var/log/journal" -not -path "$2/var/log/journal/*" \
            -printf '/%P\n' | sort ;;
    *) die "usage: $0 ready ROOT | lack WHAT ROOT | restore WHAT ROOT | mark ROOT | changed ROOT" ;;
esac
