# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Sourced by .ci/run and scripts/setup.sh: installing Debian packages the one way both do it.
# shellcheck shell=bash

apt_lists_updated=0

# Install Debian packages quietly, without recommends. The package lists are read from the mirror once per run of
# the sourcing script, however many installs follow.
apt_get_install() {
    if [ "$apt_lists_updated" -eq 0 ]; then
        DEBIAN_FRONTEND=noninteractive apt-get update -qq
        apt_lists_updated=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# Whether this run may install Debian packages: root, on a machine with apt-get.
can_apt_get_install() {
    [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1
}
