#!/usr/bin/env bash
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# The pytest stages that need a Kubernetes API (make integration, make min-versions, make core-2.18, make node):
#   scripts/cluster_stage.sh STAGE REPORTS PYTHON [pytest arguments...]
# runs PYTHON -m pytest with those arguments against a real Kubernetes control plane and keeps pytest's exit code in
# REPORTS/STAGE.rc:
#   1. Kubernetes release binaries (tests/support/k8s_binaries.py: $KUBEHW_K8S_ASSETS, ../shared/k8s/bin, or what
#      make setup downloaded): every pytest worker starts a control plane of its own from them (free ports, state in
#      .cache/real-control-plane/<worker>-<pid>, removed at the end); a kubelet stand-in (tests/support/kubelet.py)
#      registers and serves the nodes each test needs.
#   2. else $KUBECONFIG: the suite runs against that cluster (kind, k3s, a lab cluster); see docs/development.md
#      for what it creates and removes there.
#   3. else: it prints that it did not run and why (REPORTS/STAGE.not-run; the summary says so) and exits 0.
# STAGE node (make node) is the real-node suite instead: a real kubelet and containerd in a systemd-nspawn root file
# system behind a control plane of its own (tests/support/real_node.py). Where this machine cannot run one (not root,
# no systemd-nspawn, no cgroup v1 controllers, no kubelet and Kubernetes test plugins beside the binaries) it prints
# why and writes it to REPORTS/node.not-run, as in 3.; else it builds or awaits the node's Debian sid image before
# pytest's clock runs, and prints the node's set-up times after the run.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STAGE="$1"
REPORTS="$2"
PY="$3"
shift 3
# ansible-playbook and ansible-runner's tools come from the stage's venv, also when this script runs outside make
PY_BIN="$(dirname "$PY")"
export PATH="$PY_BIN:$ROOT/.venv/bin:$PATH"
cd "$ROOT" || exit 1
mkdir -p "$REPORTS"
not_run() {
    echo "$STAGE: did not run: $1"
    echo "$1" > "$REPORTS/$STAGE.not-run"
    exit 0
}
if [ "$STAGE" = node ]; then
    reason="$("$PY" -c 'from tests.support.real_node import unavailable; print(unavailable() or "")')"
    [ -z "$reason" ] || not_run "$reason"
    echo "node: a real kubelet and containerd in systemd-nspawn (tests/support/real_node.py)"
    KUBEHW_TARGET_SUITE=sid bash "$ROOT/extensions/molecule/_shared/target.sh" image >/dev/null || exit 1
    echo "pytest $*"
    rc=0
    "$PY" -m pytest "$@" || rc=$?
    cat "$ROOT/.cache/real-node/node/set-up.log" 2>/dev/null
    echo "$rc" > "$REPORTS/$STAGE.rc"
    exit "$rc"
fi
bin_dir="$("$PY" -c 'from tests.support.k8s_binaries import locate; print(locate() or "")')"
if [ -n "$bin_dir" ]; then
    echo "$STAGE: real control plane from the binaries in $bin_dir, one per pytest worker (KUBECONFIG ignored)"
    export KUBEHW_CONTROL_PLANE="$bin_dir"
    unset KUBECONFIG
elif [ -n "${KUBECONFIG:-}" ]; then
    echo "$STAGE: no Kubernetes binaries (tests/support/k8s_binaries.py); using the cluster of KUBECONFIG=$KUBECONFIG"
else
    not_run "no Kubernetes binaries (${KUBEHW_K8S_ASSETS:-../shared/k8s/bin, or the release make setup downloads}) and KUBECONFIG unset"
fi
echo "pytest $*"
rc=0
"$PY" -m pytest "$@" || rc=$?
echo "$rc" > "$REPORTS/$STAGE.rc"
exit "$rc"
