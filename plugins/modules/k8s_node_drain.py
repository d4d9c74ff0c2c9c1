#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: k8s_node_drain
short_description: Cordon and drain a Kubernetes node through the Eviction API, or uncordon it
version_added: 1.0.0
description:
  - With O(state=drained), marks the node unschedulable (C(spec.unschedulable=true), what C(kubectl cordon)
    does), then evicts its pods through the Eviction API (C(POST .../pods/<name>/eviction)), so every
    PodDisruptionBudget is respected, and waits until the evicted pods are gone.
  - An eviction that a PodDisruptionBudget forbids answers C(429 TooManyRequests); it is retried (1 s, then
    doubling up to 5 s, as C(kubectl drain) waits 5 s) until O(timeout). On timeout the task fails naming each
    pod still there and the budget's message; the node stays cordoned.
  - An eviction whose answer is lost after it was sent (a 5xx such as 504, a reset connection, a read timeout) may
    have evicted the pod, so it is not sent again blindly. The pod is read back; gone, replaced by a new pod of the
    same name, or terminating counts as evicted (with a warning), and only a pod still running is evicted again.
    An eviction that never reached the server (connection refused) is sent again.
  - DaemonSet pods are left alone (the DaemonSet controller tolerates the cordon and would recreate them), and
    so are mirror pods (static pods of the kubelet, which the API cannot delete). Pods that already finished
    are deleted through the same eviction call, which the apiserver answers without a budget check.
  - Pods without a controller would be gone for good after an eviction. The task refuses to drain a node that
    runs one, naming it, before any write, unless O(force=true).
  - With O(state=uncordoned), waits until the node reports C(Ready=True) (after a reboot, for example;
    O(wait_ready=false) skips that), then clears C(spec.unschedulable).
  - The cordon carries the annotation C(kubehw.devices/cordoned) (the time it was made), removed again by
    O(state=uncordoned). A node cordoned before the task without it is someone else's cordon (RV(cordoned) true,
    RV(own_cordon) false); one with it was cordoned by an earlier drain that stopped (a budget that refused, a host
    that did not come back), which a resumed rollout makes schedulable again once it is done. The annotation also
    says on the node since when it has been held back.
  - A second run with the same input sends no write (the node is already cordoned and holds no pod to evict, or
    is already schedulable).
author:
  - kubehw.devices contributors (@kubehw)
extends_documentation_fragment:
  - kubehw.devices.k8s_auth_options
  - kubehw.devices.attributes.action_group
  - kubehw.devices.attributes
attributes:
  check_mode:
    support: full
    details: Reads the node and its pods and reports the cordon and the pods it would evict, and which of those
      evictions the apiserver refuses now (RV(blocked), through server-side dry-run evictions, which change
      nothing); cordons and evicts nothing.
  diff_mode:
    support: full
    details: The node's C(unschedulable) flag and the pods to evict, before and after.
  idempotent:
    support: full
options:
  name:
    description:
      - Name of the node (a lowercase DNS subdomain). An empty or blank name is refused before any request.
    type: str
    required: true
  state:
    description:
      - V(drained) cordons the node and evicts its pods; V(uncordoned) makes it schedulable again.
    type: str
    choices: [drained, uncordoned]
    default: drained
  timeout:
    description:
      - Seconds the whole task may take. V(drained) - evictions (including retries of those a
        PodDisruptionBudget refuses) and the wait until the evicted pods are gone. V(uncordoned) - the wait for
        C(Ready=True).
    type: int
    default: 300
  force:
    description:
      - Also evict pods that no controller manages (no C(ownerReferences) entry with C(controller=true)). Nothing
        recreates them.
    type: bool
    default: false
  wait_ready:
    description:
      - With O(state=uncordoned), wait until the node reports C(Ready=True) before making it schedulable.
    type: bool
    default: true
  only_own_cordon:
    description:
      - With O(state=uncordoned), lift only a cordon this module made (the node carries C(kubehw.devices/cordoned)).
        A node cordoned otherwise stays cordoned; the task reports RV(cordoned=true) and RV(own_cordon=false) and
        changes nothing. A node with nothing of this module's to lift is not waited for.
      - A rollout that resumes after a stop uses it to undo its own leftover cordon, in one call, and keep an
        administrator's.
    type: bool
    default: false
    version_added: 1.1.0
  allow_missing:
    description:
      - A node that does not exist (a host not joined to the cluster yet) is not an error; the task reports
        RV(exists=false) and changes nothing. Without it such a task fails naming the node.
    type: bool
    default: false
notes:
  - The identity needs C(get) and C(patch) on C(nodes), C(list) on C(pods) (all namespaces) and C(create) on
    C(pods/eviction) (all namespaces; in check mode too, for its dry-run evictions). C(playbooks/templates/rbac.yaml.j2) grants them with
    C(kubehw_rbac_drain=true).
  - Pods using C(emptyDir) volumes lose that data, as with C(kubectl drain --delete-emptydir-data).
  - The eviction is sent as C(policy/v1) C(Eviction) (Kubernetes 1.22 and later).
seealso:
  - name: Safely Drain a Node
    description: Cordon, eviction and PodDisruptionBudgets, as the Kubernetes documentation explains them.
    link: https://kubernetes.io/docs/tasks/administer-cluster/safely-drain-node/
  - name: API-initiated eviction
    description: What the Eviction API answers (429 while a budget forbids the eviction).
    link: https://kubernetes.io/docs/concepts/scheduling-eviction/api-eviction/
  - module: kubehw.devices.k8s_node_extended_resource
"""

EXAMPLES = r"""
- name: Drain the GPU node before its driver update reboots it
  kubehw.devices.k8s_node_drain:
    name: gpu-a
    timeout: 600
  delegate_to: localhost
  become: false

- name: Make it schedulable again once it is Ready
  kubehw.devices.k8s_node_drain:
    name: gpu-a
    state: uncordoned
  delegate_to: localhost
  become: false
"""

RETURN = r"""
changed:
  description: Whether a write was made (or, in check mode, would be made).
  returned: always
  type: bool
node:
  description: Name of the node.
  returned: always
  type: str
  sample: gpu-a
exists:
  description: Whether the node exists (false only with O(allow_missing=true)).
  returned: always
  type: bool
cordoned:
  description: Whether the node was cordoned before the task ran.
  returned: always
  type: bool
own_cordon:
  description:
    - Whether that cordon is one this module made (the node carries C(kubehw.devices/cordoned)), so a rollout that
      stopped after it may lift it; false for a node cordoned otherwise, or not cordoned.
  returned: always
  type: bool
  version_added: 1.1.0
evicted:
  description: Pods evicted by this task (in check mode, that would be), as C(namespace/name).
  returned: always
  type: list
  elements: str
  sample: ["default/web-6d4b75cb6d-x8kq2"]
blocked:
  description:
    - In check mode, the pods of RV(evicted) whose eviction the apiserver refuses now, with its message (which names
      the PodDisruptionBudget). Each eviction is sent once as a server-side dry run (C(dryRun=All)), which runs the
      checks of a real eviction and changes nothing. A real drain waits for such a pod until O(timeout).
    - Each pod is judged alone, against the budget as it is now; pods of one budget that it allows one at a time are
      not listed, and the real drain evicts them one after the other as their replacements become ready.
    - Empty outside check mode.
  returned: always
  type: list
  elements: dict
  sample: [{"pod": "default/db-0", "message": "Cannot evict pod as it would violate the pod's disruption budget.
           The disruption budget db needs 1 healthy pods and has 1 currently"}]
left_on_node:
  description: Pods left on the node, as C(namespace/name) with the reason (V(DaemonSet) or V(mirror pod)).
  returned: always
  type: list
  elements: dict
  sample: [{"pod": "kube-system/nvidia-device-plugin-daemonset-7xk2p", "reason": "DaemonSet"}]
"""

import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.kubehw.devices.plugins.module_utils import _kubernetes_library
from ansible_collections.kubehw.devices.plugins.module_utils._client import KubeClient, _never_sent
from ansible_collections.kubehw.devices.plugins.module_utils._connection import (
    AUTH_ARG_SPEC,
    protect_kubeconfig_secrets,
    timeout_problem,
)
from ansible_collections.kubehw.devices.plugins.module_utils._errors import (
    KubeHwError,
    TaskFailed,
    WaitTimedOut,
    error_from_api_exception,
    timed_out,
)
from ansible_collections.kubehw.devices.plugins.module_utils._waiting import Deadline
from ansible_collections.kubehw.devices.plugins.module_utils._k8s_names import DNS1123_SUBDOMAIN_RE
from ansible_collections.kubehw.devices.plugins.module_utils._k8s_objects import condition
from ansible_collections.kubehw.devices.plugins.module_utils._rest_api import MERGE_PATCH

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
# Set with the cordon this module makes (its value: when), removed with the uncordon: a cordon of ours, not someone
# else's, when a stopped rollout runs again.
CORDON_ANNOTATION = "kubehw.devices/cordoned"
# kubectl drain waits 5 s between eviction attempts a budget refused (k8s.io/kubectl/pkg/drain, v0.32).
RETRY_MAX_DELAY = 5.0
FIRST_RETRY_DELAY = 1.0


def _pod_key(pod):
    meta = pod.get("metadata") or {}
    return "%s/%s" % (meta.get("namespace"), meta.get("name"))


def _controller(pod):
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref
    return None


def _ready(node):
    return (condition(node, "Ready") or {}).get("status") == "True"


def _own_cordon(node):
    """Whether the node carries the annotation of a cordon this module made."""
    annotations = (node.get("metadata") or {}).get("annotations")
    return isinstance(annotations, dict) and CORDON_ANNOTATION in annotations


def _status_message(err):
    """The apiserver's message and its first cause (the budget's own words), for a failure report."""
    body = err.body or {}
    causes = (body.get("details") or {}).get("causes") or []
    text = body.get("message") or err.msg
    if causes and causes[0].get("message"):
        text = "%s %s" % (text, causes[0]["message"])
    return text


def _eviction(pod, dry_run=False):
    """The policy/v1 Eviction of a pod (a server-side dry run with dry_run)."""
    meta = pod["metadata"]
    body = {"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"]}}
    if dry_run:
        body["deleteOptions"] = {"dryRun": ["All"]}
    return body


class NodeDrain(object):
    def __init__(self, module, client, sleep=time.sleep):
        self.module = module
        self.client = client
        self.params = module.params
        self.name = module.params["name"]
        self.sleep = sleep
        self.deadline = Deadline(module.params["timeout"])
        self.result = dict(changed=False, node=self.name, exists=True, cordoned=False, own_cordon=False, evicted=[],
                           left_on_node=[], blocked=[])
        self.diff = None

    # -- reads
    def read_node(self):
        """The node, or None when it does not exist and allow_missing is set."""
        try:
            return self.client.call_json(self.client.core.read_node, self.name, what='read node "%s"' % self.name)
        except KubeHwError as err:
            if err.status != 404 or not self.params["allow_missing"]:
                raise
        self.result["exists"] = False
        return None

    def node_pods(self):
        listing = self.client.call_json(
            self.client.core.list_pod_for_all_namespaces, field_selector="spec.nodeName=%s" % self.name,
            what='list the pods of node "%s"' % self.name)
        return listing.get("items") or []

    def set_unschedulable(self, value):
        """Cordon, with the annotation saying when, or uncordon, the flag and the annotation removed. A merge patch of
        those two keys: the node's other annotations (the kubelet's, other tools') stay, never replaced, even when one
        is added between the read and this write."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()) if value else None
        body = {"spec": {"unschedulable": True if value else None},
                "metadata": {"annotations": {CORDON_ANNOTATION: stamp}}}
        self.client.call_json(self.client.core.patch_node, self.name, body, _content_type=MERGE_PATCH,
                              what='%s node "%s"' % ("cordon" if value else "uncordon", self.name))

    # -- drained
    def classify(self, pods):
        evict, unmanaged = [], []
        for pod in sorted(pods, key=_pod_key):
            meta = pod.get("metadata") or {}
            if (meta.get("annotations") or {}).get(MIRROR_ANNOTATION):
                self.result["left_on_node"].append(dict(pod=_pod_key(pod), reason="mirror pod"))
                continue
            ref = _controller(pod)
            if ref is not None and ref.get("kind") == "DaemonSet":
                self.result["left_on_node"].append(dict(pod=_pod_key(pod), reason="DaemonSet"))
                continue
            if ref is None:
                unmanaged.append(pod)
            evict.append(pod)
        return evict, unmanaged

    def evict(self, pod):
        """POST the eviction until it is done; False when the pod was gone already.

        A budget's refusal (429, the API's "retry later") is retried until the deadline, as is a request that
        certainly never reached the server (connection refused). An answer lost after the request was sent
        (5xx, reset, read timeout) may hide an eviction that happened, so the pod is read back first: gone,
        replaced by another pod of that name, or terminating means evicted; only a pod still running is
        evicted again.
        """
        meta = pod["metadata"]
        body = _eviction(pod)
        what = 'evict pod "%s" from node "%s"' % (_pod_key(pod), self.name)
        delay = FIRST_RETRY_DELAY
        while True:
            lost_answer = False
            try:
                # Not through client.call: its own retries would spend the whole timeout on one pod's 429s,
                # and would send an eviction again after a lost answer without looking first. The answer is read
                # whole (not streamed): only then does its connection serve the next eviction, instead of each
                # eviction opening a TLS connection of its own.
                self.client.core.create_namespaced_pod_eviction(
                    meta["name"], meta["namespace"], body, _request_timeout=self.client.timeouts())
                return True
            # the library was imported with the client (KubeClient), before this module sends anything
            except _kubernetes_library.ApiException as exc:
                err = error_from_api_exception(exc, what)
                if err.status == 404:
                    return False
                if err.status != 429 and (err.status is None or err.status < 500):
                    raise err
                lost_answer = err.status != 429
            except _kubernetes_library.CONNECTION_ERRORS as exc:
                err = KubeHwError("Failed to %s: connection to %s failed: %s"
                                  % (what, self.client.configuration.host, exc), reason="ConnectionError")
                lost_answer = not _never_sent(exc)
            if lost_answer:
                state = self.pod_state(pod)
                if state != "running":
                    cause = "%s %s" % (err.status, err.reason) if err.status else "the connection dropped"
                    self.module.warn('The answer to the eviction of pod "%s" was lost (%s); read back, the pod is %s: '
                                     "counted as evicted, not sent again." % (_pod_key(pod), cause, state))
                    return True
            if delay > self.deadline.left():
                refused = "was refused until the end" if err.status == 429 else "kept failing"
                raise TaskFailed(timed_out(
                    self.deadline.seconds, 'draining node "%s": the eviction of pod "%s" %s: %s '
                    "(the node stays cordoned; raise timeout, or change the PodDisruptionBudget)"
                    % (self.name, _pod_key(pod), refused, _status_message(err))))
            self.sleep(delay)
            delay = min(RETRY_MAX_DELAY, delay * 2)

    def refused_now(self, pods):
        """[{pod, message}] for the pods whose eviction the apiserver would refuse now (a PodDisruptionBudget that
        allows no disruption): each eviction sent once as a server-side dry run (dryRun=All), which runs every
        check of a real eviction and changes nothing. Each pod is judged alone: pods of one budget on this node
        that the budget allows one by one may still wait for each other in the real drain."""
        refused = []
        for pod in pods:
            meta = pod["metadata"]
            try:
                self.client.core.create_namespaced_pod_eviction(meta["name"], meta["namespace"],
                                                                _eviction(pod, dry_run=True), dry_run="All",
                                                                _request_timeout=self.client.timeouts())
            except _kubernetes_library.ApiException as exc:
                err = error_from_api_exception(exc, 'dry-run the eviction of pod "%s"' % _pod_key(pod))
                if err.status == 404:
                    continue
                if err.status != 429:
                    raise err
                refused.append(dict(pod=_pod_key(pod), message=_status_message(err)))
        return refused

    def pod_state(self, pod):
        """gone, terminating or running: the pod as the apiserver has it now (a read, retried as reads are)."""
        meta = pod["metadata"]
        try:
            live = self.client.call_json(self.client.core.read_namespaced_pod, meta["name"], meta["namespace"],
                                         what='read pod "%s" back after its eviction\'s answer was lost' % _pod_key(pod))
        except KubeHwError as err:
            if err.status == 404:
                return "gone"
            raise
        live_meta = live.get("metadata") or {}
        if meta.get("uid") and live_meta.get("uid") != meta.get("uid"):
            return "gone"   # a new pod of the same name (a StatefulSet's): the evicted one is gone
        return "terminating" if live_meta.get("deletionTimestamp") else "running"

    def wait_gone(self, uids):
        """Until none of the evicted pods (by uid: a StatefulSet's new pod of the same name is another) is on the node,
        by watching the node's pods, within the task's timeout."""
        def left(pods):
            return sorted(_pod_key(p) for p in pods.values() if (p.get("metadata") or {}).get("uid") in uids)

        try:
            self.client.watch(self.client.core.list_pod_for_all_namespaces, lambda pods: not left(pods),
                              timeout=max(1, self.deadline.left()),
                              what='see the evicted pods of node "%s" go' % self.name,
                              field_selector="spec.nodeName=%s" % self.name)
        except WaitTimedOut as err:
            raise TaskFailed(timed_out(self.deadline.seconds, 'waiting for the evicted pods of node "%s" to go: %s'
                                       % (self.name, ", ".join(left(err.objects or {})))))

    def drain(self):
        node = self.read_node()
        if node is None:
            return
        cordoned = bool((node.get("spec") or {}).get("unschedulable"))
        self.result["cordoned"] = cordoned
        self.result["own_cordon"] = cordoned and _own_cordon(node)
        evict, unmanaged = self.classify(self.node_pods())
        if unmanaged and not self.params["force"]:
            raise TaskFailed(
                'Node "%s" runs pods that no controller manages, which an eviction would delete for good: %s. '
                "Move them, or set force: true to evict them anyway. Nothing was changed."
                % (self.name, ", ".join(_pod_key(p) for p in unmanaged)))
        names = [_pod_key(p) for p in evict]
        self.result["changed"] = not cordoned or bool(evict)
        self.diff = dict(before=dict(unschedulable=cordoned, pods=names), after=dict(unschedulable=True, pods=[]))
        if self.module.check_mode:
            self.result["evicted"] = names
            self.result["blocked"] = self.refused_now(evict)
            return
        if not cordoned:
            self.set_unschedulable(True)
        uids = set()
        for pod in evict:
            if self.evict(pod):
                self.result["evicted"].append(_pod_key(pod))
                uids.add(pod["metadata"].get("uid"))
        if uids:
            self.wait_gone(uids)

    # -- uncordoned
    def read_cordon(self, node):
        """Whether the node is cordoned and whether the cordon is ours (recorded in the result); the latter also for
        our annotation left on a node someone uncordoned by hand, which the uncordon removes."""
        cordoned = bool((node.get("spec") or {}).get("unschedulable"))
        marked = _own_cordon(node)
        self.result["cordoned"] = cordoned
        self.result["own_cordon"] = cordoned and marked
        return cordoned, marked

    def uncordon(self):
        node = self.read_node()
        if node is None:
            return
        cordoned, marked = self.read_cordon(node)
        if self.params["only_own_cordon"] and not marked:
            return
        if self.params["wait_ready"] and not _ready(node):
            try:
                found = self.client.watch(
                    self.client.core.list_node, lambda objs: self.name in objs and _ready(objs[self.name]),
                    timeout=max(1, self.deadline.left()),
                    what='wait for node "%s" to be Ready' % self.name,
                    field_selector="metadata.name=%s" % self.name)
                node = found[self.name]
            except WaitTimedOut:
                raise TaskFailed('Node "%s" did not report Ready=True within %ss; it stays cordoned.'
                                 % (self.name, self.params["timeout"]))
            # the node as it is now: a cordon someone made meanwhile is seen before anything is lifted
            cordoned, marked = self.read_cordon(node)
            if self.params["only_own_cordon"] and not marked:
                return
        self.result["changed"] = cordoned or marked
        self.diff = dict(before=dict(unschedulable=cordoned), after=dict(unschedulable=False))
        if (cordoned or marked) and not self.module.check_mode:
            self.set_unschedulable(False)


def argument_spec():
    spec = dict(
        name=dict(type="str", required=True),
        state=dict(type="str", default="drained", choices=["drained", "uncordoned"]),
        timeout=dict(type="int", default=300),
        force=dict(type="bool", default=False),
        wait_ready=dict(type="bool", default=True),
        only_own_cordon=dict(type="bool", default=False),
        allow_missing=dict(type="bool", default=False),
    )
    spec.update(AUTH_ARG_SPEC)
    return spec


def input_problem(params):
    name = params["name"]
    if not name or not name.strip():
        return "name must name a node; got an empty or blank value (an undefined inventory variable?)"
    if len(name) > 253 or not DNS1123_SUBDOMAIN_RE.match(name):
        return ("name %r is not a valid node name: a lowercase RFC 1123 subdomain (a-z, 0-9, '-' and '.', "
                "starting and ending alphanumeric, at most 253 characters)" % name)
    return timeout_problem("timeout", params["timeout"], zero_allowed=False) or None


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    protect_kubeconfig_secrets(module)  # before any failure can echo a kubeconfig dict
    problem = input_problem(module.params)
    if problem:
        module.fail_json(msg="Invalid input: %s" % problem, changed=False)
    task = None
    error = None
    try:
        task = NodeDrain(module, KubeClient(module))
        if module.params["state"] == "drained":
            task.drain()
        else:
            task.uncordon()
    except (KubeHwError, TaskFailed) as err:
        error = err
    result = dict(task.result) if task is not None else dict(changed=False)
    if task is not None and module._diff and task.diff and result["changed"]:
        result["diff"] = task.diff
    if error is not None:
        module.fail_json(msg=error.msg, status=getattr(error, "status", None),
                         reason=getattr(error, "reason", None), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
