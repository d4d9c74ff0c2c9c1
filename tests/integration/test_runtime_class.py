# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The nvidia_container_toolkit role's optional RuntimeClass, created through the cluster API."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from kubernetes import client


def runtime_class_task(cluster):
    return {"name": "RuntimeClass", "ansible.builtin.include_role": {
        "name": "kubehw.devices.nvidia_container_toolkit", "tasks_from": "runtime-class"},
        "vars": {"nvidia_container_toolkit_kubeconfig": cluster.kubeconfig,
                 "nvidia_container_toolkit_kube_context": ""}}


def read_runtime_class(cluster):
    api = client.NodeV1Api(cluster.api_client)
    return json.loads(api.read_runtime_class("nvidia", _preload_content=False).data)


def test_runtime_class_created_once_and_left_alone_after(cluster, ansible):
    mark = cluster.mark()
    check = ansible([runtime_class_task(cluster)], check=True)
    assert check.rc == 0, check.output()
    if cluster.simulated:
        # kubernetes.core checks by server-side dry run: the request is sent, nothing is stored
        assert all("dryRun" in str(w["query"]) for w in cluster.writes(mark)), cluster.writes(mark)
    api = client.NodeV1Api(cluster.api_client)
    assert "nvidia" not in [rc.metadata.name for rc in api.list_runtime_class().items]
    first = ansible([runtime_class_task(cluster)])
    assert first.rc == 0, first.output()
    assert "changed=1" in first.stdout
    created = read_runtime_class(cluster)
    assert created["handler"] == "nvidia"
    assert created["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "kubehw.devices"
    mark = cluster.mark()
    second = ansible([runtime_class_task(cluster)])
    assert second.rc == 0 and "changed=0" in second.stdout, second.output()
    if cluster.simulated:
        assert cluster.writes(mark) == []
    assert read_runtime_class(cluster)["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
