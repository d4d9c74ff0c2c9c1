# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The leftovers snapshot on a real apiserver: what a test made is removed after it, what was there before and the
controller manager's own ServiceAccounts are not."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import uuid

from tests.support.k8s_objects import read_out
from tests.support.leftovers import Snapshot


def names(core, namespace):
    return [c["metadata"]["name"] for c in json.loads(core.list_namespaced_config_map(
        namespace, _preload_content=False).data)["items"]]


def test_removes_what_was_made_since_but_not_the_controller_managers_service_accounts(kubeconfigs):
    from kubernetes import client, config

    api_client = config.new_client_from_config(config_file=kubeconfigs[0])
    core = client.CoreV1Api(api_client)
    tag = uuid.uuid4().hex[:8]
    before = "leftovers-before-%s" % tag
    read_out(core.create_namespaced_config_map("default", {"metadata": {"name": before}}, _preload_content=False))
    try:
        snapshot = Snapshot(api_client)
        made = "leftovers-made-%s" % tag
        read_out(core.create_namespaced_config_map("default", {"metadata": {"name": made}}, _preload_content=False))
        # as the controller manager does for a controller it starts after the snapshot
        controller = "leftovers-controller-%s" % tag
        read_out(core.create_namespaced_service_account("kube-system", {"metadata": {"name": controller}},
                                                        _preload_content=False))
        try:
            assert snapshot.remove_newer() == []
            left = names(core, "default")
            assert before in left and made not in left, left
            accounts = json.loads(core.list_namespaced_service_account("kube-system", _preload_content=False).data)
            assert controller in [a["metadata"]["name"] for a in accounts["items"]]
        finally:
            read_out(core.delete_namespaced_service_account(controller, "kube-system", _preload_content=False))
    finally:
        read_out(core.delete_namespaced_config_map(before, "default", _preload_content=False))
        api_client.close()
