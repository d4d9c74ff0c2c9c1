# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fidelity probes: each row of tests/simcluster/FACTS.md sends the same requests to the simulated cluster and to a
real kube-apiserver, and compares what the row says matters (status code, reason, the message where the row quotes
it, the fields it names).

Every row is one test, run twice: `test_fact[<row>-sim]` checks the simulated cluster's answer against the row;
`test_fact[<row>-real]` checks the real control plane's answer against the row and against the simulated
cluster's. The real control plane is the cluster of KUBECONFIG when set, else one started from ../shared/k8s
(up.sh, state under .cache/, free ports) for this module and stopped (down.sh) after it; when neither is there,
the real half skips and says why. Each probe makes objects of its own run-unique names and deletes them.

The probes are in tests/integration/facts/, one module per topic of FACTS.md: nodes.py, pods.py, api.py (lists,
watches, tokens, field validation), eviction.py, dra_api.py, scheduling.py, dra_scheduling.py and controllers.py.
Each registers its rows with @row (facts/rows.py) when imported; the import below takes them in a fixed order
(TOPICS), which is the order of the rows and of the test ids. The two clusters and the probe context `t` are in
facts/clusters.py.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from tests.integration.facts.clusters import make_namespace, simulated, started_control_plane
from tests.integration.facts.rows import ROWS
# importing a topic module registers its rows: this order is the order of the rows (and of the test ids)
from tests.integration.facts import nodes, pods, api, eviction, dra_api, scheduling, dra_scheduling, controllers

TOPICS = (nodes, pods, api, eviction, dra_api, scheduling, dra_scheduling, controllers)


# ------------------------------------------------------------------------------------------------- clusters

@pytest.fixture(scope="module")
def sim_target():
    with simulated(controllers=False) as target:
        yield target


@pytest.fixture(scope="module")
def sim_controllers_target():
    with simulated(controllers=True) as target:
        yield target


@pytest.fixture(scope="module")
def real_target():
    with started_control_plane() as (target, reason):
        if target is None:
            print("\nreal control plane: " + reason)
            yield reason
            return
        target.namespace = make_namespace(target)
        yield target
        target.req("DELETE", "/api/v1/namespaces/" + target.namespace)


# ------------------------------------------------------------------------------------------------- the test

_SIM_SEEN = {}


def _observe(target, probe):
    try:
        return probe(target)
    finally:
        target.cleanup()


def _check(expect, observed, who):
    if callable(expect):
        expect(observed)
    else:
        assert observed == expect, "%s answered differently from the row" % who


@pytest.mark.parametrize("side", ["sim", "real"])
@pytest.mark.parametrize("probe, expect", ROWS)
def test_fact(request, side, probe, expect):
    if probe.known_difference:
        request.applymarker(pytest.mark.xfail(reason=probe.known_difference, strict=True))
    real = request.getfixturevalue("real_target") if side == "real" else None
    if isinstance(real, str):
        pytest.skip("real half not run: " + real)
    sim = request.getfixturevalue("sim_controllers_target" if probe.controllers else "sim_target")
    # the real half compares with what the sim half saw when it ran in this process (the sim half runs first)
    sim_seen = _SIM_SEEN.pop(probe.row_id) if side == "real" and probe.row_id in _SIM_SEEN else _observe(sim, probe)
    if side == "sim":
        _SIM_SEEN[probe.row_id] = sim_seen
        _check(expect, sim_seen, "the simulated cluster")
        return
    real_seen = _observe(real, probe)
    _check(expect, real_seen, "kube-apiserver v1.36.2")
    assert sim_seen == real_seen, "the simulated cluster and kube-apiserver answer differently"
