# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The RuntimeClass the nvidia preset's pods name, for tests that roll the preset out.

A pod naming a RuntimeClass that does not exist is refused by the apiserver's RuntimeClass admission
(docs/kubernetes_facts.md), so a DaemonSet of the nvidia preset gets no pod until RuntimeClass nvidia
exists; on a GPU cluster the nvidia_container_toolkit role (or the GPU Operator) has created it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from tests.support.k8s_objects import read_out


def ensure_nvidia_runtime_class(cluster, name="nvidia", handler="nvidia"):
    """Create RuntimeClass <name> unless it exists. A RuntimeClass this creates is left in place (tests running in parallel may need it)."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    api = client.NodeV1Api(cluster.api_client)
    try:
        read_out(api.read_runtime_class(name, _preload_content=False))
        return name
    except ApiException as err:
        if err.status != 404:
            raise
    try:
        read_out(api.create_runtime_class({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
                                           "metadata": {"name": name}, "handler": handler}, _preload_content=False))
    except ApiException as err:
        # created meanwhile by a test running in parallel
        if err.status != 409 or json.loads(err.body or "{}").get("reason") != "AlreadyExists":
            raise
    return name
