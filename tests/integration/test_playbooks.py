# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Site playbooks end to end on the suite's own control plane of `make demo`.

site.yml in check mode (no write), for real, a second time (changed=0, no write), verify.yml,
teardown.yml (node status as before site.yml), all in a closed network: an admission policy refuses any image
outside a mirror, a run without the mirror setting is refused naming the image, and with it every image comes from
the mirror by tag and digest; the same run the way AWX runs it (ansible-runner,
credential in K8S_AUTH_* variables) with the least-privilege token; and that token without the
nodes/status permission failing with a message that names it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import glob
import json
import os
import re
import shutil
import sys
import threading
import time

import pytest
import yaml

from tests.integration.conftest import wait_for
from tests.support.k8s_objects import read_out
from tests.support.kubelet import PASS_INTERVAL
from tests.support.node_configs import DEMO_CONFIG_PATH
from tests.support.playbook_runner import run_playbook

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INVENTORY = os.path.join(REPO_ROOT, "playbooks", "inventory", "demo", "hosts.yml")
SA_USER = "system:serviceaccount:kubehw:automation"
with open(DEMO_CONFIG_PATH) as _f:
    CONFIG = yaml.safe_load(_f)
# the kubelet stand-in keeps a stopped plugin's resource this long, then writes "0" (real kubelet: 5 minutes)
CONFIG["device_plugin_stop_grace"] = 3.0
# A third GPU node, served through DRA: the label accelerator_node needs once a node of the play uses dra, and the
# demo's GPU nodes labelled for the device plugin (the demo inventory alone leaves them unread).
ALLOCATION_LABEL = "kubehw.devices/gpu-allocation"
for _node in CONFIG["nodes"]:
    if _node["name"].startswith("gpu-node-"):
        _node["labels"] = dict(_node.get("labels") or {}, **{ALLOCATION_LABEL: "device-plugin"})
CONFIG["nodes"].append({"name": "gpu-node-3", "labels": {"feature.node.kubernetes.io/pci-10de.present": "true",
                                                         ALLOCATION_LABEL: "dra"},
                        "inventory": {"nvidia.com/gpu": 2}})

pytestmark = pytest.mark.node_config(CONFIG)


def play(collections_path, tmp_path, playbook, kubeconfig=None, check=False, env=None, extra_vars=None,
         inventory=INVENTORY):
    variables = dict({"kubehw_kubeconfig": kubeconfig} if kubeconfig else {}, **(extra_vars or {}))
    proc = run_playbook("kubehw.devices.%s" % playbook, str(tmp_path), inventory=inventory,
                        collections=collections_path, env=env, extra_vars=variables, check=check, timeout=600)
    recap = dict((host, dict(ok=counts["ok"], changed=counts["changed"], failed=counts["failed"]))
                 for host, counts in proc.recap().items())
    return proc, recap


def dra_inventory(tmp_path, dra_hosts=("gpu-node-3",)):
    """The demo inventory with a child group of gpu_nodes served through DRA (NVIDIA's DRA driver preset), whose
    DeviceClass also serves pods that ask for nvidia.com/gpu."""
    with open(INVENTORY) as f:
        inventory = yaml.safe_load(f)
    gpu_nodes = inventory["all"]["children"]["gpu_nodes"]
    for host in dra_hosts:
        gpu_nodes["hosts"].pop(host, None)
    gpu_nodes.setdefault("children", {})["dra_gpu_nodes"] = {
        "vars": {"accelerator_node_allocation": "dra", "accelerator_node_dra_extended_resource_name": "nvidia.com/gpu"},
        "hosts": dict((host, None) for host in dra_hosts)}
    path = tmp_path / ("inventory-%s.yml" % "-".join(dra_hosts))
    path.write_text(yaml.safe_dump(inventory))
    return str(path)


def ensure_namespaces(cluster, names=("kubehw-device-plugins", "kubehw-dra-drivers")):
    """The namespaces of the device plugin and of the DRA driver (the roles' defaults), which playbooks/rbac.yml
    creates on a real cluster; site.yml expects them."""
    existing = set(n["metadata"]["name"] for n in json.loads(cluster.core.list_namespace(_preload_content=False).data)["items"])
    for name in names:
        if name not in existing:
            read_out(cluster.core.create_namespace(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}, _preload_content=False))


# A closed network: every image site.yml deploys must come from this mirror. The kubelet stand-in pulls nothing,
# so the mirror need not exist; the admission policy refuses any pod or DaemonSet naming another registry.
MIRROR = "mirror.kubehw.test:5000"
MIRRORED = {"kubehw_image_registry": MIRROR}
SITE_NAMESPACES = ["kubehw-device-plugins", "kubehw-dra-drivers", "default"]


def only_the_mirror(cluster, name="kubehw-only-the-mirror"):
    """A ValidatingAdmissionPolicy, bound in the namespaces site.yml deploys to, that refuses a pod or a DaemonSet
    with any container or init container image outside MIRROR, naming the images; it is enforced when this returns."""
    from kubernetes import client

    admission = client.AdmissionregistrationV1Api(cluster.api_client)
    images = ("(variables.spec.containers.map(c, c.image) + (has(variables.spec.initContainers) ? "
              "variables.spec.initContainers.map(c, c.image) : []))")
    admission.create_validating_admission_policy({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["pods"]},
                {"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                 "resources": ["daemonsets"]}]},
            "variables": [
                {"name": "spec", "expression": "object.kind == 'Pod' ? object.spec : object.spec.template.spec"},
                {"name": "outside", "expression": "%s.filter(i, !i.startsWith('%s/'))" % (images, MIRROR)}],
            "validations": [{
                "expression": "size(variables.outside) == 0",
                "messageExpression": "'images outside the mirror %s: ' + variables.outside.join(', ')" % MIRROR}]}})
    cluster.on_close("delete ValidatingAdmissionPolicy %s" % name,
                     lambda: admission.delete_validating_admission_policy(name))
    admission.create_validating_admission_policy_binding({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"],
                 "matchResources": {"namespaceSelector": {"matchExpressions": [
                     {"key": "kubernetes.io/metadata.name", "operator": "In", "values": SITE_NAMESPACES}]}}}})
    cluster.on_close("delete ValidatingAdmissionPolicyBinding %s" % name,
                     lambda: admission.delete_validating_admission_policy_binding(name))
    probe = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "kubehw-mirror-probe"},
             "spec": {"containers": [{"name": "probe", "image": "registry.k8s.io/pause:3.10"}]}}
    deadline = time.monotonic() + 30
    while True:   # the policy is enforced once the apiserver has compiled it: a dry-run create shows when
        try:
            cluster.core.create_namespaced_pod("default", probe, dry_run="All")
        except client.ApiException as err:
            if "images outside the mirror" in (err.body or ""):
                return
            raise
        assert time.monotonic() < deadline, "the admission policy was not enforced within 30 s"
        time.sleep(0.2)


def deployed_images(writes):
    """The images of the pods and DaemonSets created or replaced by the logged writes."""
    found = set()
    for write in writes:
        if write["method"] in ("POST", "PUT") and write["path"].rsplit("/", 2)[-1] in ("pods", "daemonsets") \
                or write["method"] == "PUT" and "/daemonsets/" in write["path"]:
            body = json.loads(write["body"])
            spec = body["spec"]["template"]["spec"] if body.get("kind") == "DaemonSet" else body["spec"]
            found.update(c["image"] for c in spec["containers"] + (spec.get("initContainers") or []))
    return found


def node_statuses(cluster):
    """Every node's full status, minus the times of its conditions: the kubelet moves their heartbeat times on its
    own, and on a loaded machine the node lifecycle controller may mark a node Unknown for a moment when its kubelet
    stand-in's heartbeat is late, and the stand-in marks it Ready again, which moves the transition times (seen once
    on a 2-core machine running the whole suite). The collection never writes conditions: their type, status, reason
    and message are compared."""
    nodes = json.loads(cluster.core.list_node(_preload_content=False).data)["items"]
    result = {}
    for node in nodes:
        status = copy.deepcopy(node.get("status") or {})
        for cond in status.get("conditions") or []:
            cond.pop("lastHeartbeatTime", None)
            cond.pop("lastTransitionTime", None)
        result[node["metadata"]["name"]] = status
    return result


def status_changes(before, after):
    """(node, status key, before, after) for each top-level status key that differs."""
    return [(node, key, (before.get(node) or {}).get(key), (after.get(node) or {}).get(key))
            for node in sorted(set(before) | set(after))
            for key in sorted(set(before.get(node) or {}) | set(after.get(node) or {}))
            if (before.get(node) or {}).get(key) != (after.get(node) or {}).get(key)]


# seven playbook runs, and the teardown waits for the kubelet stand-in's grace period (a loaded machine: 3x)
@pytest.mark.timeout(900)
def test_site_check_run_rerun_verify_teardown(cluster, collections_path, tmp_path):
    """The demo inventory plus gpu-node-3 in a child group with accelerator_node_allocation dra: the device plugin
    serves gpu-node-1/2 (label device-plugin), NVIDIA's DRA driver gpu-node-3 (label dra), never both one node."""
    cluster.require_controlled("the demo inventory names the configured nodes and their GPUs")
    from kubernetes import client

    custom = client.CustomObjectsApi(cluster.api_client)
    ensure_namespaces(cluster)
    before = node_statuses(cluster)
    inventory = dra_inventory(tmp_path)

    # gpu-node-2 set to dra while labelled for the device plugin: refused before any write, naming it
    mark = cluster.mark()
    proc, recap = play(collections_path, tmp_path, "site", cluster.kubeconfig, check=True,
                       inventory=dra_inventory(tmp_path, ("gpu-node-2", "gpu-node-3")))
    assert proc.returncode != 0
    assert "Not labelled %s=dra but set to dra: gpu-node-2 (kubectl label" % ALLOCATION_LABEL in proc.stdout, \
        proc.stdout[-4000:]
    assert cluster.writes(mark) == []

    # a closed network: from here on every pod and DaemonSet in the site's namespaces must come from the mirror
    only_the_mirror(cluster)

    mark = cluster.mark()
    proc, recap = play(collections_path, tmp_path, "site", cluster.kubeconfig, check=True, inventory=inventory,
                       extra_vars=MIRRORED)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    # the DeviceClass with extendedResourceName is validated by a server-side dry run, which stores nothing
    stored = [w for w in cluster.writes(mark) if (w.get("query") or {}).get("dryRun") != "All"]
    assert stored == [], "check mode wrote: %r" % stored
    assert set(w["path"] for w in cluster.writes(mark) if w not in stored) == {"/apis/resource.k8s.io/v1/deviceclasses"}
    # the run-once tasks (RuntimeClass nvidia, device plugin DaemonSet, DRA driver) count on the first host only
    assert recap["dongle-node-1"]["changed"] == 1, recap
    assert sum(recap[h]["changed"] for h in ("gpu-node-1", "gpu-node-2", "gpu-node-3")) == 3, recap

    # without the mirror setting the run is refused at its first image, which the message names
    proc, recap = play(collections_path, tmp_path, "site", cluster.kubeconfig, inventory=inventory)
    assert proc.returncode != 0
    assert re.search(r"images outside the mirror %s: nvcr\.io/nvidia/k8s-device-plugin:v0\.20\.0@sha256:a61ba9fd" % MIRROR,
                     proc.stdout), proc.stdout[-4000:]

    mark = cluster.mark()
    proc, recap = play(collections_path, tmp_path, "site", cluster.kubeconfig, inventory=inventory, extra_vars=MIRRORED)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    # every image from the mirror, by the tag and digest of the image list: the device plugin, the DRA driver and its
    # init container, and the smoke tests' CUDA image (no published digest: by tag)
    assert deployed_images(cluster.writes(mark)) == {
        MIRROR + "/nvidia/k8s-device-plugin:v0.20.0@sha256:a61ba9fd8efb82f3a79f877f7580e02c1e8e7593f62473644bc9c79e315c3312",
        MIRROR + "/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.4.1"
                 "@sha256:eefe67396dedea4df74f68a94d5883f33204888b83979babd42b91501a2de1d8",
        MIRROR + "/nvidia/cuda:12.4.1-base-ubuntu22.04"}, cluster.writes(mark)
    after_site = node_statuses(cluster)
    assert after_site["dongle-node-1"]["capacity"]["example.com/dongle"] == "2"
    assert after_site["dongle-node-1"]["allocatable"]["example.com/dongle"] == "2"
    assert after_site["gpu-node-1"]["allocatable"]["nvidia.com/gpu"] == "4"
    assert after_site["gpu-node-2"]["allocatable"]["nvidia.com/gpu"] == "8"
    # gpu-node-3 is served by DRA alone: no device plugin resource, its 2 GPUs published in a ResourceSlice
    assert "nvidia.com/gpu" not in after_site["gpu-node-3"].get("allocatable", {}), after_site["gpu-node-3"]
    slices = custom.list_cluster_custom_object("resource.k8s.io", "v1", "resourceslices")["items"]
    published = dict(((s["spec"]["nodeName"], s["spec"]["driver"]), len(s["spec"].get("devices") or []))
                     for s in slices)
    assert published == {("gpu-node-3", "gpu.nvidia.com"): 2}, published
    classes = custom.list_cluster_custom_object("resource.k8s.io", "v1", "deviceclasses")["items"]
    assert "nvidia.com/gpu" in [c["spec"].get("extendedResourceName") for c in classes], classes
    pods = json.loads(cluster.core.list_pod_for_all_namespaces(_preload_content=False).data)["items"]
    serving = sorted((p["spec"].get("nodeName"), p["metadata"]["namespace"]) for p in pods
                     if p["spec"].get("nodeName", "").startswith("gpu-node-"))
    # one plugin pod on each device-plugin node, one DRA kubelet plugin pod on the DRA node, nothing else
    assert [node for node, _ns in serving] == ["gpu-node-1", "gpu-node-2", "gpu-node-3"], serving
    # two smoke-test pods: one on gpu-node-1 asking for nvidia.com/gpu (the plugin), one on gpu-node-3 whose claim,
    # made from a ResourceClaimTemplate of the DRA driver's DeviceClass gpu.nvidia.com, got a device there
    smoke = [json.loads(w["body"]) for w in cluster.writes(mark) if w["method"] == "POST" and w["path"].endswith("/pods")]
    smoke_nodes = sorted(n for p in smoke for n in ("gpu-node-1", "gpu-node-2", "gpu-node-3") if n in json.dumps(p["spec"]))
    assert smoke_nodes == ["gpu-node-1", "gpu-node-3"], smoke
    by_node = dict((n, p) for p in smoke for n in ("gpu-node-1", "gpu-node-3") if n in json.dumps(p["spec"]))
    assert [c["resources"]["limits"] for c in by_node["gpu-node-1"]["spec"]["containers"]] == [{"nvidia.com/gpu": "1"}]
    assert [c["resources"].get("claims") for c in by_node["gpu-node-3"]["spec"]["containers"]] == [[{"name": "device"}]]
    templates = [json.loads(w["body"]) for w in cluster.writes(mark)
                 if w["method"] == "POST" and w["path"].endswith("/resourceclaimtemplates")]
    assert [r["exactly"]["deviceClassName"] for t in templates for r in t["spec"]["spec"]["devices"]["requests"]] \
        == ["gpu.nvidia.com"], templates
    # the plugin's resource is the kubelet's business: site.yml never patched GPU nodes itself
    assert not [w for w in cluster.writes(mark) if "/nodes/gpu-node" in w["path"]]

    mark = cluster.mark()
    proc, recap = play(collections_path, tmp_path, "site", cluster.kubeconfig, inventory=inventory, extra_vars=MIRRORED)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert all(host["changed"] == 0 for host in recap.values()), recap
    # the only writes of a second run are the smoke tests': two pods and the DRA one's claim template, created and
    # deleted, and the deletion of its claim
    writes = [(w["method"], w["path"].rsplit("/", 2)[-2] if w["method"] == "DELETE" else w["path"].rsplit("/", 1)[-1])
              for w in cluster.writes(mark)]
    posts = sorted(w for w in writes if w[0] == "POST")
    assert posts == [("POST", "pods"), ("POST", "pods"), ("POST", "resourceclaimtemplates")], writes
    # (the claim's DELETE only when the module saw it before the resource claim controller deleted it)
    assert set(w for w in writes if w[0] != "POST") - {("DELETE", "resourceclaims")} == {
        ("DELETE", "pods"), ("DELETE", "resourceclaimtemplates")}, writes

    proc = play(collections_path, tmp_path, "verify", cluster.kubeconfig, inventory=inventory)[0]
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "dongle-node-1: Ready=True advertised={'example.com/dongle': '2'}" in proc.stdout
    assert "gpu-node-2: Ready=True advertised={'nvidia.com/gpu': '8'}" in proc.stdout
    assert "gpu-node-3: DRA devices 2 (gpu.nvidia.com: gpu-0, gpu-1) claims allocated here: none" in proc.stdout, \
        proc.stdout[-4000:]

    # every GPU node labelled and set to dra while the device plugin's DaemonSet still runs: refused, nothing written
    def label(nodes, value):
        for node in nodes:
            read_out(cluster.core.patch_node(node, {"metadata": {"labels": {ALLOCATION_LABEL: value}}},
                                             _preload_content=False))
    label(("gpu-node-1", "gpu-node-2"), "dra")
    try:
        mark = cluster.mark()
        proc = play(collections_path, tmp_path, "site", cluster.kubeconfig, extra_vars=MIRRORED,
                    inventory=dra_inventory(tmp_path, ("gpu-node-1", "gpu-node-2", "gpu-node-3")))[0]
        assert proc.returncode != 0
        assert re.search(r"Refusing to roll out the DRA driver: the DaemonSet of the nvidia device plugin \(.+\) still exists "
                         r"and would serve the same devices on gpu-node-1, gpu-node-2, gpu-node-3\.", proc.stdout), \
            proc.stdout[-4000:]
        assert cluster.writes(mark) == []
    finally:
        label(("gpu-node-1", "gpu-node-2"), "device-plugin")

    mark = cluster.mark()
    proc, recap = play(collections_path, tmp_path, "teardown", cluster.kubeconfig, inventory=inventory)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    # the wait for the DRA node's devices to go is the driver removal's own: one list of the driver's ResourceSlices,
    # then a watch, no polling
    slice_reads = [r for r in cluster.requests(mark) if r["path"] == "/apis/resource.k8s.io/v1/resourceslices"]
    assert [r["query"].get("fieldSelector") for r in slice_reads if not r["query"].get("watch")] == \
        ["spec.driver=gpu.nvidia.com"], slice_reads
    assert cluster.apps.list_daemon_set_for_all_namespaces().items == []
    assert custom.list_cluster_custom_object("resource.k8s.io", "v1", "resourceslices")["items"] == []
    assert custom.list_cluster_custom_object("resource.k8s.io", "v1", "deviceclasses")["items"] == []
    # the key was removed after the kubelet had written "0", so nothing brings it back: once the kubelet has
    # followed capacity in allocatable (at its next status sync), and past its grace period and a sync more, the
    # nodes are as before site.yml (no nvidia.com/gpu, not even "0")
    removals = [w for w in cluster.writes(mark) if w["path"].startswith("/api/v1/nodes/gpu-node")]
    assert removals and all(w["method"] == "PATCH" and '"remove"' in w["body"] for w in removals), removals
    synced_by = time.monotonic() + 30
    while node_statuses(cluster) != before and time.monotonic() < synced_by:
        time.sleep(0.5)
    time.sleep(CONFIG["device_plugin_stop_grace"] + 10 * PASS_INTERVAL)
    after = node_statuses(cluster)
    assert after == before, (status_changes(before, after), cluster.standin.errors)


def apply_rbac(collections_path, tmp_path, kubeconfig):
    proc, recap = play(collections_path, tmp_path, "rbac", kubeconfig)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    return recap


def automation_token(cluster):
    """The bearer token of the automation identity rbac.yml made, from the TokenRequest API, as an AWX administrator
    would mint it."""
    namespace, name = SA_USER.split(":")[2:]
    return cluster.request_token(name, namespace)


def credential_env(cluster, token):
    """What AWX's Kubernetes bearer-token credential injects."""
    return {"K8S_AUTH_HOST": cluster.controls.url, "K8S_AUTH_API_KEY": token,
            "K8S_AUTH_SSL_CA_CERT": cluster.controls.ca_cert_path, "K8S_AUTH_VERIFY_SSL": "True"}


def test_site_through_ansible_runner_with_least_privilege_token(cluster, collections_path, tmp_path):
    cluster.require_controlled("the demo inventory names the configured nodes; rbac.yml's identity has fixed names")
    import ansible_runner

    apply_rbac(collections_path, tmp_path, cluster.kubeconfig)
    token = automation_token(cluster)
    private = tmp_path / "runner"
    (private / "env").mkdir(parents=True)
    (private / "inventory").mkdir()
    with open(INVENTORY) as f:
        (private / "inventory" / "hosts.yml").write_text(f.read())
    envvars = dict(credential_env(cluster, token), ANSIBLE_COLLECTIONS_PATH=collections_path, ANSIBLE_NOCOLOR="1")
    mark = cluster.mark()
    result = ansible_runner.run(private_data_dir=str(private), project_dir=REPO_ROOT,
                                playbook="playbooks/site.yml", envvars=envvars, quiet=True,
                                extravars={"accelerator_node_wait_timeout": 120}, timeout=600)
    stdout = result.stdout.read()
    assert result.status == "successful" and result.rc == 0, stdout[-5000:]
    artifacts = private / "artifacts" / result.config.ident
    assert (artifacts / "status").read_text() == "successful"
    events = [json.loads(open(p).read()) for p in glob.glob(str(artifacts / "job_events" / "*.json"))]
    module_results = [e["event_data"] for e in events if e.get("event") == "runner_on_ok"]
    used = set(e.get("resolved_action") or e.get("task_action") for e in module_results)
    assert "kubehw.devices.device_plugin_deploy" in used and "kubehw.devices.k8s_node_extended_resource" in used
    assert result.stats["changed"]["dongle-node-1"] == 1
    # every request came from the automation identity, and no task output shows its token
    # (the runner's own record of the environment it was given, artifacts/*/command, is AWX's business)
    users = set(r.get("user") for r in cluster.requests(mark))
    assert users == {SA_USER}, users
    assert token not in stdout
    outputs = glob.glob(str(artifacts / "job_events" / "*.json")) + [str(artifacts / "stdout")]
    for path in outputs:
        with open(path, errors="replace") as f:
            assert token not in f.read(), path


def test_token_without_nodes_status_permission_is_refused_by_name(cluster, collections_path, tmp_path):
    cluster.require_controlled("edits the RBAC of rbac.yml's identity, which has fixed names")
    apply_rbac(collections_path, tmp_path, cluster.kubeconfig)
    token = automation_token(cluster)
    from kubernetes import client

    rbac = client.RbacAuthorizationV1Api(cluster.api_client)
    role = json.loads(rbac.read_cluster_role("kubehw-devices-nodes", _preload_content=False).data)
    rules = len(role["rules"])
    role["rules"] = [r for r in role["rules"] if "nodes/status" not in r["resources"]]
    assert len(role["rules"]) == rules - 1
    read_out(rbac.replace_cluster_role("kubehw-devices-nodes", role, _preload_content=False))
    before = node_statuses(cluster)["dongle-node-1"]
    proc, recap = play(collections_path, tmp_path, "advertise", env=credential_env(cluster, token))
    assert proc.returncode != 0
    assert recap["dongle-node-1"]["failed"] == 1
    assert "nodes/status" in proc.stdout and "patch" in proc.stdout, proc.stdout[-3000:]
    assert SA_USER in proc.stdout
    assert node_statuses(cluster)["dongle-node-1"]["capacity"] == before["capacity"]


def survey_answers(template_name, overrides):
    """What AWX sends for a job template of playbooks/awx/job_templates.yml: its extra_vars, then each survey
    question's default, as strings (AWX passes multiple-choice and text answers as strings), then overrides."""
    with open(os.path.join(REPO_ROOT, "playbooks", "awx", "job_templates.yml")) as f:
        templates = yaml.safe_load(f)["job_templates"]
    template = [t for t in templates if t["name"] == template_name][0]
    answers = yaml.safe_load(template.get("extra_vars") or "") or {}
    for question in template["related"]["survey_spec"]["spec"]:
        answers[question["variable"]] = str(question["default"])
    for key, value in overrides.items():
        assert key in answers, "%s is not a survey question of %s" % (key, template_name)
        answers[key] = value
    return template, answers


def test_job_template_survey_strings_and_become_without_sudo(cluster, collections_path, tmp_path):
    """The shipped site job template (become on, survey answers as strings) in an execution environment without
    sudo: "false" skips the smoke test, and no API task asks for root."""
    cluster.require_controlled("the demo inventory names the configured nodes")
    import ansible_runner

    ensure_namespaces(cluster)
    template, answers = survey_answers("kubehw.devices site", {"accelerator_node_smoke_test": "false"})
    assert template["become_enabled"] is True
    assert answers["accelerator_node_smoke_test"] == "false" and answers["accelerator_node_install_driver"] == "true"
    fake_bin = tmp_path / "no-sudo"
    _write(str(fake_bin / "sudo"), "#!/bin/sh\necho 'sudo: not in this execution environment' >&2\nexit 1\n", 0o755)
    private = tmp_path / "runner"
    (private / "inventory").mkdir(parents=True)
    with open(INVENTORY) as f:
        (private / "inventory" / "hosts.yml").write_text(f.read())
    envvars = {"K8S_AUTH_KUBECONFIG": cluster.kubeconfig, "ANSIBLE_COLLECTIONS_PATH": collections_path,
               "ANSIBLE_NOCOLOR": "1", "PATH": str(fake_bin) + os.pathsep + os.environ.get("PATH", "")}
    mark = cluster.mark()
    result = ansible_runner.run(private_data_dir=str(private), project_dir=REPO_ROOT, playbook=template["playbook"],
                                envvars=envvars, extravars=answers, cmdline="--become", quiet=True, timeout=600)
    stdout = result.stdout.read()
    assert result.status == "successful" and result.rc == 0, stdout[-5000:]
    events = [e for e in result.events if e.get("event", "").startswith("runner_on_")]
    # skipped in the cluster play of site.yml (the host-setup play does not include the cluster part), run in none
    smoke = set(e["event"] for e in events if e["event_data"].get("task") == "Run a pod that requests one unit of the resource")
    assert smoke == {"runner_on_start", "runner_on_skipped"}, smoke
    assert not [w for w in cluster.writes(mark) if "/pods" in w["path"]], "a smoke-test pod was created"
    # the API tasks did run (under --become), so nothing asked for root on the controller
    ran = set(e["event_data"].get("resolved_action") or e["event_data"].get("task_action") for e in events
              if e["event"] == "runner_on_ok")
    assert {"kubehw.devices.device_plugin_deploy", "kubehw.devices.extended_resource_info",
            "kubehw.devices.k8s_node_extended_resource"} <= ran, ran


# -- driver rollout: one node at a time, drained through the Eviction API ------------------------------

# The reboot of a stand-in node: the task asks the test's "machine room" thread (below) to stop the node's kubelet
# stand-in, and waits as ansible.builtin.reboot waits for the host. The room waits until kube-controller-manager marks
# the node Ready=Unknown (its node-monitor grace period, 40 s on the suite's control plane), then brings the kubelet
# back a moment later, as a host that boots again, and the task returns.
REBOOT_TASKS = """
- name: Ask the machine room to reboot the node
  ansible.builtin.copy:
    dest: "{{ test_reboot_dir }}/{{ nvidia_driver_node_name }}"
    content: reboot
    mode: "0600"
  delegate_to: localhost
- name: Wait until the node has booted again
  ansible.builtin.wait_for:
    path: "{{ test_reboot_dir }}/{{ nvidia_driver_node_name }}"
    state: absent
    timeout: 90
  delegate_to: localhost
- name: Boot the node into its driver (the nvidia module loaded)
  ansible.builtin.copy:
    dest: "{{ nvidia_driver_proc_root }}/modules"
    content: "nvidia 56823808 0 - Live 0x0000000000000000\n"
    mode: "0644"
  delegate_to: localhost
"""

FAKE_SMI = "#!/bin/sh\nprintf '550.54.15\\n'\n"


def _write(path, text, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)


def boot_without_driver(tmp_path, hosts=("gpu-node-1", "gpu-node-2")):
    """The hosts' /proc (each its own, nvidia_driver_proc_root) as after a boot without the nvidia module: the driver
    installed but not loaded, so nvidia_driver wants a reboot; the stand-in's reboot above loads it."""
    for host in hosts:
        _write(str(tmp_path / "proc" / host / "modules"), "")


def rollout_inventory(tmp_path, cluster):
    """The demo's GPU nodes as hosts whose driver (branch 550, a fake nvidia-smi) runs but is not loaded,
    so nvidia_driver wants a reboot; only the driver role runs, with the stand-in's reboot above."""
    sysfs = tmp_path / "sys"
    for name, value in (("vendor", "0x10de"), ("device", "0x2330"), ("class", "0x030200")):
        _write(str(sysfs / "bus" / "pci" / "devices" / "0000:17:00.0" / name), value + "\n")
    _write(str(tmp_path / "bin" / "nvidia-smi"), FAKE_SMI, 0o755)
    _write(str(tmp_path / "reboot.yml"), REBOOT_TASKS)
    os.makedirs(str(tmp_path / "reboots"), exist_ok=True)
    boot_without_driver(tmp_path)
    facts = {"distribution": "Debian", "distribution_version": "12.5", "distribution_major_version": "12",
             "os_family": "Debian", "architecture": "x86_64", "kernel": "6.1.0-18-amd64"}
    hosts = ["gpu-node-1", "gpu-node-2"]
    inventory = {"all": {"vars": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
        "accelerator_node_install_runtime": False, "accelerator_node_install_toolkit": False,
        "accelerator_node_cluster_setup": False,
        "nvidia_driver_sysfs_root": str(sysfs), "nvidia_driver_blacklist_nouveau": False,
        "nvidia_driver_proc_root": str(tmp_path / "proc") + "/{{ inventory_hostname }}",
        "nvidia_driver_persistenced": False, "nvidia_driver_reboot": True,
        "nvidia_driver_reboot_tasks": str(tmp_path / "reboot.yml"),
        "nvidia_driver_drain_timeout": 60, "nvidia_driver_reboot_timeout": 60,
        "test_reboot_dir": str(tmp_path / "reboots"),
        # the hosts are this machine dressed as Debian 12 GPU hosts (facts, sysfs, nvidia-smi); the preflight reads
        # the machine itself, whose kernel has no headers here: its own tests run it on hosts it can read as they are
        "kubehw_host_preflight": False},
        "children": {"gpu_nodes": {"hosts": dict((h, {}) for h in hosts)}}}}
    _write(str(tmp_path / "rollout.yml"), yaml.safe_dump(inventory))
    env = {"PATH": str(tmp_path / "bin") + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin"),
           "ANSIBLE_CACHE_PLUGIN": "jsonfile", "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(tmp_path / "facts")}
    # Each host's facts are a Debian 12 machine's, through the fact cache (its file format differs between
    # ansible-core releases, so ansible itself writes it).
    seed = [{"name": "Seed the fact cache", "hosts": "gpu_nodes", "gather_facts": False, "tasks": [{
        "name": "Cache the facts of a Debian 12 host",
        "ansible.builtin.set_fact": dict(facts, cacheable=True)}]}]
    _write(str(tmp_path / "seed.yml"), yaml.safe_dump(seed))
    seeded = run_playbook(str(tmp_path / "seed.yml"), str(tmp_path), inventory=str(tmp_path / "rollout.yml"), env=env,
                          timeout=120)
    assert seeded.returncode == 0, seeded.output()
    return str(tmp_path / "rollout.yml"), env


def upgrade_plan(collections_path, tmp_path, cluster, inventory, env):
    """The plan kubehw.devices.upgrade_plan writes for the inventory (its JSON file), after a run that exits 0."""
    plan_file = tmp_path / "plan.json"
    proc, _recap = play(collections_path, tmp_path, "upgrade_plan", cluster.kubeconfig, inventory=inventory, env=env,
                        extra_vars={"kubehw_upgrade_plan_file": str(plan_file)})
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-2000:]
    with open(str(plan_file)) as handle:
        return json.load(handle)


def web_pod(name, node, owner):
    """A pod of a workload: its owner exists (on a real cluster the garbage collector deletes a pod whose owner does
    not), and no controller manages it, so the test plays the ReplicaSet controller."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": "web"}, "ownerReferences": [owner]},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "web", "image": "registry.example/web:1"}]}}


class MachineRoom(threading.Thread):
    """Reboots the nodes the play asks it to (their kubelet stand-in stops until the node lifecycle controller marks
    them Unknown, then starts again a second later), and plays the ReplicaSet controller once: when the budget
    refuses an eviction, a replacement pod starts on the first node (back by then). ``brief``: a reboot is over at once
    and the node never leaves Ready (for runs whose test is not the wait for a node to come back: each full reboot
    waits out the controller's 40 s grace period)."""

    def __init__(self, cluster, reboot_dir, namespace, owner, brief=False):
        super(MachineRoom, self).__init__(daemon=True)
        self.brief = brief
        self.cluster = cluster
        self.reboot_dir = reboot_dir
        self.namespace = namespace
        self.owner = owner
        self.stopping = threading.Event()
        self.down = set()
        self.back = {}
        self.replaced = False

    def run(self):
        while not self.stopping.wait(0.2):
            for name in set(os.listdir(self.reboot_dir)) - self.down:
                if self.brief:
                    self.back[name] = time.time()
                    os.remove(os.path.join(self.reboot_dir, name))
                    continue
                self.down.add(name)
                self.cluster.controls.set_node_unreachable(name)
            for node in json.loads(self.cluster.core.list_node(_preload_content=False).data)["items"]:
                name = node["metadata"]["name"]
                ready = [c for c in node["status"].get("conditions") or [] if c["type"] == "Ready"]
                if ready and ready[0]["status"] == "Unknown" and name in self.down and name not in self.back:
                    time.sleep(1.0)
                    self.back[name] = time.time()
                    self.cluster.controls.set_node_unreachable(name, False)
                    os.remove(os.path.join(self.reboot_dir, name))
            refused = [r for r in self.cluster.controls.requests if r["path"].endswith("/eviction") and r["status"] == 429]
            if refused and not self.replaced:
                self.replaced = True
                read_out(self.cluster.core.create_namespaced_pod(
                    self.namespace, web_pod("web-3", "gpu-node-1", self.owner), _preload_content=False))


def site_with_reboots(cluster, collections_path, tmp_path, inventory, env, namespace, owner, replaced=False,
                      brief=False, **extra_vars):
    """site.yml over the rollout inventory while a machine room reboots the nodes it asks for; (the run, the room).
    ``replaced``: the room starts no replacement pod (a budget that refuses stays closed); ``brief``: reboots that
    are over at once (MachineRoom)."""
    room = MachineRoom(cluster, str(tmp_path / "reboots"), namespace, owner, brief=brief)
    room.replaced = replaced
    room.start()
    try:
        proc, _recap = play(collections_path, tmp_path, "site", cluster.kubeconfig, inventory=inventory, env=env,
                            extra_vars=extra_vars or None)
    finally:
        room.stopping.set()
        room.join()
    return proc, room


def cordoned_nodes(cluster):
    """{node: whether it is cordoned} of every node."""
    return dict((n["metadata"]["name"], bool(n["spec"].get("unschedulable")))
                for n in json.loads(cluster.core.list_node(_preload_content=False).data)["items"])


# four site runs (two reboots in full: each node turns Unknown after the controller's 40 s grace period and comes back;
# the later runs' reboots are brief) and three plans: 112 s alone on a 2-core machine, and a slow day has taken 2.7
# times the CPU seconds of others for the same commit, too close to the suite's 300 s
@pytest.mark.timeout(900)
def test_driver_rollout_drains_reboots_and_uncordons_one_node_at_a_time(cluster, collections_path, tmp_path):
    cluster.require_controlled("reboots the nodes of the kubelet stand-in; the node lifecycle controller marks them")
    from kubernetes import client

    namespace, owner = cluster.namespace(), cluster.owner_object()
    for name, node in (("web-1", "gpu-node-1"), ("web-2", "gpu-node-2")):
        read_out(cluster.core.create_namespaced_pod(namespace, web_pod(name, node, owner), _preload_content=False))
    # at most one web pod may be down: the second node's eviction waits for the replacement
    read_out(client.PolicyV1Api(cluster.api_client).create_namespaced_pod_disruption_budget(namespace, {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}}, _preload_content=False))
    time.sleep(1.5)
    inventory, env = rollout_inventory(tmp_path, cluster)

    # the plan first: nothing written but dry-run evictions, the batches and evictions the run below then makes
    mark = cluster.mark()
    planned = upgrade_plan(collections_path, tmp_path, cluster, inventory, env)
    assert all(w["query"].get("dryRun") == "All" and w["path"].endswith("/eviction") for w in cluster.writes(mark))
    assert planned["batches"] == [["gpu-node-1"], ["gpu-node-2"]]
    assert dict((n, (p["drain"]["evicted"], p["drain"]["blocked"])) for n, p in planned["nodes"].items()) == {
        "gpu-node-1": (["%s/web-1" % namespace], []), "gpu-node-2": (["%s/web-2" % namespace], [])}
    assert planned["lines"] == [
        "batch 1: gpu-node-1: cordon and drain: evict %s/web-1; reboot (driver module not loaded (loaded: none)); "
        "uncordon once Ready" % namespace,
        "batch 2: gpu-node-2: cordon and drain: evict %s/web-2; reboot (driver module not loaded (loaded: none)); "
        "uncordon once Ready" % namespace]

    mark = cluster.mark()
    proc, room = site_with_reboots(cluster, collections_path, tmp_path, inventory, env, namespace, owner)
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-2000:]

    steps = []
    for r in cluster.requests(mark):
        if r["method"] == "PATCH" and r["path"].startswith("/api/v1/nodes/"):
            cordon = json.loads(r["body"])["spec"]["unschedulable"]
            steps.append(("cordon" if cordon else "uncordon", r["path"].rsplit("/", 1)[-1], r["status"]))
        elif r["path"].endswith("/eviction"):
            steps.append(("evict", r["path"].split("/")[-2], r["status"]))
    # consecutive 429s collapse into one step: how many depends on timing
    collapsed = [s for i, s in enumerate(steps) if i == 0 or s != steps[i - 1]]
    assert collapsed == [
        ("cordon", "gpu-node-1", 200), ("evict", "web-1", 201), ("uncordon", "gpu-node-1", 200),
        ("cordon", "gpu-node-2", 200), ("evict", "web-2", 429), ("evict", "web-2", 201),
        ("uncordon", "gpu-node-2", 200)], steps
    # the facts came from the cache (a Debian 12 host), not from gathering this machine's
    gathering = proc.stdout.split("Gather facts of the host to prepare")[1].split("TASK")[0]
    assert "ok: [gpu-node-1]" not in gathering, gathering
    # each uncordon came after its node was back (Ready again), and the second cordon after the first uncordon
    patches = dict(((r["path"].rsplit("/", 1)[-1], "cordon" if json.loads(r["body"])["spec"]["unschedulable"]
                     else "uncordon"), r["time"])
                   for r in cluster.requests(mark) if r["method"] == "PATCH" and "/nodes/" in r["path"])
    for node in ("gpu-node-1", "gpu-node-2"):
        assert patches[(node, "uncordon")] > room.back[node]
    assert patches[("gpu-node-2", "cordon")] > patches[("gpu-node-1", "uncordon")]
    assert not any(cordoned_nodes(cluster).values()), cordoned_nodes(cluster)
    # the run did what the plan said: the same batches, in order, each evicting what the plan named
    assert [(s[0], s[1]) for s in collapsed if s[0] == "cordon"] == [("cordon", n) for (n,) in planned["batches"]]
    assert [s[1] for s in collapsed if s[0] == "evict" and s[2] == 201] == [
        p.split("/")[1] for n in ("gpu-node-1", "gpu-node-2") for p in planned["nodes"][n]["drain"]["evicted"]]

    # each reboot loaded the driver; the hosts booted without it again (a driver to load on both, as after a change)
    boot_without_driver(tmp_path)
    # a budget that allows no disruption on the second node, and the first cordoned by someone else: the plan names
    # the pod and its budget as blocking, and says the first node stays cordoned (budget web goes: with one web pod
    # left, it would block the first node too)
    read_out(client.PolicyV1Api(cluster.api_client).delete_namespaced_pod_disruption_budget(
        "web", namespace, _preload_content=False))
    cluster.create_pod("solo", "gpu-node-2", labels={"app": "solo"}, owner=owner, phase="Running", ready=True)
    read_out(client.PolicyV1Api(cluster.api_client).create_namespaced_pod_disruption_budget(namespace, {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "solo"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "solo"}}}}, _preload_content=False))

    def counted():
        budget = json.loads(client.PolicyV1Api(cluster.api_client).read_namespaced_pod_disruption_budget(
            "solo", namespace, _preload_content=False).data)
        return (budget.get("status") or {}).get("currentHealthy") == 1
    wait_for(counted, what="the disruption controller to count the healthy pod of budget solo")
    read_out(cluster.core.patch_node("gpu-node-1", {"spec": {"unschedulable": True}}, _preload_content=False))
    try:
        replanned = upgrade_plan(collections_path, tmp_path, cluster, inventory, env)
        assert replanned["blocked"] == ["gpu-node-2"] and replanned["stays_cordoned"] == ["gpu-node-1"], \
            replanned["lines"]
        assert [b["pod"] for b in replanned["nodes"]["gpu-node-2"]["drain"]["blocked"]] == ["%s/solo" % namespace]
        assert "The disruption budget solo needs 1 healthy pods and has 1 currently" in \
            replanned["nodes"]["gpu-node-2"]["drain"]["blocked"][0]["message"]
        assert replanned["lines"][0].endswith("stays cordoned (cordoned before the run)"), replanned["lines"]

        # the run then does what the plan said: the first batch goes through and its node stays cordoned, the
        # second stops at the blocked drain, says so, and the run ends
        # (no replacement pod this time: the budget stays closed)
        proc, room = site_with_reboots(cluster, collections_path, tmp_path, inventory, env, namespace, owner,
                                       replaced=True, brief=True, nvidia_driver_drain_timeout=5)
        assert proc.returncode != 0, proc.stdout[-5000:]
        assert sorted(room.back) == ["gpu-node-1"], room.back
        (stopped,) = [r.get("msg") for r in proc.results if "The driver rollout stopped at" in str(r.get("msg"))]
        assert stopped.startswith("The driver rollout stopped at gpu-node-2 (node gpu-node-2) in the task"), stopped
        assert "The node stays cordoned and was not rebooted." in stopped, stopped
        assert "Hosts of earlier batches: gpu-node-1." in stopped, stopped
        assert 'the eviction of pod "%s/solo" was refused' % namespace in stopped, stopped
        cordoned = cordoned_nodes(cluster)
        assert cordoned["gpu-node-1"] and cordoned["gpu-node-2"], cordoned

        # the cause fixed (the budget gone), the same play again: the plan says the node the stopped run cordoned is
        # made schedulable again and only the one cordoned by someone else stays so, and the first node, rebooted into
        # its driver by the stopped run, has nothing left to do; the run finishes and does just that
        read_out(client.PolicyV1Api(cluster.api_client).delete_namespaced_pod_disruption_budget(
            "solo", namespace, _preload_content=False))
        resumed_plan = upgrade_plan(collections_path, tmp_path, cluster, inventory, env)
        assert resumed_plan["stays_cordoned"] == ["gpu-node-1"] and resumed_plan["blocked"] == [], resumed_plan["lines"]
        assert resumed_plan["lines"][1].endswith("uncordon once Ready (cordoned by an earlier run that stopped)"), \
            resumed_plan["lines"]
        assert resumed_plan["lines"][0] == ("batch 1: gpu-node-1: no change: driver 550.54.15 (branch 550); stays cordoned "
                                            "(cordoned before the run)"), \
            resumed_plan["lines"]
        proc, room = site_with_reboots(cluster, collections_path, tmp_path, inventory, env, namespace, owner,
                                       replaced=True, brief=True, nvidia_driver_drain_timeout=30)
        assert proc.returncode == 0, proc.stdout[-5000:]
        assert sorted(room.back) == ["gpu-node-2"], room.back
        cordoned = cordoned_nodes(cluster)
        assert cordoned["gpu-node-1"] and not cordoned["gpu-node-2"], cordoned

        # a run that stopped after the second node's reboot (it came back after the reboot timeout) left that node
        # cordoned by the rollout, its driver running: the plan says the next run lifts that cordon, and the run does,
        # rebooting nothing, and leaves the administrator's cordon of the first node alone
        read_out(cluster.core.patch_node("gpu-node-2", {"spec": {"unschedulable": True}, "metadata": {
            "annotations": {"kubehw.devices/cordoned": "2026-12-02T00:00:00Z"}}}, _preload_content=False))
        left_plan = upgrade_plan(collections_path, tmp_path, cluster, inventory, env)
        assert left_plan["lines"][1] == ("batch 2: gpu-node-2: no change: driver 550.54.15 (branch 550); uncordon "
                                         "(cordoned by an earlier run that stopped)"), left_plan["lines"]
        assert left_plan["stays_cordoned"] == ["gpu-node-1"], left_plan["lines"]
        proc, room = site_with_reboots(cluster, collections_path, tmp_path, inventory, env, namespace, owner,
                                       replaced=True, brief=True)
        assert proc.returncode == 0, proc.stdout[-5000:]
        assert room.back == {}, room.back
        cordoned = cordoned_nodes(cluster)
        assert cordoned["gpu-node-1"] and not cordoned["gpu-node-2"], cordoned
        node_2 = json.loads(cluster.core.read_node("gpu-node-2", _preload_content=False).data)
        assert "kubehw.devices/cordoned" not in (node_2["metadata"].get("annotations") or {})
    finally:
        for name in ("gpu-node-1", "gpu-node-2"):
            read_out(cluster.core.patch_node(name, {"spec": {"unschedulable": None}}, _preload_content=False))


def test_drift_reads_the_hosts_driver_on_request_and_no_repair_run_writes_it(cluster, collections_path, tmp_path):
    """drift.yml with kubehw_drift_hosts=true on hosts whose driver (branch 550) is installed but not loaded: a row per
    host, read as the upgrade plan reads the hosts, nothing changed; a repair run leaves those rows (a driver change
    drains and reboots: site.yml) and exits 2 saying so. With the toolkit declared on hosts that have no containerd,
    each host gets a row saying why its runtime files could not be worked out, beside its driver row. Without the
    variable the hosts are not read."""
    cluster.require_controlled("the rollout inventory names the configured demo nodes")
    inventory, env = rollout_inventory(tmp_path, cluster)
    mark = cluster.mark()
    runs = {}
    # the toolkit declared on hosts without containerd (this machine has none: checked here, not assumed)
    assert shutil.which("containerd", path=env["PATH"]) is None
    for name, extra in (("hosts", {"kubehw_drift_hosts": "true"}),
                        ("repair", {"kubehw_drift_hosts": "true", "kubehw_repair": "true"}),
                        ("no containerd", {"kubehw_drift_hosts": "true", "accelerator_node_install_toolkit": "true"}),
                        ("cluster only", {})):
        runs[name], _recap = play(collections_path, tmp_path, "drift", cluster.kubeconfig, inventory=inventory,
                                  env=env, extra_vars=extra)
    expected = ['drift: %s: NVIDIA driver: declared "branch 550 loaded", observed "550.54.15 installed, not loaded '
                '(kernel modules loaded: none)"' % node for node in ("gpu-node-1", "gpu-node-2")]
    assert runs["hosts"].returncode == 2, runs["hosts"].output()
    assert sorted(runs["hosts"].printed_messages("drift: ")) == expected, runs["hosts"].output()
    assert runs["repair"].returncode == 2 and sorted(runs["repair"].printed_messages("drift: ")) == expected
    assert "a host's driver or packages change with site.yml" in runs["repair"].stdout, runs["repair"].output()
    # a host whose runtime files the roles cannot work out is a row saying why, beside its other rows, not a host
    # dropped from the report
    unreadable = ['drift: %s: container runtime configuration: declared "as the run writes it", observed "not worked '
                  'out: containerd is not installed on %s (' % (node, node) for node in ("gpu-node-1", "gpu-node-2")]
    printed = sorted(runs["no containerd"].printed_messages("drift: "))
    assert runs["no containerd"].returncode == 2, runs["no containerd"].output()
    assert [line for line in printed if "NVIDIA driver" in line] == expected, runs["no containerd"].output()
    assert [line[:len(prefix)] for line, prefix in zip([line for line in printed if "runtime" in line], unreadable)] \
        == unreadable, runs["no containerd"].output()
    assert len(printed) == 4, printed
    assert runs["cluster only"].returncode == 0 and "no drift" in runs["cluster only"].stdout, \
        runs["cluster only"].output()
    assert cluster.writes(mark) == [] and not os.listdir(str(tmp_path / "reboots"))


def test_the_images_and_preflight_job_templates_run_their_playbooks_with_survey_strings(collections_path, tmp_path):
    """The images template as AWX launches it (its survey's empty mirror answer is a string, not an absent variable)
    lists the upstream images by tag and published digest; the preflight template's answers are the site template's
    own questions, so a platform team checks the hosts for the run it will launch."""
    _template, answers = survey_answers("kubehw.devices images", {})
    assert answers == {"kubehw_image_registry": ""}
    proc, _recap = play(collections_path, tmp_path, "images", extra_vars=answers)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    listed = [line for line in proc.stdout.splitlines() if "(nvidia" in line or "digest" in line]
    assert any("nvcr.io/nvidia/k8s-device-plugin:v0.20.0@sha256:a61ba9fd" in line for line in listed), proc.stdout[-4000:]
    assert not [line for line in listed if '"msg": "/' in line or "None/" in line], listed
    preflight, preflight_answers = survey_answers("kubehw.devices preflight", {})
    site, site_answers = survey_answers("kubehw.devices site", {})
    assert preflight["playbook"] == "playbooks/preflight.yml" and preflight["become_enabled"] is True
    assert set(preflight_answers) < set(site_answers)
    assert all(preflight_answers[key] == site_answers[key] for key in preflight_answers), (preflight_answers, site)
