#!/usr/bin/env bash
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Run `ansible-test sanity` on a copy of the checkout. ansible-test needs a real (not symlinked)
# .../ansible_collections/kubehw/devices directory, and copying only git-tracked plus untracked
# non-ignored files keeps .venv, .cache and build output out of the test.
# Extra arguments go to ansible-test (for example `--test pylint`).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# a copy per run: two runs side by side (two developers' shells in one checkout) never delete each other's
WORK="$ROOT/.cache/sanity/$$"
COPY="$WORK/ansible_collections/kubehw/devices"
VENV="$ROOT/.venv"
trap 'rm -rf "$WORK"' EXIT

rm -rf "$COPY"
mkdir -p "$COPY"
cd "$ROOT"
# -z keeps odd file names intact; files deleted but not yet committed are skipped.
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' path; do
    if [ -e "$path" ] || [ -L "$path" ]; then
        printf '%s\0' "$path"
    fi
done | tar --null --no-recursion -T - -cf - | tar -xf - -C "$COPY"

if [ -e "$COPY/tests/sanity/ignore-2.19.txt" ] || compgen -G "$COPY/tests/sanity/ignore-*.txt" >/dev/null; then
    echo "sanity: tests/sanity/ignore-*.txt exists; this project keeps sanity clean without an ignore file" >&2
    exit 1
fi

cd "$COPY"
# ansible-test lists files with git; without a repository here it would find the checkout's own,
# which ignores .cache, and skip every target.
git init -q .
export PATH="$VENV/bin:$PATH"
ansible-test sanity --local --python 3.11 --color no "$@"
