# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""extended_resource_info (report, wait_allocatable, wait_released) and resource_smoke_test on a cluster.

On any cluster: resources are advertised on Node objects the test creates (no kubelet behind them,
so the test itself plays the kubelet's copy into allocatable where it needs one) and, where a pod
must really run or a kubelet must copy, on a Ready schedulable node of the cluster (kubelet_node),
from which the test removes what it advertised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import threading

import pytest

from tests.integration.conftest import wait_for
from tests.support.k8s_objects import read_out

DONGLE = "example.com/dongle"
# its own resource: tests on the same real node may run side by side (xdist)
WATCHED = "example.com/watched-dongle"
# a shell for `true`: the module's default image (pause) has no other binary than /pause
BUSYBOX = "registry.k8s.io/e2e-test-images/busybox:1.36.1-1"


def allocatable(cluster, node):
    return json.loads(cluster.core.read_node(node, _preload_content=False).data)["status"].get("allocatable") or {}


@pytest.mark.floor
def test_info_reports_capacity_allocatable_and_pending_pods(cluster, ansible):
    # a node with 2 dongles (allocatable defaulted from capacity, as the apiserver does for a new node)
    # and one without any; neither has a kubelet, so no pod runs there
    dongle_node, plain_node = cluster.create_nodes([{"what": "dongle", "capacity": {DONGLE: "2"}},
                                                    {"what": "plain"}])
    run = ansible([
        {"name": "Wait", "kubehw.devices.extended_resource_info": {
            "name": dongle_node, "include_pods": False, "wait_allocatable": {DONGLE: 2}, "wait_timeout": 20}},
        {"name": "Too many", "kubehw.devices.resource_smoke_test": {
            "resource": DONGLE, "count": 3, "expect": "unschedulable", "timeout": 20}},
        {"name": "Report", "kubehw.devices.extended_resource_info": {"names": [dongle_node, plain_node]}},
    ])
    assert run.rc == 0, run.output()
    waited = run.result("Wait")
    assert waited["nodes"][0]["allocatable"] == {DONGLE: "2"}
    report = run.result("Report")
    by_name = dict((n["name"], n) for n in report["nodes"])
    assert sorted(by_name) == sorted([dongle_node, plain_node])
    dongle = by_name[dongle_node]
    assert dongle["capacity"] == {DONGLE: "2"}
    # no kubelet ever reported: the node has no Ready condition
    assert dongle["ready"] != "True"
    assert by_name[plain_node]["capacity"] == {}
    # the smoke-test pod was deleted, so nothing is left pending or using the resource
    assert dongle["pods"] == []
    assert [p for p in report["pending_pods"] if DONGLE in json.dumps(p)] == []
    too_many = run.result("Too many")
    assert too_many["scheduled"] is False and too_many["deleted"] is True
    assert too_many["reason"] == "Unschedulable"
    # the cluster's other nodes have no dongle (the test's own node is not Ready, hence tainted)
    assert "Insufficient example.com/dongle" in too_many["message"]
    assert too_many["changed"] is False


@pytest.mark.floor
def test_wait_allocatable_follows_the_kubelet_copy(cluster, ansible, kubelet_node):
    """The wait returns after the node's kubelet copies capacity into allocatable, by watching."""
    timer = threading.Timer(1.5, cluster.advertise, (kubelet_node, {WATCHED: "3"}))
    timer.start()
    run = ansible([{"name": "Wait", "kubehw.devices.extended_resource_info": {
        "name": kubelet_node, "include_pods": False, "wait_allocatable": {WATCHED: 3}, "wait_timeout": 30}}])
    timer.join()
    assert run.rc == 0, run.output()
    assert run.result("Wait")["nodes"][0]["allocatable"][WATCHED] == "3"
    if cluster.controlled:
        # one list for the read, and then a watch rather than repeated GETs
        node_reads = [r for r in cluster.requests(0)
                      if r["method"] == "GET" and r["path"].startswith("/api/v1/nodes")]
        assert len(node_reads) <= 6, node_reads


def test_wait_allocatable_times_out_naming_the_node(cluster, ansible):
    run = ansible([{"name": "Wait", "ignore_errors": True, "kubehw.devices.extended_resource_info": {
        "name": cluster.node_names()[0], "include_pods": False,
        "wait_allocatable": {"example.com/never-there": 1}, "wait_timeout": 2}}])
    res = run.result("Wait")
    assert res["failed"] is True
    assert "Timed out" in res["msg"] and cluster.node_names()[0] in res["msg"]
    assert "example.com/never-there=0" in res["msg"]


def test_wait_released_watches_until_the_field_asked_is_zero_and_a_timeout_names_what_is_left(cluster, ansible):
    """A stopped device plugin as the kubelet shows it: allocatable "0" at once, capacity kept (5 minutes on a real
    kubelet). The allocatable wait, already watching, returns when that "0" arrives; the capacity wait times out
    naming the node and what it still has."""
    stopping, plain = cluster.create_nodes([{"what": "stopping", "capacity": {WATCHED: "2", DONGLE: "0"}},
                                            {"what": "plain"}])
    unhealthy = [{"op": "replace", "path": "/status/allocatable/" + WATCHED.replace("/", "~1"), "value": "0"}]
    mark = cluster.mark()
    patcher = cluster.when_watching("nodes", lambda: read_out(
        cluster.core.patch_node_status(stopping, unhealthy, _preload_content=False)))
    run = ansible([
        {"name": "Released", "kubehw.devices.extended_resource_info": {
            "names": [stopping, plain], "include_pods": False, "wait_released": [WATCHED, DONGLE],
            "wait_timeout": 30}},
        {"name": "Zeroed", "ignore_errors": True, "kubehw.devices.extended_resource_info": {
            "names": [stopping, plain], "include_pods": False, "wait_released": [WATCHED, DONGLE],
            "wait_released_in": "capacity", "wait_timeout": 2}},
    ])
    patcher.join()
    assert run.rc == 0, run.output()
    by_name = dict((n["name"], n) for n in run.result("Released")["nodes"])
    assert by_name[stopping]["allocatable"][WATCHED] == "0" and by_name[stopping]["capacity"][WATCHED] == "2"
    zeroed = run.result("Zeroed")
    assert zeroed["failed"] is True
    # the node still advertising it, with its value; not the node that never had it, nor the dongle at "0"
    assert "Timed out" in zeroed["msg"], zeroed["msg"]
    assert zeroed["msg"].endswith(": still above 0 in capacity on %s (has %s=2)" % (stopping, WATCHED)), zeroed["msg"]
    # each task read the two nodes, then watched them: no GET every few seconds
    node_gets = [r for r in cluster.requests(mark) if r["method"] == "GET" and r["path"].startswith("/api/v1/nodes")]
    assert len([r for r in node_gets if r["query"].get("watch")]) == 2 and len(node_gets) <= 8, node_gets


@pytest.mark.parametrize("bad, rule", [({"dongle": 1}, "exactly one '/'"), ({DONGLE: -1}, ">= 0")])
def test_info_refuses_bad_wait_input_before_any_request(cluster, ansible, bad, rule):
    mark = cluster.mark() if cluster.controlled else 0
    run = ansible([{"name": "Wait", "ignore_errors": True, "kubehw.devices.extended_resource_info": {
        "name": "x", "wait_allocatable": bad}}])
    assert run.result("Wait")["failed"] is True
    assert rule in run.result("Wait")["msg"]
    if cluster.controlled:
        assert cluster.requests(mark) == []


@pytest.mark.floor
def test_smoke_test_schedules_runs_and_cleans_up(cluster, ansible, kubelet_node):
    cluster.advertise(kubelet_node, {DONGLE: "2"})
    wait_for(lambda: allocatable(cluster, kubelet_node).get(DONGLE) == "2", what="the kubelet's copy of %s on %s"
             % (DONGLE, kubelet_node))
    elsewhere = cluster.create_nodes([{"what": "elsewhere"}])[0]
    run = ansible([
        {"name": "Wait", "kubehw.devices.extended_resource_info": {
            "name": kubelet_node, "include_pods": False, "wait_allocatable": {DONGLE: 2}, "wait_timeout": 20}},
        {"name": "Smoke", "kubehw.devices.resource_smoke_test": {
            "resource": DONGLE, "count": 2, "image": BUSYBOX, "command": ["true"], "wait_for": "completed",
            "timeout": 90}},
        {"name": "Pinned elsewhere", "ignore_errors": True, "kubehw.devices.resource_smoke_test": {
            "resource": DONGLE, "node": elsewhere, "timeout": 20}},
    ])
    smoke = run.result("Smoke")
    assert smoke.get("failed") is not True, run.output()
    assert smoke["scheduled"] is True and smoke["node"] == kubelet_node
    assert smoke["phase"] == "Succeeded" and smoke["deleted"] is True
    pinned = run.result("Pinned elsewhere")
    assert pinned["failed"] is True and pinned["scheduled"] is False
    assert "was not scheduled" in pinned["msg"]
    pods = cluster.core.list_pod_for_all_namespaces(label_selector="app.kubernetes.io/component=smoke-test")
    assert pods.items == []


def test_smoke_test_check_mode_creates_nothing(cluster, ansible):
    mark = cluster.mark()
    run = ansible([{"name": "Smoke", "kubehw.devices.resource_smoke_test": {"resource": DONGLE}}], check=True)
    assert run.rc == 0, run.output()
    assert run.result("Smoke")["changed"] is False
    assert "check mode" in run.result("Smoke")["skipped_reason"]
    if cluster.controlled:
        assert cluster.writes(mark) == []


@pytest.mark.floor
def test_modules_run_as_the_identity_of_the_run(cluster, ansible):
    """As the least-privilege identity (every run of this suite) the modules' requests come from the automation
    identity only. On any cluster the report runs (as that identity); who made each request is in the fault proxy's
    request log of the suite's own control plane only (another cluster's audit log is not readable from here)."""
    from tests.integration.conftest import identity_user, least_privilege

    mark = cluster.mark()
    run = ansible([{"name": "Report", "kubehw.devices.extended_resource_info": {"all_nodes": True}}])
    assert run.rc == 0, run.output()
    assert run.result("Report")["nodes"], run.output()
    if cluster.controlled:
        users = set(r["user"] for r in cluster.requests(mark))
        expected = identity_user(cluster) if least_privilege() else "kubernetes-admin"
        assert users == {expected}
