#!/usr/bin/env bash
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# `make real`: the integration suite on a real Kubernetes control plane.
#   1. ../shared/k8s beside the checkout (or $KUBEHW_K8S_HOME): every pytest worker starts a control plane of its
#      own from it (free ports, state in .cache/real-control-plane/<worker>-<pid>, removed at the end) and stops it at the end; a kubelet
#      stand-in (tests/support/kubelet.py) registers and serves the nodes each test needs.
#   2. else $KUBECONFIG: the suite runs against that cluster (kind, k3s, a lab cluster); see docs/development.md
#      for what it creates and removes there.
#   3. else: it prints that it did not run and why, and exits 0.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REPORTS="${1:-$ROOT/.cache/reports}"
PY="$ROOT/.venv/bin/python"
# ansible-playbook and ansible-runner's tools come from .venv, also when this script runs outside make
export PATH="$ROOT/.venv/bin:$PATH"
cd "$ROOT" || exit 1
home="$("$PY" -c 'from tests.support.control_plane import locate; print(locate() or "")')"
if [ -n "$home" ]; then
    echo "real: control plane from $home, one per pytest worker (KUBECONFIG ignored)"
    export KUBEHW_CONTROL_PLANE="$home"
    unset KUBECONFIG
elif [ -n "${KUBECONFIG:-}" ]; then
    echo "real: no control plane folder (../shared/k8s, KUBEHW_K8S_HOME); using the cluster of KUBECONFIG=$KUBECONFIG"
else
    reason="no control plane folder with up.sh (${KUBEHW_K8S_HOME:-../shared/k8s beside the checkout}) and KUBECONFIG unset"
    echo "real: did not run: $reason"
    echo "$reason" > "$REPORTS/real.not-run"
    exit 0
fi
export KUBEHW_SIMCLUSTER=0
# test_demo.py runs `make demo`, which starts the bundled simulated cluster whatever the stage: `make integration` has it
paths="tests/integration --ignore=tests/integration/test_demo.py"
[ -d tests/support/tests ] && paths="$paths tests/support/tests"
echo "pytest $paths (-rs: every skip is listed with its reason at the end)"
rc=0
# shellcheck disable=SC2086
"$PY" -m pytest -p no:cacheprovider --durations=10 --dist loadgroup -rs -n "${PYTEST_JOBS:-2}" \
    --junitxml="$REPORTS/real.xml" $paths || rc=$?
echo "$rc" > "$REPORTS/real.rc"
exit "$rc"
