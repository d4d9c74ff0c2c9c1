#!/usr/bin/env bash
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# The pytest stages that need a Kubernetes API (make integration, make min-versions, make core-2.18):
#   scripts/cluster_stage.sh STAGE REPORTS PYTHON [pytest arguments...]
# runs PYTHON -m pytest with those arguments against a real Kubernetes control plane and keeps pytest's exit code in
# REPORTS/STAGE.rc:
#   1. ../shared/k8s beside the checkout (or $KUBEHW_K8S_HOME): every pytest worker starts a control plane of its
#      own from it (free ports, state in .cache/real-control-plane/<worker>-<pid>, removed at the end); a kubelet
#      stand-in (tests/support/kubelet.py) registers and serves the nodes each test needs.
#   2. else $KUBECONFIG: the suite runs against that cluster (kind, k3s, a lab cluster); see docs/development.md
#      for what it creates and removes there.
#   3. else: it prints that it did not run and why (REPORTS/STAGE.not-run; the summary says so) and exits 0.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STAGE="$1"
REPORTS="$2"
PY="$3"
shift 3
# ansible-playbook and ansible-runner's tools come from the stage's venv, also when this script runs outside make
export PATH="$(dirname "$PY"):$ROOT/.venv/bin:$PATH"
cd "$ROOT" || exit 1
mkdir -p "$REPORTS"
home="$("$PY" -c 'from tests.support.control_plane import locate; print(locate() or "")')"
if [ -n "$home" ]; then
    echo "$STAGE: real control plane from $home, one per pytest worker (KUBECONFIG ignored)"
    export KUBEHW_CONTROL_PLANE="$home"
    unset KUBECONFIG
elif [ -n "${KUBECONFIG:-}" ]; then
    echo "$STAGE: no control plane folder (../shared/k8s, KUBEHW_K8S_HOME); using the cluster of KUBECONFIG=$KUBECONFIG"
else
    reason="no control plane folder with up.sh (${KUBEHW_K8S_HOME:-../shared/k8s beside the checkout}) and KUBECONFIG unset"
    echo "$STAGE: did not run: $reason"
    echo "$reason" > "$REPORTS/$STAGE.not-run"
    exit 0
fi
echo "pytest $*"
rc=0
"$PY" -m pytest "$@" || rc=$?
echo "$rc" > "$REPORTS/$STAGE.rc"
exit "$rc"
