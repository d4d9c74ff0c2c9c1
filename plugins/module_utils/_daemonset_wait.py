# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout wait device_plugin_deploy and dra_driver_deploy share, and the per-node outcome both report.

A rollout is finished when the DaemonSet controller reports every pod updated and available *and* no node the
template selects is still joining (registered but not Ready yet, or still tainted not-ready), so a pool that is
half provisioned is waited for, within wait_timeout, instead of reported done without its new nodes.

It watches: the DaemonSet through one list and then its watch; the nodes, only once they matter (the rollout
looks finished, or it failed), through one list and then their watch. Each later look goes on from the
resourceVersion the previous one reached, so a 5,000-node cluster is listed at most twice per task (by the guard
before the write, and when the rollout first looks finished, so nodes that registered meanwhile are covered), not
once per slice.

A refusal by the DaemonSet controller (FailedCreate: Pod Security, a quota, a missing RuntimeClass, an admission
webhook) fails the wait once it persists: the controller's FailedCreate events for the DaemonSet span
REFUSAL_PERSISTS seconds or more, the DaemonSet still lacks pods and none was created since. A transient one (a webhook timeout, a token the
controller renews) that the controller's next attempt gets past does not stop the rollout; one reported before
this run counts too, so a re-run that writes nothing names it at the first look.

Private to the collection. Every request goes through the module's KubeClient."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re
import time

from ansible_collections.kubehw.devices.plugins.module_utils import _daemonset_rollout as ds_rollout
from ansible_collections.kubehw.devices.plugins.module_utils._errors import KubeHwError, TaskFailed, WaitTimedOut, timed_out
from ansible_collections.kubehw.devices.plugins.module_utils._k8s_objects import condition

# How long one look at the DaemonSet waits for it to finish before the wait looks at the controller's refusals:
# 2 s for the first 30 s (a refusal shows at once), then 5 s (a long rollout looks less often).
SLICE = 2.0
SLICE_LATER = 5.0
SLOWDOWN_AFTER = 30.0
# FailedCreate events that span this many seconds are a refusal, not a hiccup. The controller retries a failed sync
# after 5 ms, doubling each time (failures 5.1 s and 10.2 s after the first), so a standing refusal crosses this ten
# seconds in.
REFUSAL_PERSISTS = 10
# A finished rollout whose desiredNumberScheduled stays below the nodes the template selects (and none of them
# is joining) is taken as the controller's word after this many seconds: its view of a node decides.
UNCOVERED_GRACE = 30.0

# A rolling update whose DaemonSet status has not changed for this many seconds is looked at for a spent budget.
STALL_SECONDS = 10.0

# node_outcome values
READY, OUTDATED, JOINING, NOT_READY, PENDING, REFUSED, MISSING_DEVICES = (
    "ready", "outdated", "joining", "not-ready", "pending", "refused", "missing-devices")


def lacks_pods(daemonset):
    """The controller has observed the template and some selected node has no pod of it."""
    state = ds_rollout.rollout_status(daemonset)
    if state["observed_generation"] < state["generation"] or state["desired"] == 0:
        return False
    return state["current"] < state["desired"] or state["updated"] < state["desired"]


def persistent_refusals(events, daemonset, pods, since=None):
    """The FailedCreate events of this DaemonSet, newest first, when together they make a refusal: reported over at
    least REFUSAL_PERSISTS seconds (the first event's first time to the newest one's last time: each refused pod has
    a name of its own in the message, so the controller's events are one per attempt until its recorder combines
    them), the newest at or after ``since`` (the apiserver time of this run's write, when it wrote) and not before
    the newest of ``pods`` (the DaemonSet's pods) was created. Otherwise []."""
    found = []
    for event in ds_rollout.creation_failures(events, daemonset):
        first = ds_rollout.timestamp_seconds(event.get("firstTimestamp") or event.get("eventTime"))
        last = ds_rollout.timestamp_seconds(event.get("lastTimestamp") or event.get("eventTime"))
        if first is not None and last is not None and not (since and last < ds_rollout.timestamp_seconds(since)):
            found.append((first, last, event))
    if not found:
        return []
    first, last = min(f for f, _l, _e in found), max(l for _f, l, _e in found)
    created = [ds_rollout.timestamp_seconds((p.get("metadata") or {}).get("creationTimestamp")) for p in pods or []]
    created = [c for c in created if c is not None]
    if last - first < REFUSAL_PERSISTS or (created and last < max(created)):
        return []
    return [e for _f, _l, e in sorted(found, key=lambda item: item[1], reverse=True)]


def refusal_text(events):
    """The newest refusal's message (without the recorder's "(combined from similar events): ") and how many."""
    message = events[0].get("message") or ""
    prefix = "(combined from similar events): "
    if message.startswith(prefix):
        message = message[len(prefix):]
    first = min((e.get("firstTimestamp") or e.get("eventTime") or "") for e in events)
    return "%s (%d such event(s) since %s)" % (message, sum(e.get("count") or 1 for e in events), first)


def rolling_budget(daemonset):
    """(pods, field) the rolling update may have in flight: maxSurge when above 0 (new pods start beside the old
    ones), else maxUnavailable (1 by default); a percentage of desiredNumberScheduled rounded up, as the controller
    does. None for OnDelete."""
    strategy = (daemonset.get("spec") or {}).get("updateStrategy") or {}
    if (strategy.get("type") or "RollingUpdate") != "RollingUpdate":
        return None
    rolling = strategy.get("rollingUpdate") or {}
    desired = ds_rollout.rollout_status(daemonset)["desired"]

    def count(value):
        text = "%s" % value
        if text.endswith("%"):
            return -(-desired * int(text[:-1]) // 100)
        return int(text)

    surge = count(rolling.get("maxSurge") or 0)
    if surge > 0:
        return surge, "maxSurge"
    unavailable = rolling.get("maxUnavailable")
    return max(1, count(1 if unavailable is None else unavailable)), "maxUnavailable"


def stalled_rollout(daemonset, pods, nodes, surge=False):
    """(nodes that are not Ready and hold the rolling update's budget, old-template pods left on Ready nodes), sorted.
    ``nodes``: {name: node}. Under maxUnavailable (surge False) every node that is not Ready and runs a pod of the
    DaemonSet holds it. Under maxSurge, as the DaemonSet controller counts it (pkg/controller/daemon/update.go),
    only a node that runs both a pod of the current template, not ready, and an old pod that is not being deleted:
    a node whose only pod is old or terminating gets its replacement without the budget."""
    generation = (daemonset.get("metadata") or {}).get("generation")
    down, old_on_ready, surged = set(), [], {}
    for pod in pods:
        node = ds_rollout.pod_node(pod)
        if node is None:
            continue
        deleting = bool((pod.get("metadata") or {}).get("deletionTimestamp"))
        old = ds_rollout.is_old_pod(pod, generation)
        if not ds_rollout.node_ready(nodes.get(node) or {}):
            down.add(node)
            if not deleting:
                held = surged.setdefault(node, {"old": False, "new_unready": False})
                if old:
                    held["old"] = True
                elif not ds_rollout.pod_ready(pod):
                    held["new_unready"] = True
        elif old and not deleting:
            old_on_ready.append(pod["metadata"]["name"])
    if surge:
        down = set(node for node, held in surged.items() if held["old"] and held["new_unready"])
    return sorted(down), sorted(old_on_ready)


def failure_hint(message, daemonset):
    """What to do about a refusal the DaemonSet controller reported, where the collection knows."""
    pod_spec = ((daemonset.get("spec") or {}).get("template") or {}).get("spec") or {}
    namespace = (daemonset.get("metadata") or {}).get("namespace")
    if "insufficient quota to match these scopes" in message and pod_spec.get("priorityClassName"):
        return (" Pods of priority class %s outside kube-system need a ResourceQuota in %s whose scopeSelector "
                "allows that class (the cluster's ResourceQuota admission limits it, as GKE's does): see "
                "docs/dra.md, \"Priority class outside kube-system\"." % (pod_spec["priorityClassName"], namespace))
    if "RuntimeClass" in message and pod_spec.get("runtimeClassName"):
        return (" Create RuntimeClass %s (the nvidia_container_toolkit role, or kubehw.devices.k8s_runtime_class), or "
                "set runtime_class_name: \"\"." % pod_spec["runtimeClassName"])
    if "violates PodSecurity" in message:
        return (" Label namespace %s pod-security.kubernetes.io/enforce=privileged (playbooks/rbac.yml does), as "
                "the upstream charts' namespaces are." % namespace)
    quota = re.search(r"exceeded quota: ([a-z0-9.-]{1,253})", message)
    if quota:
        return (" The ResourceQuota %s of namespace %s leaves no room for one more pod: raise it (kubectl describe "
                "resourcequota %s -n %s shows what it counts), or deploy into a namespace whose quota allows one pod "
                "per selected node." % (quota.group(1), namespace, quota.group(1), namespace))
    webhook = re.search(r'admission webhook "([^"]{1,253})" denied the request', message)
    if webhook:
        return (" The admission webhook %s refuses the pods for the reason above: change what it objects to (an "
                "option of this task), or have its owner exempt namespace %s." % (webhook.group(1), namespace))
    unreachable = re.search(r'failed calling webhook "([^"]{1,253})"', message)
    if unreachable:
        return (" The admission webhook %s did not answer and its failurePolicy refuses what it cannot check: "
                "bring its service back, or have its owner exempt namespace %s." % (unreachable.group(1), namespace))
    return ""


def pod_selector(daemonset):
    return ",".join("%s=%s" % kv for kv in sorted(daemonset["spec"]["selector"]["matchLabels"].items()))


def uncovered_nodes(daemonset, nodes, pods_of=None):
    """What a finished-looking rollout still lacks: ({joining node: why}, number of schedulable selected nodes beyond
    desiredNumberScheduled). A joining node is one the template selects, with no pod of the DaemonSet yet, whose
    kubelet is up but which is not Ready yet, or still carries a joining taint. Not waited for: a node whose kubelet
    stopped reporting (Ready Unknown), and a node that went down (its Ready condition turned after a pod of the
    DaemonSet was created there). ``pods_of(daemonset)``: the DaemonSet's pods, read only when some node looks
    joining. A node the wait's copy shows joining while its pod has just been created there stays joining until the
    copy catches up: the pod came after the node's last Ready change."""
    pod_spec = daemonset["spec"]["template"].get("spec")
    named = _by_name(nodes)
    joining = dict((name, why) for name, why in ds_rollout.joining_nodes(pod_spec, nodes).items()
                   if not _kubelet_silent(named.get(name)))
    if joining and pods_of is not None:
        pods = pods_of(daemonset)
        joining = dict((name, why) for name, why in joining.items() if not _went_down(named.get(name), pods))
    selected = ds_rollout.selected_nodes(pod_spec, nodes)
    extra = len(selected) - ds_rollout.rollout_status(daemonset)["desired"]
    return joining, max(0, extra)


def _went_down(node, pods):
    """The node is not Ready, and ran a pod of the DaemonSet before its Ready condition last changed."""
    ready = condition(node, "Ready")
    if not ready or ready.get("status") == "True":
        return False        # Ready again, or Ready with the joining taint not lifted yet: joining, not down
    changed = ds_rollout.timestamp_seconds(ready.get("lastTransitionTime"))
    if changed is None:
        return False
    name = ((node or {}).get("metadata") or {}).get("name")
    created = [ds_rollout.timestamp_seconds((p.get("metadata") or {}).get("creationTimestamp")) for p in pods
               if ds_rollout.pod_node(p) == name]
    created = [c for c in created if c is not None]
    return bool(created) and min(created) <= changed


def _by_name(nodes):
    return dict((n["metadata"]["name"], n) for n in nodes)


def all_joined(pod_spec, names):
    """A predicate over the nodes by name: every node of ``names`` has joined (Ready, no joining taint the pods do
    not tolerate) or is gone. Heartbeats, other nodes' changes and the first of several nodes to join do not make it
    true."""
    def joined(nodes_by_name):
        left = [nodes_by_name[name] for name in names if name in nodes_by_name]
        return not ds_rollout.joining_nodes(pod_spec, left)
    return joined


def _kubelet_silent(node):
    return (condition(node, "Ready") or {}).get("status") == "Unknown"


def node_outcome(daemonset, nodes, pods, joining=None, refused=False):
    """{node: outcome} for every node the template selects, joins, or runs a pod on: ready (a ready pod of the current
    template), outdated (a ready pod of an older template, OnDelete), joining, not-ready (a pod that is not ready, or
    a node that is not Ready, or stuck NotReady, or not Ready with a pod being deleted), refused (no pod, and the
    controller's refusal stands), pending (no pod yet)."""
    pod_spec = daemonset["spec"]["template"].get("spec")
    generation = (daemonset.get("metadata") or {}).get("generation")
    by_node, deleting_on = {}, set()
    for pod in sorted(pods or [], key=lambda p: (p.get("metadata") or {}).get("creationTimestamp") or ""):
        node = ds_rollout.pod_node(pod)
        if node and not (pod.get("metadata") or {}).get("deletionTimestamp"):
            by_node[node] = pod
        elif node:
            deleting_on.add(node)
    named = _by_name(nodes)
    joining = joining or {}
    # A node that is down keeps the pod the controller deleted there (its kubelet never confirms it), and its
    # not-ready taint takes it out of the selection: it runs nothing of the DaemonSet until it is back.
    down_with_deleted_pod = set(n for n in deleting_on if n in named and not ds_rollout.node_ready(named[n]))
    names = (set(ds_rollout.selected_nodes(pod_spec, nodes)) | set(joining) | set(by_node)
             | set(ds_rollout.stuck_nodes(pod_spec, nodes)) | down_with_deleted_pod)
    outcome = {}
    for name in names:
        pod = by_node.get(name)
        if name in joining and pod is None:
            outcome[name] = JOINING
        elif pod is not None and ds_rollout.pod_ready(pod):
            outcome[name] = OUTDATED if ds_rollout.is_old_pod(pod, generation) else READY
        elif pod is not None or not ds_rollout.node_ready(named.get(name) or {}):
            outcome[name] = NOT_READY
        else:
            outcome[name] = REFUSED if refused else PENDING
    return outcome


def node_list_watch(client, pod_spec=None):
    """The ListWatch of the nodes a deploy task reads: its guard lists them once, its wait follows their changes.
    With ``pod_spec``, only the nodes its template can select, where a label selector can say which
    (ds_rollout.node_label_selector()): the apiserver filters them, so a DaemonSet of one pool of a large cluster
    neither lists nor follows the others."""
    selector = ds_rollout.node_label_selector(pod_spec)
    if selector is None:
        return client.list_watch(client.core.list_node, what="list nodes")
    return client.list_watch(client.core.list_node, what="list the nodes matching %s" % selector,
                             label_selector=selector)


def node_list(node_watch):
    """Every node, listed at the first call (later calls return what the watch holds)."""
    return list(node_watch.until(lambda objs: True, 1.0).values())


class RolloutWait(object):
    """Waits for one DaemonSet's rollout to cover every node its template selects. ``deadline``: the task's
    wait_timeout (a ``_waiting.Deadline``); ``since``: the apiserver time of this run's DaemonSet write;
    ``node_watch``: the task's ListWatch of the nodes, when it read them before (node_list())."""

    def __init__(self, client, namespace, name, deadline, since=None, node_watch=None):
        self.client = client
        self.namespace = namespace
        self.name = name
        self.deadline = deadline
        self.since = since
        self.key = "%s/%s" % (namespace, name)
        self.daemonsets = client.list_watch(client.apps.list_namespaced_daemon_set,
                                            what="watch DaemonSet %s" % self.key, namespace=namespace,
                                            field_selector="metadata.name=%s" % name)
        self.node_watch = node_watch or node_list_watch(client)
        self.events_readable = True
        self.joining = {}       # the nodes still joining at the last look
        self.uncovered = 0      # selected schedulable nodes the controller did not count (yet)
        self.refusal = None     # the refusal that failed the wait
        self._status = None     # the DaemonSet's status at the last look, and since when it has not changed
        self._stalled_since = None
        self._pods_seen = None  # (the DaemonSet as it was, its pods) of the last pod list

    # -- what the wait reads
    def nodes(self, wait_for_change=0.0, fresh=False):
        """Every node: listed at the first call; later calls add the changes that arrived since, waiting up to
        ``wait_for_change`` seconds for the first one, or (``fresh``) list them again."""
        if fresh:
            return list(self.node_watch.relist().values())
        if not self.node_watch.listed:
            return node_list(self.node_watch)
        if wait_for_change > 0:
            self._next_change(self.node_watch, wait_for_change)
        return list(self.node_watch.objects.values())

    @staticmethod
    def _next_change(watch, seconds):
        looks = {"count": 0}

        def changed(_objects):
            looks["count"] += 1
            return looks["count"] > 1     # the first call sees what is cached already

        try:
            watch.until(changed, seconds)
        except WaitTimedOut:
            pass  # nothing changed within the slice: the caller looks again

    def _until_joined(self, daemonset, seconds):
        """Wait up to ``seconds`` until every node still joining has joined (or is gone): one watch request per look,
        however many nodes join meanwhile and however often the others (thousands of heartbeats on a large cluster)
        change."""
        pod_spec = daemonset["spec"]["template"].get("spec")
        try:
            self.node_watch.until(all_joined(pod_spec, sorted(self.joining)), seconds)
        except WaitTimedOut:
            pass  # nothing changed within the slice: the caller looks again

    def pods(self, daemonset):
        """The DaemonSet's pods, listed again only when the DaemonSet changed since the last list (another
        resourceVersion, generation or status): its controller writes the status whenever it creates, deletes or counts
        a pod, so a wait that looks many times while nodes join, and the report after it, list them once per change."""
        meta = daemonset.get("metadata") or {}
        key = json.dumps([meta.get("uid"), meta.get("resourceVersion"), meta.get("generation"),
                          daemonset.get("status") or {}], sort_keys=True)
        if self._pods_seen is None or self._pods_seen[0] != key:
            listing = self.client.list_all(self.client.core.list_namespaced_pod, self.namespace,
                                           label_selector=pod_selector(daemonset),
                                           what='list pods of DaemonSet "%s"' % self.key)
            self._pods_seen = (key, [p for p in listing.get("items") or [] if ds_rollout.owned_by(p, daemonset)])
        return self._pods_seen[1]

    def _events(self):
        list_events = getattr(self.client.core, "list_namespaced_event", None)
        if not self.events_readable or list_events is None:
            return []
        try:
            listing = self.client.list_all(
                list_events, self.namespace,
                field_selector="involvedObject.kind=DaemonSet,involvedObject.name=%s" % self.name,
                what='list events of DaemonSet "%s"' % self.key)
        except KubeHwError as err:
            if err.status in (400, 401, 403, 404, 405):
                self.events_readable = False   # no events to read: the wait goes on without them
                return []
            raise
        return listing.get("items") or []

    # -- judgements
    def failure(self, daemonset):
        """The message for a refusal that persists, or None."""
        if not lacks_pods(daemonset):
            return None
        events = self._events()
        if not ds_rollout.creation_failures(events, daemonset):
            return None
        found = persistent_refusals(events, daemonset, self.pods(daemonset), self.since)
        if not found:
            return None
        self.refusal = found[0]
        state = ds_rollout.rollout_status(daemonset)
        return ("DaemonSet %s cannot create its pods: the DaemonSet controller reports FailedCreate: %s; %s.%s "
                "Nothing more was waited for; fix that and run again."
                % (self.key, refusal_text(found), state["reason"], failure_hint(found[0].get("message") or "",
                                                                                daemonset)))

    def budget_spent(self, daemonset):
        """The message for a rolling update that cannot go on because pods on nodes that are not Ready use up its
        maxUnavailable, or None. Judged once the DaemonSet's status has not changed for STALL_SECONDS."""
        status = daemonset.get("status") or {}
        now = time.monotonic()
        if status != self._status:
            self._status, self._stalled_since = status, now
            return None
        if now - self._stalled_since < STALL_SECONDS:
            return None
        budget = rolling_budget(daemonset)
        if budget is None:
            return None
        pods = self.pods(daemonset)
        nodes = dict((n["metadata"]["name"], n) for n in self.nodes(wait_for_change=0.1))
        down, old_on_ready = stalled_rollout(daemonset, pods, nodes, surge=budget[1] == "maxSurge")
        if len(down) < budget[0] or not old_on_ready:
            return None
        return ("DaemonSet %s cannot finish its rolling update: %d node(s) running its pods are not Ready (%s), and "
                "their pods use up the update's %s (%d), so the DaemonSet controller replaces no pod on the Ready "
                "nodes (%d old pod(s) left there: %s). Bring those nodes back, delete the Node objects of nodes that are "
                "gone (their pods go with them), or raise %s above %d (option update_strategy.%s of this task). "
                "Nothing more was waited for."
                % (self.key, len(down), ds_rollout.few(down), budget[1], budget[0], len(old_on_ready),
                   ds_rollout.few(old_on_ready), budget[1], len(down),
                   "max_surge" if budget[1] == "maxSurge" else "max_unavailable"))

    def _starting(self, daemonset):
        """Some pod of the current template is not ready yet (and not going away)."""
        generation = (daemonset.get("metadata") or {}).get("generation")
        return any(not ds_rollout.pod_ready(p) and not ds_rollout.is_old_pod(p, generation)
                   and not (p.get("metadata") or {}).get("deletionTimestamp")
                   for p in self.pods(daemonset))

    # -- the wait
    def _look(self, done, step, last):
        """The DaemonSet once done(daemonset) holds, or as it is after ``step`` seconds."""
        key = self.key
        try:
            return self.daemonsets.until(lambda objs: key in objs and done(objs[key]), step)[key]
        except WaitTimedOut as err:
            objects = err.objects
            # the watch holds this one DaemonSet (its name is the field selector): not there, it was deleted
            return last if objects is None else objects.get(key)

    def wait(self, what, current=None, done=ds_rollout.rollout_done, on_slice=None, cover_nodes=True):
        """The DaemonSet once ``done(daemonset)`` holds and (cover_nodes) no selected node is still joining, or once
        ``on_slice(daemonset)`` (called after each look that did not finish) is true. Raises TaskFailed for a
        refusal that persists, and WaitTimedOut (.objects) when wait_timeout passes first."""
        started = time.monotonic()
        last = current
        uncovered_since = unready_since = None
        nodes_read = False
        while True:
            slice_ = SLICE if time.monotonic() - started < SLOWDOWN_AFTER else SLICE_LATER
            last = self._look(done, min(self.deadline.left(), slice_), last)
            if last is None:
                raise TaskFailed("DaemonSet %s was deleted while this task waited for it to %s." % (self.key, what))
            if done(last) and not cover_nodes:
                return last
            if done(last):
                # The first verdict reads the nodes anew: those that registered since the task listed them (a pool
                # growing during the rollout) are covered; later looks follow them through the node watch.
                self.joining, self.uncovered = uncovered_nodes(last, self.nodes(fresh=not nodes_read), self.pods)
                nodes_read = True
                if not self.joining and not self.uncovered:
                    # The controller counted every pod available, yet one of the template's is not ready now (the
                    # node lifecycle controller marked it while its copy of the node was older, a probe failed): its
                    # next status says so, and the kubelet reports the pod again. The pods are the ones the report
                    # reads anyway (listed once per DaemonSet state). Bounded by the grace and by wait_timeout.
                    unready_since = unready_since or time.monotonic()
                    if not self._starting(last) or time.monotonic() - unready_since >= UNCOVERED_GRACE:
                        return last
                    self._next_change(self.daemonsets, min(self.deadline.left(), slice_))
                    if self.deadline.left() <= 0:
                        return last
                elif not self.joining:
                    unready_since = None
                    # schedulable now: the controller counts it at its next sync, which the DaemonSet watch shows;
                    # a pod of the template that is not ready yet means the controller has counted it already
                    uncovered_since = uncovered_since or time.monotonic()
                    if time.monotonic() - uncovered_since >= UNCOVERED_GRACE and not self._starting(last):
                        return last
                    self._next_change(self.daemonsets, min(self.deadline.left(), slice_))
                else:
                    uncovered_since = unready_since = None
                    self._until_joined(last, min(self.deadline.left(), slice_))
            else:
                problem = self.failure(last) or self.budget_spent(last)
                if problem:
                    raise TaskFailed(problem)
                if on_slice is not None and on_slice(last):
                    return last
            if self.deadline.left() <= 0:
                raise WaitTimedOut(round(time.monotonic() - started), "waiting to %s" % what, {self.key: last})

    def outcome(self, daemonset, pods=None):
        """node_outcome for the DaemonSet as it is now (reads its pods unless given)."""
        pods = self.pods(daemonset) if pods is None else pods
        return node_outcome(daemonset, self.nodes(), pods, self.joining, refused=self.refusal is not None)

    def joining_text(self):
        return ds_rollout.few("%s (%s)" % (n, why) for n, why in sorted(self.joining.items()))

    # -- the rollout step both deploy modules run
    def rollout(self, current, result, runs, fix_selection, wait_timeout, allow_empty_rollout, warnings,
                done=ds_rollout.rollout_done, on_slice=None, timeout_hint=None):
        """Wait for the rollout (wait()), then judge it as both deploy modules do: a timeout names the nodes still
        joining, or the nodes without a ready pod; a rollout over no node fails (``runs`` says what would run
        nowhere, ``fix_selection`` what to change) unless allow_empty_rollout, which warns. Fills ``result``'s
        daemonset, rollout and node_outcome; returns the DaemonSet. ``timeout_hint(daemonset, pods)``: what the module
        knows to add to a timeout's message ("" for nothing)."""
        try:
            current = self.wait("finish the rollout of DaemonSet %s" % self.key, current, done=done,
                                on_slice=on_slice)
        except WaitTimedOut as err:
            current = (err.objects or {}).get(self.key) or current
            raise TaskFailed(self.timeout_message(current, result, wait_timeout, timeout_hint))
        except TaskFailed:
            self._record(self.daemonsets.objects.get(self.key) or current, result)
            raise
        state = self._record(current, result)
        if state["desired"] == 0:
            selection = self.selection_text(current)
            if not allow_empty_rollout:
                raise TaskFailed("DaemonSet %s selects no node (desiredNumberScheduled is 0), so %s runs nowhere: %s. "
                                 "%s, or set allow_empty_rollout: true if no such node exists yet."
                                 % (self.key, runs, selection, fix_selection))
            warnings.append("DaemonSet %s selects no node (allow_empty_rollout): %s" % (self.key, selection))
        elif self.uncovered:
            warnings.append("DaemonSet %s: the DaemonSet controller counts %d pod(s), %d fewer than the nodes its "
                            "template selects; see node_outcome." % (self.key, state["desired"], self.uncovered))
        silent = sorted(n for n, o in result["node_outcome"].items() if o == NOT_READY)
        if silent:
            stuck = ds_rollout.stuck_nodes(current["spec"]["template"].get("spec"), self.nodes())
            warnings.append("DaemonSet %s: node(s) not ready, not waited for: %s" % (self.key, ds_rollout.few(
                "%s (%s)" % (n, stuck[n]) if n in stuck else n for n in silent)))
        return current

    def _record(self, current, result, pods=None):
        state = ds_rollout.rollout_status(current)
        result.update(daemonset=current, rollout=state, node_outcome=self.outcome(current, pods))
        return state

    def every_node(self):
        """Every node of the cluster: what the node watch holds, or one list of them all when the watch follows only
        the nodes a label selector picks (for a report that counts the nodes a selection leaves out)."""
        if not self.node_watch.list_kwargs.get("label_selector"):
            return self.nodes()
        return self.client.list_all(self.client.core.list_node, what="list nodes").get("items") or []

    def selection_text(self, daemonset):
        """Which nodes the template selects and why the others are left out."""
        pod_spec = daemonset["spec"]["template"].get("spec")
        nodes = self.every_node()
        selection = ds_rollout.node_selection_report(pod_spec, nodes)
        tainted = ds_rollout.excluded_by_taints(pod_spec, nodes)
        if tainted:
            selection += "; matching nodes kept away by taints the pods do not tolerate: %s" % ds_rollout.few(
                "%s (%s)" % (n, t) for n, t in sorted(tainted.items()))
        return selection

    def timeout_message(self, current, result, wait_timeout, hint=None):
        """The message of a rollout that did not finish within wait_timeout (fills ``result`` as rollout() does)."""
        pods = self.pods(current)
        extra = hint(current, pods) if hint else ""
        self.joining = uncovered_nodes(current, self.nodes(), lambda _ds: pods)[0]
        state = self._record(current, result, pods)
        if self.joining:
            # the module's hint too: a joining node says nothing of the pods that run elsewhere and still wait
            return timed_out(wait_timeout, "waiting for DaemonSet %s: the nodes it selects are still joining and never "
                             "became schedulable: %s (the node lifecycle controller removes node.kubernetes.io/not-ready "
                             "once the kubelet reports Ready); %s; %s%s" % (self.key, self.joining_text(),
                                                                            self.selection_text(current), state["reason"],
                                                                            extra))
        nodes = dict((n["metadata"]["name"], n) for n in self.nodes())
        report = ds_rollout.node_report(pods, nodes, [], 0, current["metadata"].get("generation"))
        return ds_rollout.timeout_message("the rollout", wait_timeout, current, state, report, [], 0, False) + extra
