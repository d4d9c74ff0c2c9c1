# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which writes a test's modules made: the request log where the suite controls the cluster (exact), else a watch
from the resourceVersion of a list made before (any kube-apiserver)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

WRITE_METHODS = frozenset(["POST", "PUT", "PATCH", "DELETE"])

# Node annotations that kube-controller-manager writes on its own (the TTL controller's), never the collection.
CONTROLLER_ANNOTATIONS = frozenset(["node.alpha.kubernetes.io/ttl"])
# Objects kube-controller-manager makes in every new namespace when its queue gets to it, never the collection (as
# measured on v1.36.2): the service account controller's "default" ServiceAccount and the CA publishers' ConfigMaps
CONTROLLER_OBJECTS = frozenset([("serviceaccounts", "default"), ("configmaps", "kube-root-ca.crt"),
                                ("configmaps", "openshift-service-ca.crt")])


class LogObserver:
    """Writes since it was made, from the fault proxy's request log (exact: every write request)."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.start = len(cluster.controls.requests)

    def writes(self):
        return [(r["method"], r["path"]) for r in self.cluster.writes(self.start)]


class WriteObserver:
    """Writes since it was made, as any kube-apiserver shows them: each kind the collection writes is listed
    (one object per page is enough: only the list's resourceVersion is kept), and writes() then opens a watch
    from that resourceVersion, which replays every change made after the list (ADDED, MODIFIED, DELETED), ending
    after timeoutSeconds=1 (all kinds at once, so about one second in all).

    On a shared cluster other tests, controllers and kubelets write too, so only the objects a test names count:
    everything in ``namespaces`` but what kube-controller-manager makes in each (CONTROLLER_OBJECTS), and
    cluster-scoped objects (nodes, namespaces, RuntimeClasses, DeviceClasses, ClusterRoles and bindings) named in
    ``names``. A write that changes nothing (a patch equal to the object)
    stores nothing and is not seen; the fault proxy's request log sees those too (LogObserver)."""

    def __init__(self, cluster, namespaces, names):
        from kubernetes import client

        self.cluster = cluster
        self.names = set(names)
        custom = client.CustomObjectsApi(cluster.api_client)
        rbac, core = cluster.rbac, cluster.core
        kinds = [("nodes", True, core.list_node), ("namespaces", True, core.list_namespace),
                 ("runtimeclasses", True, client.NodeV1Api(cluster.api_client).list_runtime_class),
                 ("deviceclasses", True,
                  lambda **kw: custom.list_cluster_custom_object("resource.k8s.io", "v1", "deviceclasses", **kw)),
                 ("clusterroles", True, rbac.list_cluster_role),
                 ("clusterrolebindings", True, rbac.list_cluster_role_binding)]
        for ns in namespaces:
            kinds += [("%s/pods" % ns, False, lambda ns=ns, **kw: core.list_namespaced_pod(ns, **kw)),
                      ("%s/configmaps" % ns, False, lambda ns=ns, **kw: core.list_namespaced_config_map(ns, **kw)),
                      ("%s/serviceaccounts" % ns, False,
                       lambda ns=ns, **kw: core.list_namespaced_service_account(ns, **kw)),
                      ("%s/daemonsets" % ns, False,
                       lambda ns=ns, **kw: cluster.apps.list_namespaced_daemon_set(ns, **kw))]
            for plural in ("resourceclaims", "resourceclaimtemplates"):
                kinds.append(("%s/%s" % (ns, plural), False, lambda ns=ns, plural=plural, **kw:
                              custom.list_namespaced_custom_object("resource.k8s.io", "v1", ns, plural, **kw)))
        # Nodes change under everyone: kubelets report status, the node lifecycle controller taints a Node object
        # without a kubelet. A node counts as written when what the collection writes on it changed.
        self.nodes = {}
        for name in self.names:
            answer = self._get(lambda **kw: core.read_node(name, **kw))
            if answer is not None:
                self.nodes[name] = self._node_view(json.loads(answer.data))
        self.marks = []
        for what, cluster_scoped, list_fn in kinds:
            answer = self._get(list_fn, limit=1)
            if answer is not None:      # a kind the cluster does not serve (resource.k8s.io before 1.34) is skipped
                self.marks.append((what, cluster_scoped, list_fn, json.loads(answer.data)["metadata"]["resourceVersion"]))

    @staticmethod
    def _get(list_fn, **query):
        from kubernetes.client.rest import ApiException

        try:
            return list_fn(_preload_content=False, **query)
        except ApiException as err:
            if err.status == 404:
                return None
            raise

    def _events(self, mark):
        what, cluster_scoped, list_fn, version = mark
        answer = self._get(list_fn, watch=True, resource_version=version, timeout_seconds=1)
        found = []
        for line in answer.data.decode("utf-8").splitlines():
            if not line.strip():
                continue
            event = json.loads(line)
            if event["type"] == "ERROR":
                raise AssertionError("watch of %s from %s ended with %s" % (what, version, event["object"]))
            if event["type"] == "BOOKMARK":
                continue
            name = event["object"]["metadata"]["name"]
            if what == "nodes" and event["type"] == "MODIFIED" and name in self.nodes \
                    and self._node_view(event["object"]) == self.nodes[name]:
                continue
            if (what.rsplit("/", 1)[-1], name) in CONTROLLER_OBJECTS:
                continue
            if not cluster_scoped or name in self.names:
                found.append((event["type"], "%s/%s" % (what, name)))
        return found

    @staticmethod
    def _node_view(node):
        """What the collection writes on a node: labels, annotations, status capacity and allocatable, cordon.
        Annotations kube-controller-manager keeps on every node (CONTROLLER_ANNOTATIONS) are not the collection's:
        the TTL controller adds its own to a new node whenever its queue gets to it, seconds later under load."""
        meta, status = node.get("metadata") or {}, node.get("status") or {}
        annotations = dict((key, value) for key, value in (meta.get("annotations") or {}).items()
                           if key not in CONTROLLER_ANNOTATIONS)
        return (meta.get("labels") or {}, annotations, status.get("capacity") or {},
                status.get("allocatable") or {}, bool((node.get("spec") or {}).get("unschedulable")))

    def writes(self):
        import concurrent.futures

        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(self.marks))) as pool:
            return [event for events in pool.map(self._events, self.marks) for event in events]
