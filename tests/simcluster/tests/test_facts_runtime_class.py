# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""FACTS.md, RuntimeClass admission: a pod naming a RuntimeClass that does not exist is refused."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import time

import pytest

from tests.simcluster.tests.test_controllers import wait_for

kubernetes = pytest.importorskip("kubernetes")
from kubernetes import client as k8s_client  # noqa: E402  pylint: disable=wrong-import-position
from kubernetes import config as k8s_config  # noqa: E402  pylint: disable=wrong-import-position
from kubernetes.client.rest import ApiException  # noqa: E402  pylint: disable=wrong-import-position

CONFIG = {
    "sync_interval": 0.1,
    "pod_start_delay": 0.1,
    "nodes": [{"name": "gpu-1"}],
}


@pytest.fixture
def sim(simcluster_factory):
    cluster = simcluster_factory(CONFIG)
    yield cluster
    assert cluster.controllers.errors == []


@pytest.fixture
def api(sim):
    api_client = k8s_config.new_client_from_config(config_file=sim.kubeconfig_path)
    yield (k8s_client.CoreV1Api(api_client), k8s_client.AppsV1Api(api_client),
           k8s_client.NodeV1Api(api_client))
    api_client.close()


def pod(runtime_class, name=None, generate_name=None):
    meta = {"name": name} if name else {"generateName": generate_name}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"runtimeClassName": runtime_class,
                     "containers": [{"name": "c", "image": "registry.example/smoke:1"}]}}


def refusal(call, *args, **kwargs):
    with pytest.raises(ApiException) as caught:
        call(*args, **kwargs)
    return caught.value.status, json.loads(caught.value.body)


def pods_of(core, app):
    return core.list_namespaced_pod("default", label_selector="app=%s" % app).items


def test_pod_naming_a_missing_runtime_class_is_refused(api):
    core, _apps, node = api
    status, body = refusal(core.create_namespaced_pod, "default", pod("nvidia", name="smoke"))
    assert status == 403
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": 'pods "smoke" is forbidden: pod rejected: RuntimeClass "nvidia" not found',
                    "reason": "Forbidden", "details": {"name": "smoke", "kind": "pods"}, "code": 403}
    # a generated name is not made yet: the message names the prefix; a dry run is refused the same way
    status, body = refusal(core.create_namespaced_pod, "default", pod("nvidia", generate_name="smoke-"),
                           dry_run="All")
    assert (status, body["message"]) == (
        403, 'pods "smoke-" is forbidden: pod rejected: RuntimeClass "nvidia" not found')
    assert core.list_namespaced_pod("default").items == []

    node.create_runtime_class({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
                               "metadata": {"name": "nvidia"}, "handler": "nvidia"})
    assert core.create_namespaced_pod("default", pod("nvidia", name="smoke")).metadata.name == "smoke"


def test_daemonset_pods_appear_only_once_the_runtime_class_exists(sim, api):
    _core, apps, node = api
    core = _core
    apps.create_namespaced_daemon_set("default", {
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "plugin"},
        "spec": {"selector": {"matchLabels": {"app": "plugin"}},
                 "template": {"metadata": {"labels": {"app": "plugin"}},
                              "spec": {"runtimeClassName": "nvidia",
                                       "containers": [{"name": "p", "image": "registry.example/plugin:1"}]}}}})
    wait_for(lambda: (apps.read_namespaced_daemon_set_status("plugin", "default").status.desired_number_scheduled
                      == 1), what="desired 1")
    # several controller passes (sync_interval 0.1 s): the pod is refused each time, none appears
    time.sleep(1)
    assert pods_of(core, "plugin") == []
    assert apps.read_namespaced_daemon_set_status("plugin", "default").status.current_number_scheduled == 0

    node.create_runtime_class({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
                               "metadata": {"name": "nvidia"}, "handler": "nvidia"})
    wait_for(lambda: len(pods_of(core, "plugin")) == 1, what="the DaemonSet's pod")
    assert pods_of(core, "plugin")[0].spec.runtime_class_name == "nvidia"
