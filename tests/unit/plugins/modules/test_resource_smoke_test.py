# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""resource_smoke_test: the pod it makes (with limits, or through a ResourceClaimTemplate in each DRA version),
and input refused before any request."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.kubehw.devices.plugins.module_utils import _dra
from ansible_collections.kubehw.devices.plugins.modules import resource_smoke_test as mod
from tests.unit.plugins.modules.module_harness import run_module

PARAMS = dict(resource="nvidia.com/gpu", count=1, node="gpu-1", namespace="default", name_prefix="kubehw-smoke-",
              image="nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04", command=["nvidia-smi", "-L"], tolerations=[],
              runtime_class_name=None, expect="scheduled", wait_for="completed", timeout=120)


def test_the_pod_names_the_runtime_class_it_is_given():
    pod = mod.pod_manifest(dict(PARAMS, runtime_class_name="nvidia"), "run1")
    assert pod["spec"]["runtimeClassName"] == "nvidia"
    assert pod["metadata"]["labels"][mod.RUN_LABEL] == "run1"


@pytest.mark.parametrize("value", [None, ""])
def test_no_runtime_class_leaves_the_node_default(value):
    pod = mod.pod_manifest(dict(PARAMS, runtime_class_name=value), "run1")
    assert "runtimeClassName" not in pod["spec"]


def test_the_pod_is_pinned_by_node_name_not_hostname_label():
    terms = mod.pod_manifest(PARAMS, "run1")["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-1"]}]}]


class NoClient(object):
    def __init__(self, module):
        raise AssertionError("a request was about to be made")


@pytest.mark.parametrize("value", ["NVIDIA", "nvidia\n", "-nvidia", "nv_idia", "a" * 254])
def test_a_bad_runtime_class_name_is_refused_before_any_request(value, capsys, monkeypatch):
    monkeypatch.setattr(mod, "KubeClient", NoClient)
    result = run_module(mod, capsys, {"resource": "nvidia.com/gpu", "runtime_class_name": value})
    assert result["failed"]
    assert "runtime_class_name" in result["msg"] and repr(value) in result["msg"]
    assert "DNS-1123 subdomain" in result["msg"]


# --- DRA: the claim template in each served version, and the pod that uses it

LABELS = {mod.RUN_LABEL: "run1"}


def test_the_claim_template_puts_the_request_under_exactly():
    tmpl = _dra.claim_template("kubehw-smoke-", "default", LABELS, "gpu.example.com", 2)
    assert tmpl["apiVersion"] == "resource.k8s.io/v1"
    assert tmpl["kind"] == "ResourceClaimTemplate"
    assert tmpl["metadata"] == {"generateName": "kubehw-smoke-", "namespace": "default", "labels": LABELS}
    # spec.metadata is copied into every claim made from the template: the claims carry the run label
    assert tmpl["spec"]["metadata"] == {"labels": LABELS}
    assert tmpl["spec"]["spec"] == {"devices": {"requests": [{"name": "device", "exactly": {
        "deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 2}}]}}


def test_the_dra_pod_references_the_template_and_its_container_uses_the_claim():
    params = dict(PARAMS, resource=None, device_class="gpu.example.com")
    pod = mod.pod_manifest(params, "run1", template="kubehw-smoke-abcde")
    assert pod["spec"]["resourceClaims"] == [{"name": "device", "resourceClaimTemplateName": "kubehw-smoke-abcde"}]
    container = pod["spec"]["containers"][0]
    assert container["resources"] == {"claims": [{"name": "device"}]}
    # pinned, labelled for the run and bounded in time as the extended-resource pod is
    assert pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["gpu-1"]
    assert pod["metadata"]["labels"][mod.RUN_LABEL] == "run1"
    assert pod["spec"]["activeDeadlineSeconds"] == mod.active_deadline(params)


def test_allocation_results_and_node_of_a_claim():
    claim = {"status": {"allocation": {
        "devices": {"results": [{"request": "device", "driver": "gpu.example.com", "pool": "gpu-1", "device": "gpu-0",
                                 "adminAccess": None}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["gpu-1"]}]}]}}}}
    assert _dra.allocation_results(claim) == [
        {"request": "device", "driver": "gpu.example.com", "pool": "gpu-1", "device": "gpu-0"}]
    assert _dra.allocated_node(claim) == "gpu-1"
    assert _dra.allocation_results({"status": {}}) == []


# --- input refused before any request (node, namespace and name_prefix are whole-string checked)

@pytest.mark.parametrize("option, value, rule", [
    ("node", "", "must not be empty or blank"),
    ("node", " ", "must not be empty or blank"),
    ("node", "gpu-1\n", "DNS subdomain"),
    ("node", "GPU-1", "lowercase"),
    ("namespace", "", "must not be empty or blank"),
    ("namespace", "kube system", "DNS label"),
    ("namespace", "default\n", "DNS label"),
    ("namespace", "my.namespace", "DNS label"),
    ("name_prefix", "", "must not be empty or blank"),
    ("name_prefix", "Smoke-", "DNS subdomain"),
    ("name_prefix", "smoke-\n", "DNS subdomain"),
    ("name_prefix", "-smoke", "DNS subdomain"),
    ("name_prefix", "s" * 59, "at most 58"),
    ("device_class", "GPU.example.com", "DNS subdomain"),
    ("device_class", "gpu.example.com\n", "DNS subdomain"),
])
def test_bad_targets_are_refused_before_any_request(option, value, rule, capsys, monkeypatch):
    monkeypatch.setattr(mod, "KubeClient", NoClient)
    args = {"resource": "nvidia.com/gpu", option: value}
    if option == "device_class":
        args.pop("resource")
    result = run_module(mod, capsys, args)
    assert result["failed"]
    assert option in result["msg"] and repr(value) in result["msg"] and rule in result["msg"], result["msg"]


@pytest.mark.parametrize("args, words", [
    ({"resource": "nvidia.com/gpu", "device_class": "gpu.example.com"}, "mutually exclusive"),
    ({}, "one of the following is required"),
])
def test_resource_and_device_class_are_one_or_the_other(args, words, capsys, monkeypatch):
    monkeypatch.setattr(mod, "KubeClient", NoClient)
    result = run_module(mod, capsys, args)
    assert result["failed"] and words in result["msg"], result["msg"]


def test_a_valid_prefix_of_58_characters_and_a_dotted_one_pass():
    for prefix in ("s" * 57 + "-", "smoke.test-"):
        assert mod.input_problem(dict(PARAMS, name_prefix=prefix, device_class=None)) is None


def test_a_template_create_whose_answer_is_lost_is_found_by_the_run_label():
    """create_json calls find() after a 5xx or a dropped connection: the run's template is looked up by its run
    label (the oldest one if two were stored) instead of being created again."""
    class FakeDra(object):
        version = "v1beta1"

        def __init__(self):
            self.listed = []
            self.body = None

        def list_namespaced(self, plural, namespace, what, label_selector=None):
            self.listed.append((plural, namespace, label_selector))
            return [{"metadata": {"name": "kubehw-smoke-later", "creationTimestamp": "2026-11-23T10:00:01Z"}},
                    {"metadata": {"name": "kubehw-smoke-first", "creationTimestamp": "2026-11-23T10:00:00Z"}}]

        def create_namespaced(self, plural, namespace, body, what, find):
            self.body = body
            return find()   # as create_json does once the POST's answer was lost

    fake = FakeDra()
    params = dict(PARAMS, resource=None, device_class="gpu.example.com", count=2)
    assert mod.create_template(fake, params, "run1")["metadata"]["name"] == "kubehw-smoke-first"
    assert fake.listed == [("resourceclaimtemplates", "default", "kubehw.devices/smoke-test-run=run1")]
    # the body carries the run label twice
    assert fake.body["apiVersion"] == "resource.k8s.io/v1"
    assert fake.body["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 2
    assert fake.body["metadata"]["labels"][mod.RUN_LABEL] == fake.body["spec"]["metadata"]["labels"][mod.RUN_LABEL]


def test_a_device_class_that_does_not_exist_is_refused_before_anything_is_created(monkeypatch):
    """The apiserver would store the template and the pod; the scheduler would only hold the pod back. The module
    reads the DeviceClass first and fails naming it, with no write."""
    class FakeDra(object):
        version = "v1"

        def __init__(self, client):
            self.calls = []

        def discover(self):
            return self.version

        def get(self, plural, name, what):
            self.calls.append(("get", plural, name))
            return None

        def create_namespaced(self, *args, **kwargs):
            self.calls.append(("create",) + args)
            raise AssertionError("created something")

    made = []
    monkeypatch.setattr(mod, "DraApi", lambda client: made.append(FakeDra(client)) or made[-1])
    params = dict(PARAMS, resource=None, device_class="nope.example.com", count=1)
    with pytest.raises(mod.KubeHwError) as err:
        mod.run(type("Module", (), {"params": params})(), client=None)
    assert "DeviceClass 'nope.example.com' does not exist (resource.k8s.io/v1)" in err.value.msg
    assert "nothing was created" in err.value.msg and err.value.status == 404
    assert made[0].calls == [("get", "deviceclasses", "nope.example.com")]


def test_the_exit_code_is_the_terminated_container_s_and_none_before_it_ran():
    ran = {"status": {"containerStatuses": [{"state": {"terminated": {"exitCode": 1, "reason": "Error"}}}]}}
    waiting = {"status": {"containerStatuses": [{"state": {"waiting": {"reason": "CreateContainerError"}}}]}}
    assert mod.exit_code(ran) == 1
    assert mod.exit_code(waiting) is None and mod.exit_code({"status": {}}) is None


def test_a_failed_dra_pod_whose_container_ran_is_explained_by_the_runtime_s_cdi_injection():
    result = {"node": "gpu-1", "exit_code": 1, "claim": "smoke-x-device-y", "log": "no device\n",
              "allocation": [{"driver": "gpu.example.com", "pool": "gpu-1", "device": "gpu-0"}]}
    message = mod.failure_message({"device_class": "gpu.example.com"}, result)
    assert message.startswith("The smoke-test pod failed on gpu-1: its container exited with code 1. ")
    assert "smoke-x-device-y was allocated (gpu.example.com gpu-1/gpu-0) and prepared by the driver" in message
    assert "enable_cdi = true" in message and "nvidia_container_toolkit_cdi" in message
    assert message.endswith("Its log: no device\n")
    # an extended resource, or a container that never ran: nothing about CDI
    assert "CDI" not in mod.failure_message({"resource": "example.com/dongle"}, dict(result, allocation=None))
    assert "CDI" not in mod.failure_message({"device_class": "gpu.example.com"}, dict(result, exit_code=None))


@pytest.mark.parametrize("runtime, says, not_said", [
    # the node's own runtime decides what the message says of CDI
    ("containerd://1.6.36", "the node runs containerd 1.6.36, which does not inject CDI devices at all", "toolkit"),
    ("containerd://1.7.24", "the node runs containerd 1.7.24, which injects them only with enable_cdi = true",
     "enable_cdi = false"),
    ("containerd://v2.1.4", "the node runs containerd v2.1.4, which injects them unless its configuration sets "
     "enable_cdi = false", "does not inject"),
    # CRI-O injects CDI devices whatever its configuration: no containerd setting to point at
    ("cri-o://1.33.2", "The node runs cri-o 1.33.2, which injects a claim's CDI devices whatever its configuration",
     "enable_cdi"),
])
def test_the_cdi_part_of_a_failed_dra_pod_s_message_is_the_node_s_runtime_s(runtime, says, not_said):
    result = {"node": "gpu-1", "exit_code": 1, "claim": "c", "log": "",
              "allocation": [{"driver": "gpu.example.com", "pool": "gpu-1", "device": "gpu-0"}]}
    message = mod.failure_message({"device_class": "gpu.example.com"}, result, runtime)
    assert says in message and not_said not in message, message
    assert "prepared by the driver" in message


@pytest.mark.parametrize("reported", ["containerd://2.1.4\nthe node is fine, ignore CDI", "containerd://" + "9" * 500,
                                      "{{ lookup('pipe', 'id') }}", ""])
def test_a_runtime_version_that_is_not_one_is_not_repeated_and_gets_the_general_explanation(reported):
    result = {"node": "gpu-1", "exit_code": 1, "claim": "c", "log": "",
              "allocation": [{"driver": "gpu.example.com", "pool": "gpu-1", "device": "gpu-0"}]}
    message = mod.failure_message({"device_class": "gpu.example.com"}, result, reported)
    assert "which containerd injects only from version 1.7 on and with enable_cdi = true" in message
    assert "ignore CDI" not in message and "9" * 70 not in message and "lookup" not in message


def test_a_runtime_the_kubelet_could_not_reach_is_named_so_beside_the_general_explanation():
    result = {"node": "gpu-1", "exit_code": 1, "claim": "c", "log": "",
              "allocation": [{"driver": "gpu.example.com", "pool": "gpu-1", "device": "gpu-0"}]}
    message = mod.failure_message({"device_class": "gpu.example.com"}, result, "containerd://Unknown")
    assert "which containerd injects only from version 1.7 on and with enable_cdi = true" in message
    assert ("The node's kubelet reports its runtime as containerd://Unknown: it could not reach containerd when it last "
            "updated the node's status (the runtime down or restarting)") in message, message
    # only that exact report: anything else read from the cluster is not repeated
    assert "could not reach" not in mod.failure_message({"device_class": "gpu.example.com"}, result,
                                                        "containerd://Unknown; ignore CDI")


def test_the_node_s_runtime_is_read_from_its_kubelet_s_report_and_a_refused_read_words_the_message_without_it():
    class Core(object):
        def __init__(self, answer):
            self.answer = answer

        def read_node(self, name):
            return name

    class Client(object):
        def __init__(self, answer):
            self.core = Core(answer)
            self.answer = answer

        def call_json(self, fn, *args, **kwargs):
            assert fn(*args) == "gpu-1" and kwargs["what"] == 'read node "gpu-1"'
            if isinstance(self.answer, Exception):
                raise self.answer
            return self.answer

    reported = {"status": {"nodeInfo": {"containerRuntimeVersion": "containerd://2.1.4"}}}
    assert mod.node_runtime(Client(reported), "gpu-1") == "containerd://2.1.4"
    assert mod.node_runtime(Client(mod.KubeHwError("forbidden", status=403)), "gpu-1") is None


def test_the_pod_takes_its_image_from_the_mirror_with_the_pull_secrets():
    pod = mod.pod_manifest(dict(PARAMS, image_registry="mirror.local:5000", image_pull_secrets=["mirror-pull"]), "run1")
    assert pod["spec"]["containers"][0]["image"] == "mirror.local:5000/nvidia/cuda:12.4.1-base-ubuntu22.04"
    assert pod["spec"]["imagePullSecrets"] == [{"name": "mirror-pull"}]
    assert "imagePullSecrets" not in mod.pod_manifest(PARAMS, "run1")["spec"]


@pytest.mark.parametrize("option,value,rule", [
    ("image_registry", "mirror.local/", "must be a registry host"),
    ("image_registry", " ", "must be a registry host"),
    ("image_pull_secrets", ["a b"], "must be a Secret name"),
])
def test_bad_mirror_settings_are_refused_before_any_request(option, value, rule, capsys, monkeypatch):
    monkeypatch.setattr(mod, "KubeClient", NoClient)
    result = run_module(mod, capsys, {"resource": "nvidia.com/gpu", option: value})
    assert result["failed"]
    assert option in result["msg"] and rule in result["msg"], result["msg"]


def test_the_documented_default_image_is_the_lists_pause_by_tag_and_digest():
    import yaml

    from ansible_collections.kubehw.devices.plugins.module_utils._images import reference

    assert yaml.safe_load(mod.DOCUMENTATION)["options"]["image"]["default"] == reference("pause")
    assert reference("pause").startswith("registry.k8s.io/pause:3.10@sha256:ee6521f2")
