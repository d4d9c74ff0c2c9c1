#!/usr/bin/env bash
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# make node: the real-node suite (tests/real_node) against a real kubelet and containerd in a systemd-nspawn root file
# system (tests/support/real_node.py), behind a control plane of the stage's own:
#   scripts/node_stage.sh REPORTS PYTHON [pytest arguments...]
# keeps pytest's exit code in REPORTS/node.rc. Where this machine cannot run a real node (not root, no systemd-nspawn,
# no cgroup v1 controllers, no kubelet and Kubernetes test plugins in the binaries' folder) it prints why, writes the
# reason to REPORTS/node.not-run (the summary says so: never a silent pass) and exits 0.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REPORTS="$1"
PY="$2"
shift 2
PY_BIN="$(dirname "$PY")"
export PATH="$PY_BIN:$ROOT/.venv/bin:$PATH"
cd "$ROOT" || exit 1
mkdir -p "$REPORTS"
reason="$("$PY" -c 'from tests.support.real_node import unavailable; print(unavailable() or "")')"
if [ -n "$reason" ]; then
    echo "node: did not run: $reason"
    echo "$reason" > "$REPORTS/node.not-run"
    exit 0
fi
echo "node: a real kubelet and containerd in systemd-nspawn (tests/support/real_node.py)"
# The node's Debian sid image, built once (or awaited while the role scenarios build it) before any test's clock runs.
KUBEHW_TARGET_SUITE=sid bash "$ROOT/extensions/molecule/_shared/target.sh" image >/dev/null || exit 1
echo "pytest $*"
rc=0
"$PY" -m pytest "$@" || rc=$?
cat "$ROOT/.cache/real-node/node/set-up.log" 2>/dev/null
echo "$rc" > "$REPORTS/node.rc"
exit "$rc"
