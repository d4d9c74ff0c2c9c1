# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The write observer on a real control plane: kube-controller-manager's own writes on a new node, and the objects
it makes in a new namespace, are not counted as the collection's; a label written on the node, and a ServiceAccount
made in the namespace, are."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import uuid

from tests.support.cluster import Cluster, wait_for
from tests.support.k8s_objects import read_out
from tests.support.write_observer import CONTROLLER_ANNOTATIONS, CONTROLLER_OBJECTS


def test_a_new_nodes_controller_annotations_are_not_writes_but_a_label_is(kubeconfigs):
    cluster = Cluster(kubeconfigs[0])
    name = "observed-%s" % uuid.uuid4().hex[:8]
    try:
        read_out(cluster.core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}},
                                          _preload_content=False))
        cluster.on_close("delete node %s" % name, lambda: cluster.core.delete_node(name, _preload_content=False))
        observer = cluster.observe_writes(names=[name], by_watch=True)

        def annotated():
            node = json.loads(cluster.core.read_node(name, _preload_content=False).data)
            return CONTROLLER_ANNOTATIONS & set(node["metadata"].get("annotations") or {})
        # the TTL controller annotates the node after the observer read it: a MODIFIED event the observer must skip
        wait_for(annotated, timeout=60, what="kube-controller-manager's TTL annotation on %s" % name)
        assert observer.writes() == []
        read_out(cluster.core.patch_node(name, {"metadata": {"labels": {"written": "yes"}}}, _preload_content=False))
        assert observer.writes() == [("MODIFIED", "nodes/%s" % name)]
    finally:
        cluster.close()


def test_the_node_view_leaves_out_only_the_controller_annotations():
    """The rule itself, without waiting on the TTL controller's timing (it often annotates before the observer's
    first read, so the test above cannot always meet the race the real stage met)."""
    from tests.support.write_observer import WriteObserver

    node = {"metadata": {"name": "n", "labels": {"a": "1"}, "annotations": {"ours": "x"}},
            "status": {"capacity": {"example.com/gpu": "1"}}}
    annotated = json.loads(json.dumps(node))
    annotated["metadata"]["annotations"]["node.alpha.kubernetes.io/ttl"] = "0"
    assert WriteObserver._node_view(annotated) == WriteObserver._node_view(node)
    changed = json.loads(json.dumps(node))
    changed["metadata"]["annotations"]["ours"] = "y"
    assert WriteObserver._node_view(changed) != WriteObserver._node_view(node)


def test_a_new_namespaces_controller_objects_are_not_writes_but_a_service_account_is(kubeconfigs):
    cluster = Cluster(kubeconfigs[0])
    name = "observed-%s" % uuid.uuid4().hex[:8]
    try:
        # the observer is made before kube-controller-manager fills the namespace, the race a loaded run met
        read_out(cluster.core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
                                               _preload_content=False))
        cluster.on_close("delete namespace %s" % name, lambda: cluster.core.delete_namespace(name, _preload_content=False))
        observer = cluster.observe_writes(namespaces=[name], by_watch=True)

        wait_for(lambda: _present(cluster, name) == set(CONTROLLER_OBJECTS), timeout=60,
                 what="kube-controller-manager's default ServiceAccount and CA ConfigMaps in %s" % name)
        assert observer.writes() == []
        read_out(cluster.core.create_namespaced_service_account(
            name, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "ours"}}, _preload_content=False))
        assert observer.writes() == [("ADDED", "%s/serviceaccounts/ours" % name)]
    finally:
        cluster.close()


def _present(cluster, namespace):
    accounts = json.loads(cluster.core.list_namespaced_service_account(namespace, _preload_content=False).data)
    configmaps = json.loads(cluster.core.list_namespaced_config_map(namespace, _preload_content=False).data)
    return set([("serviceaccounts", o["metadata"]["name"]) for o in accounts["items"]] +
               [("configmaps", o["metadata"]["name"]) for o in configmaps["items"]])
