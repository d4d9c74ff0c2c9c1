# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""k8s_node_extended_resource on a node whose real kubelet runs: the capacity the module writes, the allocatable the
kubelet derives from it (and how long that takes), a pod the kubelet admits against it, a kubelet restart, and a
re-registration of the node, which the drift playbook finds and repairs."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import calendar
import json
import sys
import time

from tests.support.cluster import wait_for
from tests.support.playbook_runner import run_playbook
from tests.support.real_node import SHELL_IMAGE

MODULE = "kubehw.devices.k8s_node_extended_resource"
# A domain of its own: the extended_resources role keeps the declared domains exactly as declared (its default state
# exact), and example.com is also the domain of the sample device plugin an earlier test of the session registers.
USB_KEY = "kubehw-drift.example.org/usb-key"
# The kubelet posts its status every nodeStatusUpdateFrequency (10 s by default); allocatable follows then.
STATUS_UPDATE_SECONDS = 10


def node_status(cluster, name):
    return json.loads(cluster.core.read_node(name, _preload_content=False).data)["status"]


def advertise(ansible, node_name, resources, state="present", wait="none"):
    run = ansible([{"name": "advertise", MODULE: {"name": node_name, "resources": resources, "state": state,
                                                  "wait": wait, "wait_timeout": 60}}])
    assert run.rc == 0, run.output()
    return run.result("advertise")


def kubelet_posted_since(cluster, name, since):
    """Whether the kubelet has posted its Ready condition (a heartbeat) after the wall-clock time `since`."""
    from kubernetes.client.rest import ApiException
    try:
        status = node_status(cluster, name)
    except ApiException as err:
        if err.status == 404:       # deleted, not registered again yet
            return False
        raise
    for condition in status.get("conditions") or []:
        if condition["type"] == "Ready" and condition["status"] == "True":
            beat = calendar.timegm(time.strptime(condition["lastHeartbeatTime"], "%Y-%m-%dT%H:%M:%SZ"))
            return beat >= since - 1
    return False


def test_capacity_written_allocatable_set_by_the_kubelet_and_a_pod_admitted(real_node, cluster, ansible, node_name):
    result = advertise(ansible, node_name, {"example.com/dongle": 4})
    written = time.monotonic()
    assert result["changed"] is True
    assert node_status(cluster, node_name)["capacity"]["example.com/dongle"] == "4"
    # The module writes capacity only; allocatable is the kubelet's, derived at its next status update.
    wait_for(lambda: node_status(cluster, node_name)["allocatable"].get("example.com/dongle") == "4",
             timeout=STATUS_UPDATE_SECONDS + 20, interval=0.1, what="the kubelet to copy the dongles to allocatable")
    lag = time.monotonic() - written
    sys.stderr.write("kubelet allocatable lag after the capacity patch: %.1f s\n" % lag)
    assert lag <= STATUS_UPDATE_SECONDS + 5

    again = advertise(ansible, node_name, {"example.com/dongle": 4}, wait="allocatable")
    assert again["changed"] is False

    # The kubelet admits a pod asking for dongles against its allocatable: the smoke test's pod runs to completion.
    run = ansible([{"name": "smoke", "kubehw.devices.resource_smoke_test": {
        "resource": "example.com/dongle", "count": 2, "node": node_name, "image": SHELL_IMAGE,
        "command": ["sh", "-c", "echo dongles-admitted"], "wait_for": "completed", "timeout": 90}}])
    assert run.rc == 0, run.output()
    smoke = run.result("smoke")
    assert smoke["phase"] == "Succeeded" and "dongles-admitted" in smoke["log"]
    assert smoke["deleted"] is True

    removed = advertise(ansible, node_name, ["example.com/dongle"], state="absent")
    assert removed["changed"] is True
    wait_for(lambda: "example.com/dongle" not in node_status(cluster, node_name)["allocatable"],
             timeout=STATUS_UPDATE_SECONDS + 20, what="the kubelet to drop the dongles from allocatable")


def test_an_extended_resource_survives_a_kubelet_restart(real_node, cluster, ansible, node_name):
    advertise(ansible, node_name, {"example.com/rack-slot": 2}, wait="allocatable")
    real_node.kubelet_down()
    restarted = time.time()
    real_node.kubelet_up()
    wait_for(lambda: kubelet_posted_since(cluster, node_name, restarted), timeout=60,
             what="the restarted kubelet's first status")
    time.sleep(STATUS_UPDATE_SECONDS + 2)    # one more status update of the new kubelet
    status = node_status(cluster, node_name)
    assert status["capacity"].get("example.com/rack-slot") == "2"
    assert status["allocatable"].get("example.com/rack-slot") == "2"
    assert advertise(ansible, node_name, {"example.com/rack-slot": 2})["changed"] is False
    advertise(ansible, node_name, ["example.com/rack-slot"], state="absent")


def drift(real_node, collections, tmp_path, node_name, repair=False):
    """playbooks/drift.yml for an inventory that declares one usb-key on the real node."""
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(json.dumps({"all": {
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
        "children": {"static_resource_nodes": {"hosts": {node_name: {
            "extended_resources_static": {USB_KEY: 1}}}}}}}))
    kubeconfig = real_node.control_plane.kubeconfig
    extra = {"kubehw_kubeconfig": kubeconfig}
    if repair:
        extra["kubehw_repair"] = True
    return run_playbook("kubehw.devices.drift", str(tmp_path), inventory=str(inventory), collections=collections,
                        kubeconfig=kubeconfig, extra_vars=extra)


def test_a_node_that_registers_anew_is_found_drifted_and_repaired_by_the_drift_run(
        real_node, cluster, ansible, collections, node_name, tmp_path):
    """Where drift really happens: the Node object deleted and the kubelet registering it anew (a reinstall, a cloud
    replacement). The new object has what the kubelet reports, not what was written into the old one; the drift run
    names the missing resource and writes nothing, the repair run brings allocatable back, the next drift run is
    clean."""
    assert drift(real_node, collections, tmp_path, node_name, repair=True).returncode == 0
    wait_for(lambda: node_status(cluster, node_name)["allocatable"].get(USB_KEY) == "1",
             timeout=STATUS_UPDATE_SECONDS + 20, what="the kubelet to copy the usb-key to allocatable")
    clean = drift(real_node, collections, tmp_path, node_name)
    assert clean.returncode == 0 and "no drift" in clean.stdout, clean.output()

    cluster.core.delete_node(node_name)
    restarted = time.time()
    real_node.kubelet_down()
    real_node.kubelet_up()
    wait_for(lambda: kubelet_posted_since(cluster, node_name, restarted), timeout=60,
             what="the node registered anew and Ready")
    assert USB_KEY not in node_status(cluster, node_name)["capacity"]

    found = drift(real_node, collections, tmp_path, node_name)
    assert found.returncode == 2, found.output()
    assert ('drift: %s: extended resources: declared {\\"%s\\": \\"1\\"}, observed {}' % (node_name, USB_KEY)
            in found.stdout), found.output()
    assert USB_KEY not in node_status(cluster, node_name)["capacity"]      # nothing written

    repaired = drift(real_node, collections, tmp_path, node_name, repair=True)
    assert repaired.returncode == 0 and "repaired 1 difference(s)" in repaired.stdout, repaired.output()
    wait_for(lambda: node_status(cluster, node_name)["allocatable"].get(USB_KEY) == "1",
             timeout=STATUS_UPDATE_SECONDS + 20, what="the kubelet to copy the usb-key to allocatable again")
    again = drift(real_node, collections, tmp_path, node_name)
    assert again.returncode == 0 and "no drift" in again.stdout, again.output()
    advertise(ansible, node_name, [USB_KEY], state="absent")
