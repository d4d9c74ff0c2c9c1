# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a test left on a real control plane, removed after it: each test then starts on the cluster as the one
before it found it, as each test on the suite's own control plane starts on a fresh one.

    before = Snapshot(api_client)          # the uids of every object of the kinds below
    ...                                    # the test
    before.remove_newer(timeout=60)        # delete what was created since, wait until its namespaces are gone

Only objects created after the snapshot are deleted (by uid), so a cluster's own objects are never touched; nor are
ServiceAccounts in kube-system, where the controller manager makes one for each of its controllers during its first
seconds and then uses their tokens (on v1.36.2, 15 of them when the apiserver answers ready and 32 four seconds later):
a test on a control plane that has just started must not take them for its own.
Namespaces of a fixed name (a module's default namespace, a test's constant) are waited for: the namespace
controller takes about 5 s to empty one, and a later test that creates one of the same name would otherwise find it
terminating. A name unique to one test (``kubehw-it-<run id>-<what>-<serial>``, ``dp-<8 random hex digits>``) never
comes back, so its namespace is left to go on its own, which saves those 5 s on most tests.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re
import time
import urllib.parse

# a namespace name that no later test uses again: the suite's run-unique prefix (a serial number follows), or the
# eight random hexadecimal digits a test's own namespace fixture ends it with ("dp-1a2b3c4d"); a module-wide
# random part (six digits, "kubehw-hostile-d3c8e1") is shared by the module's tests, so it is waited for
ONE_OFF_NAME = re.compile(r"^kubehw-it-[0-9a-f]{6}-|-[0-9a-f]{8}$")

# (group, version, plural, namespaced); DaemonSets first, so that no controller makes new pods while the rest goes
KINDS = (
    ("apps", "v1", "daemonsets", True),
    ("", "v1", "namespaces", False),
    ("", "v1", "pods", True),
    ("", "v1", "configmaps", True),
    ("", "v1", "serviceaccounts", True),
    ("", "v1", "resourcequotas", True),
    ("rbac.authorization.k8s.io", "v1", "roles", True),
    ("rbac.authorization.k8s.io", "v1", "rolebindings", True),
    ("rbac.authorization.k8s.io", "v1", "clusterroles", False),
    ("rbac.authorization.k8s.io", "v1", "clusterrolebindings", False),
    ("node.k8s.io", "v1", "runtimeclasses", False),
    ("resource.k8s.io", "v1", "deviceclasses", False),
    ("resource.k8s.io", "v1", "resourceclaims", True),
    ("resource.k8s.io", "v1", "resourceclaimtemplates", True),
    ("scheduling.k8s.io", "v1", "priorityclasses", False),
)


def _path(group, version, plural, namespace=None, name=None):
    base = "/api/%s" % version if not group else "/apis/%s/%s" % (group, version)
    if namespace:
        base += "/namespaces/%s" % namespace
    base += "/" + plural
    return base + ("/" + name if name else "")


class Snapshot:
    def __init__(self, api_client):
        self.api_client = api_client
        self.uids = set()
        for kind in KINDS:
            for obj in self._list(kind):
                self.uids.add(obj["metadata"]["uid"])

    def _request(self, method, path, query=None):
        """The answer's JSON, or None on 404/409 (gone already, or being deleted)."""
        # the client's own TLS pool and credentials, by the calls every supported client version has (24 to 37: the
        # make min-versions stage runs this with the oldest)
        config = self.api_client.configuration
        headers = {"Accept": "application/json"}
        bearer = (config.auth_settings().get("BearerToken") or {}).get("value")
        if bearer:
            headers["Authorization"] = bearer
        url = config.host + path + ("?" + urllib.parse.urlencode(query) if query else "")
        answer = self.api_client.rest_client.pool_manager.request(method, url, headers=headers)
        if answer.status in (404, 409):
            return None
        if answer.status >= 400:
            raise RuntimeError("%s %s answered %s: %s" % (method, path, answer.status, answer.data[:300]))
        return json.loads(answer.data) if answer.data else None

    def _list(self, kind):
        group, version, plural, _namespaced = kind
        found = self._request("GET", _path(group, version, plural))
        return (found or {}).get("items") or []

    def newer(self):
        """[(kind, object)] created since the snapshot, in KINDS order (the controller manager's ServiceAccounts left
        out)."""
        return [(kind, obj) for kind in KINDS for obj in self._list(kind) if obj["metadata"]["uid"] not in self.uids
                and not (kind[2] == "serviceaccounts" and obj["metadata"].get("namespace") == "kube-system")]

    def remove_newer(self, timeout=60):
        """Delete what was created since the snapshot; wait (up to timeout) until its namespaces of a fixed name are
        gone. Returns the names of those still there when the time ran out."""
        namespaces, deleted = [], set()
        for kind, obj in self.newer():
            group, version, plural, namespaced = kind
            meta = obj["metadata"]
            if plural == "namespaces":
                deleted.add(meta["name"])
                if not ONE_OFF_NAME.search(meta["name"]):
                    namespaces.append(meta["name"])
            elif namespaced and meta.get("namespace") in deleted:
                continue    # goes with its namespace
            query = {"gracePeriodSeconds": "0"} if plural == "pods" else None
            self._request("DELETE", _path(group, version, plural, meta.get("namespace") if namespaced else None,
                                          meta["name"]), query=query)
        deadline = time.monotonic() + timeout
        while namespaces and time.monotonic() < deadline:
            namespaces = [ns for ns in namespaces if self._request("GET", _path("", "v1", "namespaces", None, ns))]
            if namespaces:
                time.sleep(0.25)
        return namespaces
