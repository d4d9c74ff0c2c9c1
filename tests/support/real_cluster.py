# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The test controls of a real control plane of the suite's own (``cluster.controls``).

Tests steer the cluster through a few calls (``cluster.controls.inject_fault(...)``, ``.requests``,
``.fail_pod_start(node)``, ...), served by the two pieces of test equipment that stand between the tests and the
apiserver: the fault proxy (faults, the request log, compaction; every request of the test and of the modules goes
through it) and the kubelet stand-in (pod start failures, unreachable nodes, what devices a node has).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json


class RealControls:
    def __init__(self, proxy, standin):
        self.proxy = proxy
        self.standin = standin
        self.url = proxy.url
        self.ca_cert_path = proxy.ca_cert_path

    # the fault proxy
    @property
    def requests(self):
        """The proxy's request log: the body as the text that was sent, the user as the name the apiserver
        authenticated (None for a request it did not)."""
        entries = self.proxy.usernames(self.proxy.requests)
        for entry in entries:
            entry["user"] = entry.pop("username")
            if entry["body"] is not None and not isinstance(entry["body"], (str, bytes)):
                entry["body"] = json.dumps(entry["body"])
        return entries

    def clear_requests(self):
        self.proxy.clear_requests()

    def inject_fault(self, method, path_regex, status=500, count=1, retry_after=None):
        self.proxy.inject_fault(method, path_regex, status=status, count=count, retry_after=retry_after)

    def inject_answer(self, method, path_regex, code, body, count=1):
        self.proxy.inject_answer(method, path_regex, code, body, count=count)

    def clear_faults(self):
        self.proxy.clear_faults()

    @property
    def faults(self):
        return self.proxy.faults

    @property
    def open_watches(self):
        """The watches the proxy relays now, with the resource each watches (the last segment of its path)."""
        return [dict(w, resource=w["path"].rstrip("/").rsplit("/", 1)[-1]) for w in self.proxy.open_watches]

    def compact(self, expire_watches=False):
        self.proxy.compact(expire_watches=expire_watches)

    # the kubelet stand-in
    def fail_pod_start(self, node, reason="ImagePullBackOff"):
        self.standin.fail_pod_start(node, reason)

    def allow_pod_start(self, node):
        self.standin.allow_pod_start(node)

    def set_node_unreachable(self, name, unreachable=True):
        self.standin.set_node_unreachable(name, unreachable)

    def set_inventory(self, node, key, count):
        self.standin.set_inventory(node, key, count)
