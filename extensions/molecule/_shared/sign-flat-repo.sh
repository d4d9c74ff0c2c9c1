# shellcheck shell=bash
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# Sourced by the fixture repository scripts: index the .debs in the current directory as a flat
# apt repository and sign it with a throwaway key (fixture-key.asc), as a real mirror is signed.
#
#   sign_flat_repo WORKDIR "KEY USER ID" [dpkg-scanpackages options...]
sign_flat_repo() {
    local work="$1" uid="$2"; shift 2
    dpkg-scanpackages "$@" . /dev/null 2>/dev/null >Packages
    gzip -9nk Packages
    {
        echo "Origin: kubehw.devices test fixtures"
        echo "Label: kubehw.devices TEST FIXTURE (not NVIDIA)"
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
    gpg --batch --quiet --clearsign -o InRelease Release
    gpg --batch --quiet -abs -o Release.gpg Release
}
