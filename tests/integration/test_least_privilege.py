# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The shipped least-privilege identity (playbooks/templates/rbac.yaml.j2) cannot change what it does not own.

As the identity (a TokenRequest token of the template's ServiceAccount, bound only to the rendered objects)
the test tries to change DaemonSets and ConfigMaps the administrator made in kube-system, in default and in
the identity's own plugin and DRA-driver namespaces, and gets 403 each time; the objects the inventory
declares (here one DaemonSet and its <name>-config ConfigMap) it creates, changes and deletes. Plain API
calls, no playbook run, so it is quick; on a real cluster it brings and removes everything it uses.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest

from tests.integration.conftest import own_rbac_names, rbac_identity_kubeconfig
from tests.support.node_configs import NO_NODES

# namespaced objects of the identity's own and of others: no node of the stand-in is needed
pytestmark = pytest.mark.node_config(NO_NODES)

# a JSON patch, which every client sends with the same content type
TOUCH = [{"op": "add", "path": "/metadata/annotations", "value": {"kubehw.example.com/touched": "yes"}}]


def daemonset(name):
    # selects no node, so nothing runs on a real cluster
    labels = {"app.kubernetes.io/name": name}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "labels": labels},
            "spec": {"selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": labels},
                "spec": {"nodeSelector": {"kubehw.example.com/no-such-node": "true"},
                         "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]}}}}


def configmap(name):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"owner": "someone else"}}


class Api:
    """The calls the test makes on one kind, through one identity's client."""

    def __init__(self, api_client, kind):
        from kubernetes import client

        apps, core = client.AppsV1Api(api_client), client.CoreV1Api(api_client)
        self.kind = kind
        if kind == "daemonsets":
            self.create, self.read = apps.create_namespaced_daemon_set, apps.read_namespaced_daemon_set
            self.patch, self.replace = apps.patch_namespaced_daemon_set, apps.replace_namespaced_daemon_set
            self.delete = apps.delete_namespaced_daemon_set
        else:
            self.create, self.read = core.create_namespaced_config_map, core.read_namespaced_config_map
            self.patch, self.replace = core.patch_namespaced_config_map, core.replace_namespaced_config_map
            self.delete = core.delete_namespaced_config_map

    def body(self, name):
        return daemonset(name) if self.kind == "daemonsets" else configmap(name)


def replace_as(api, name, namespace, attempts=5):
    """Replace the object with what the identity reads back (an update needs its own "get").

    The DaemonSet controller writes the status of a new DaemonSet, which moves its resourceVersion: an
    update of what was read a moment ago may get 409 Conflict, so read again and retry, as any client of
    optimistic concurrency does. Returns the last status code."""
    code = None
    for _attempt in range(attempts):
        code, current = status_of(api.read, name, namespace)
        assert code == 200, current
        code, replaced = status_of(api.replace, name, namespace, current)
        if code != 409:
            assert code == 200, replaced
            return code
    return code


def status_of(fn, *args):
    from kubernetes.client.rest import ApiException

    try:
        resp = fn(*args, _preload_content=False)
        return resp.status, json.loads(resp.data or b"{}")
    except ApiException as err:
        return err.status, json.loads(err.body or b"{}")


def test_identity_changes_its_own_plugin_objects_and_nothing_else(cluster):
    from kubernetes import config

    own = cluster.unique_name("own-plugin")
    names = own_rbac_names(cluster, kubehw_rbac_plugin_daemonsets=[own], kubehw_rbac_dra_presets=["example"])
    kubeconfig = rbac_identity_kubeconfig(cluster, "least-privilege.kubeconfig", **names)
    identity = config.new_client_from_config(config_file=kubeconfig)
    cluster.on_close("close the identity's client", identity.close)
    user = "system:serviceaccount:%s:automation" % names["kubehw_rbac_namespace"]
    plugin_ns, dra_ns = names["kubehw_rbac_plugin_namespace"], names["kubehw_rbac_dra_namespace"]

    # the administrator's objects, in the namespaces anyone fears for and in the identity's own ones
    foreign = []
    for namespace in ("kube-system", "default", plugin_ns, dra_ns):
        name = cluster.unique_name("foreign")
        for kind in ("daemonsets", "configmaps"):
            admin = Api(cluster.api_client, kind)
            # a ConfigMap named like a plugin's (<DaemonSet>-config) that the inventory does not declare
            obj_name = name if kind == "daemonsets" else name + "-config"
            code, body = status_of(admin.create, namespace, admin.body(obj_name))
            assert code == 201, body
            cluster.on_close("delete %s %s/%s" % (kind, namespace, obj_name),
                             lambda a=admin, n=obj_name, ns=namespace: a.delete(n, ns, _preload_content=False))
            foreign.append((kind, namespace, obj_name, body))

    refused = []
    for kind, namespace, name, stored in foreign:
        api = Api(identity, kind)
        attempts = [("patch", api.patch, (name, namespace, TOUCH)),
                    ("update", api.replace, (name, namespace, stored)),
                    ("delete", api.delete, (name, namespace))]
        if kind == "configmaps" or namespace in ("kube-system", "default"):
            attempts.append(("get", api.read, (name, namespace)))     # ConfigMaps are read by name only
        if namespace in ("kube-system", "default"):
            attempts.append(("create", api.create, (namespace, api.body(cluster.unique_name("new")))))
        for verb, fn, args in attempts:
            code, body = status_of(fn, *args)
            assert code == 403 and body.get("reason") == "Forbidden", (verb, kind, namespace, name, code, body)
            assert 'User "%s" cannot %s resource "%s"' % (user, verb, kind) in body["message"], body["message"]
            refused.append((verb, kind, namespace))
    assert len(refused) == 4 * 2 * 3 + (4 + 2) + 2 * 2, refused

    # nothing changed behind the 403s
    for kind, namespace, name, stored in foreign:
        code, live = status_of(Api(cluster.api_client, kind).read, name, namespace)
        # (the DaemonSet controller writes a DaemonSet's status, so its resourceVersion moves: compare the rest)
        assert code == 200 and "kubehw.example.com/touched" not in (live["metadata"].get("annotations") or {}), live
        assert live["metadata"].get("generation") == stored["metadata"].get("generation"), live
        assert live.get("spec") == stored.get("spec") and live.get("data") == stored.get("data"), live

    # what the inventory declares, the identity may create, change and delete
    for kind, name in (("daemonsets", own), ("configmaps", own + "-config")):
        api = Api(identity, kind)
        code, created = status_of(api.create, plugin_ns, api.body(name))
        assert code == 201, created
        code, patched = status_of(api.patch, name, plugin_ns, TOUCH)
        assert code == 200 and patched["metadata"]["annotations"]["kubehw.example.com/touched"] == "yes", patched
        assert replace_as(api, name, plugin_ns) == 200
        code, body = status_of(api.delete, name, plugin_ns)
        assert code == 200, body
    # and the example DRA driver's DaemonSet (its only name there), not another one
    api = Api(identity, "daemonsets")
    driver = "dra-example-driver-kubeletplugin"
    code, body = status_of(api.create, dra_ns, daemonset(driver))
    assert code == 201, body
    cluster.on_close("delete DaemonSet %s/%s" % (dra_ns, driver),
                     lambda: cluster.apps.delete_namespaced_daemon_set(driver, dra_ns, _preload_content=False))
    assert status_of(api.patch, driver, dra_ns, TOUCH)[0] == 200
    assert status_of(api.delete, driver, dra_ns)[0] == 200
