# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""kubehw.devices.k8s_runtime_class, and the nvidia_container_toolkit role's optional RuntimeClass
that uses it, against a cluster (the suite's own real control plane, or the cluster of KUBECONFIG).

RuntimeClasses are cluster-scoped: each test uses its own name and deletes it afterwards; the role's
test uses the name the role writes (nvidia) and skips where one already exists.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import uuid

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.support.node_configs import NO_NODES

MODULE = "kubehw.devices.k8s_runtime_class"
MANAGED_BY = "app.kubernetes.io/managed-by"
# RuntimeClasses are cluster-scoped: no node of the stand-in is needed
pytestmark = pytest.mark.node_config(NO_NODES)


def node_api(cluster):
    return client.NodeV1Api(cluster.api_client)


def read_runtime_class(cluster, name="nvidia"):
    try:
        return json.loads(node_api(cluster).read_runtime_class(name, _preload_content=False).data)
    except ApiException as err:
        if err.status == 404:
            return None
        raise


@pytest.fixture
def rc_name(cluster):
    name = "rc-%s" % uuid.uuid4().hex[:8]
    yield name
    try:
        node_api(cluster).delete_runtime_class(name)
    except ApiException:
        pass


def task(name, title="RuntimeClass", **params):
    args = dict(name=name, handler="nvidia")
    args.update(params)
    return {"name": title, MODULE: args, "register": "out"}


def rc_writes(cluster, since):
    return [(w["method"], w["path"].rsplit("/", 1)[-1]) for w in cluster.writes(since)]


# -- the role ----------------------------------------------------------------------------------------

def runtime_class_task(cluster):
    return {"name": "RuntimeClass", "ansible.builtin.include_role": {
        "name": "kubehw.devices.nvidia_container_toolkit", "tasks_from": "runtime-class"},
        "vars": {"nvidia_container_toolkit_kubeconfig": cluster.kubeconfig,
                 "nvidia_container_toolkit_kube_context": ""}}


def test_role_runtime_class_created_once_and_left_alone_after(cluster, ansible, collections_path):
    if read_runtime_class(cluster) is not None:
        pytest.skip("a RuntimeClass named nvidia already exists in this cluster")
    # kubehw.devices alone, as a user who installed only it has it: no kubernetes.core to resolve
    alone = {"ANSIBLE_COLLECTIONS_PATH": collections_path.split(os.pathsep)[0]}
    mark = cluster.mark()
    check = ansible([runtime_class_task(cluster)], check=True, env=alone)
    assert check.rc == 0, check.output()
    assert "changed=1" in check.stdout, check.output()
    if cluster.controlled:
        # not even a server-side dry run: check mode only reads
        assert cluster.writes(mark) == []
    assert read_runtime_class(cluster) is None
    first = ansible([runtime_class_task(cluster)], env=alone)
    assert first.rc == 0, first.output()
    assert "changed=1" in first.stdout
    created = read_runtime_class(cluster)
    try:
        assert created["handler"] == "nvidia"
        assert created["metadata"]["labels"][MANAGED_BY] == "kubehw.devices"
        mark = cluster.mark()
        second = ansible([runtime_class_task(cluster)], env=alone)
        assert second.rc == 0 and "changed=0" in second.stdout, second.output()
        if cluster.controlled:
            assert cluster.writes(mark) == []
        assert read_runtime_class(cluster)["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    finally:
        node_api(cluster).delete_runtime_class("nvidia")


# -- the module --------------------------------------------------------------------------------------

def test_create_update_and_no_op_rerun(cluster, ansible, rc_name):
    spec = dict(node_selector={"feature.node.kubernetes.io/pci-10de.present": "true"},
                tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                overhead={"cpu": "0.25", "memory": "64Mi"})
    mark = cluster.mark()
    run = ansible([dict(task(rc_name, "Check create", **spec), check_mode=True, diff=True),
                   task(rc_name, "Create", **spec), task(rc_name, "Again", **spec),
                   task(rc_name, "Change", node_selector={"accelerator": "nvidia"}),
                   task(rc_name, "Again after change", node_selector={"accelerator": "nvidia"})])
    assert run.rc == 0, run.output()
    check = run.result("Check create")
    assert check["changed"] is True and check["action"] == "created"
    assert check["diff"]["before"] == {} and check["diff"]["after"]["handler"] == "nvidia"
    created = run.result("Create")
    assert created["changed"] is True and created["action"] == "created"
    stored = created["runtime_class"]
    assert stored["metadata"]["labels"] == {MANAGED_BY: "kubehw.devices"}
    assert stored["scheduling"]["tolerations"] == spec["tolerations"]
    # the apiserver stores quantities in canonical form; the module compares by value
    assert stored["overhead"]["podFixed"] == {"cpu": "250m", "memory": "64Mi"}
    assert run.result("Again")["changed"] is False
    change = run.result("Change")
    assert change["action"] == "updated"
    assert change["changed_paths"] == ["/scheduling/nodeSelector", "/scheduling/tolerations", "/overhead/podFixed"]
    live = read_runtime_class(cluster, rc_name)
    assert live["scheduling"] == {"nodeSelector": {"accelerator": "nvidia"}} and "overhead" not in live
    assert run.result("Again after change")["changed"] is False
    if cluster.controlled:
        # one create, one update; the check, and both re-runs, wrote nothing
        assert rc_writes(cluster, mark) == [("POST", "runtimeclasses"), ("PUT", rc_name)]


def test_changed_handler_fails_unless_recreate(cluster, ansible, rc_name):
    run = ansible([task(rc_name, "Create")])
    assert run.rc == 0, run.output()
    uid = run.result("Create")["runtime_class"]["metadata"]["uid"]
    mark = cluster.mark()
    run = ansible([dict(task(rc_name, "New handler", handler="nvidia-cdi"), ignore_errors=True),
                   dict(task(rc_name, "Check recreate", handler="nvidia-cdi", recreate=True), check_mode=True),
                   task(rc_name, "Recreate", handler="nvidia-cdi", recreate=True),
                   task(rc_name, "Again", handler="nvidia-cdi", recreate=True)])
    failed = run.result("New handler")
    assert failed["failed"] and failed["changed"] is False
    assert "has handler 'nvidia' and the task asks for handler 'nvidia-cdi', but handler is immutable" in failed["msg"]
    assert run.result("Check recreate")["action"] == "recreated"
    recreated = run.result("Recreate")
    assert recreated["changed"] is True and recreated["action"] == "recreated"
    live = read_runtime_class(cluster, rc_name)
    assert live["handler"] == "nvidia-cdi" and live["metadata"]["uid"] != uid
    assert run.result("Again")["changed"] is False
    if cluster.controlled:
        assert rc_writes(cluster, mark) == [("DELETE", rc_name), ("POST", "runtimeclasses")]


def test_the_apiserver_refuses_a_changed_handler(cluster, rc_name):
    """What recreate works around: the same PUT the module would send answers 422 field is immutable."""
    api = node_api(cluster)
    api.create_runtime_class({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
                              "metadata": {"name": rc_name}, "handler": "nvidia"})
    live = json.loads(api.read_runtime_class(rc_name, _preload_content=False).data)
    live["handler"] = "nvidia-cdi"
    with pytest.raises(ApiException) as info:
        api.replace_runtime_class(rc_name, live)
    body = json.loads(info.value.body)
    assert info.value.status == 422 and body["reason"] == "Invalid"
    assert 'handler: Invalid value: "nvidia-cdi": field is immutable' in body["message"], body


def test_runtime_class_someone_else_made_is_left_alone(cluster, ansible, rc_name):
    node_api(cluster).create_runtime_class({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
                                            "metadata": {"name": rc_name}, "handler": "runc"})
    before = read_runtime_class(cluster, rc_name)
    mark = cluster.mark()
    run = ansible([task(rc_name, "Present"), task(rc_name, "Absent", state="absent")])
    assert run.rc == 0, run.output()
    for title in ("Present", "Absent"):
        res = run.result(title)
        assert res["changed"] is False and res["action"] == "skipped", res
        assert any("was not created by kubehw.devices" in json.dumps(w) for w in res.get("warnings") or []), res
    assert "it differs from the task in /handler" in json.dumps(run.result("Present")["warnings"])
    assert read_runtime_class(cluster, rc_name)["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    if cluster.controlled:
        assert cluster.writes(mark) == []


def test_absent_deletes_once_and_invalid_input_sends_nothing(cluster, ansible, rc_name):
    mark = cluster.mark()
    run = ansible([dict(task(rc_name, "Bad handler", handler="Nvidia_Runtime"), ignore_errors=True),
                   task(rc_name, "Create"), task(rc_name, "Remove", state="absent"),
                   task(rc_name, "Remove again", state="absent")])
    bad = run.result("Bad handler")
    assert bad["failed"] and "handler 'Nvidia_Runtime' must be a lowercase RFC 1123 DNS label" in bad["msg"]
    assert run.result("Remove")["action"] == "deleted"
    assert run.result("Remove again")["changed"] is False
    assert read_runtime_class(cluster, rc_name) is None
    if cluster.controlled:
        assert rc_writes(cluster, mark) == [("POST", "runtimeclasses"), ("DELETE", rc_name)]


def test_shipped_rbac_allows_runtime_classes_only_when_asked(cluster, ansible, rc_name):
    """playbooks/templates/rbac.yaml.j2 grants runtimeclasses unless kubehw_rbac_runtime_class: false."""
    from tests.integration.conftest import own_rbac_names, rbac_identity_kubeconfig, rbac_objects

    # the shipped objects under this test's own names (it replaces their ClusterRole below), created as the admin,
    # and a TokenRequest token of their service account
    names = own_rbac_names(cluster)
    env = {"K8S_AUTH_KUBECONFIG": rbac_identity_kubeconfig(cluster, "sa.kubeconfig", kubehw_rbac_runtime_class=True,
                                                           **names)}
    run = ansible([task(rc_name, "Create"), task(rc_name, "Recreate", handler="nvidia-cdi", recreate=True),
                   task(rc_name, "Remove", state="absent")], env=env)
    assert run.rc == 0, run.output()
    assert [run.result(t)["action"] for t in ("Create", "Recreate", "Remove")] == ["created", "recreated", "deleted"]

    default_role = [d for d in rbac_objects(kubehw_rbac_runtime_class=False, **names) if d["kind"] == "ClusterRole"][0]
    assert default_role["metadata"]["name"] == names["kubehw_rbac_name"] + "-nodes"
    rbac = client.RbacAuthorizationV1Api(cluster.api_client)
    rbac.replace_cluster_role(default_role["metadata"]["name"], default_role)
    run = ansible([dict(task(rc_name, "Create"), ignore_errors=True)], env=env)
    res = run.result("Create")
    assert res["failed"] and res["status"] == 403 and res["reason"] == "Forbidden", res
    assert res["msg"].startswith('Failed to read RuntimeClass "%s": 403 Forbidden' % rc_name), res["msg"]
    assert 'cannot get resource "runtimeclasses"' in res["msg"], res["msg"]
