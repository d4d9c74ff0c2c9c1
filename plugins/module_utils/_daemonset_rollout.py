# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The DaemonSets of both deploy modules (device plugins, DRA kubelet plugins): rollout readiness, the pods and nodes
report, and the messages naming what is missing.

Private to the collection. Pure functions over the JSON the apiserver sends."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import calendar
import time

from ansible_collections.kubehw.devices.plugins.module_utils._errors import timed_out
from ansible_collections.kubehw.devices.plugins.module_utils._extended_resources import quantity_value
from ansible_collections.kubehw.devices.plugins.module_utils._pod_spec import NAME_LABEL
from ansible_collections.kubehw.devices.plugins.module_utils._k8s_objects import (
    MANAGED_BY,
    MANAGED_BY_LABEL,
    condition,
    has_owner_uid,
)

# Set by the DaemonSet controller on every pod it creates.
POD_TEMPLATE_GENERATION_LABEL = "pod-template-generation"


# -- rollout readiness ----------------------------------------------------------------------------

def rollout_status(daemonset):
    """Rollout state of a DaemonSet as the DaemonSet controller reports it.

    Done when observedGeneration >= generation and updated == available == desired; absent counts
    are 0 (the controller drops them, e.g. updatedNumberScheduled on an unreachable node); zero
    desired is done at once. OnDelete rollouts never finish on their own: ``old_pods_pending``.
    """
    meta = daemonset.get("metadata") or {}
    status = daemonset.get("status") or {}
    strategy = (((daemonset.get("spec") or {}).get("updateStrategy")) or {}).get("type") or "RollingUpdate"
    generation = meta.get("generation") or 0
    observed = status.get("observedGeneration") or 0
    counts = dict(
        desired=status.get("desiredNumberScheduled") or 0,
        current=status.get("currentNumberScheduled") or 0,
        updated=status.get("updatedNumberScheduled") or 0,
        ready=status.get("numberReady") or 0,
        available=status.get("numberAvailable") or 0,
        unavailable=status.get("numberUnavailable") or 0,
        misscheduled=status.get("numberMisscheduled") or 0,
    )
    observed_ok = observed >= generation and generation > 0
    if not observed_ok:
        done, reason = False, "waiting for the DaemonSet controller to observe generation %d (observed %d)" % (
            generation, observed)
    elif counts["desired"] == 0:
        done, reason = True, "no node is selected for the plugin (desiredNumberScheduled is 0)"
    elif counts["updated"] == counts["desired"] and counts["available"] == counts["desired"]:
        done, reason = True, "all %d pods are updated and available" % counts["desired"]
    else:
        done = False
        reason = "%d of %d pods updated, %d available" % (counts["updated"], counts["desired"], counts["available"])
    old_pending = bool(observed_ok and not done and strategy == "OnDelete" and counts["updated"] < counts["desired"])
    result = dict(counts, done=done, reason=reason, generation=generation, observed_generation=observed,
                  strategy=strategy, old_pods_pending=old_pending)
    return result


def rollout_done(daemonset):
    return rollout_status(daemonset)["done"]


# -- pods and nodes -------------------------------------------------------------------------------

def pod_node(pod):
    """Node a DaemonSet pod runs on, or is pinned to before it is bound (matchFields metadata.name)."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return spec["nodeName"]
    terms = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
             .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []
    for term in terms:
        for field in term.get("matchFields") or []:
            if field.get("key") == "metadata.name" and field.get("values"):
                return field["values"][0]
    return None


def pod_ready(pod):
    return (condition(pod, "Ready") or {}).get("status") == "True"


def initializing(pod):
    """The pod has init containers and not all of them have finished."""
    statuses = (pod.get("status") or {}).get("initContainerStatuses") or []
    declared = ((pod.get("spec") or {}).get("initContainers")) or []
    if not declared:
        return False
    finished = [s for s in statuses if ((s.get("state") or {}).get("terminated") or {}).get("exitCode") == 0]
    return len(finished) < len(declared)


def pod_waiting_reasons(pod):
    """Why the pod's containers are not running, e.g. ['nvidia-device-plugin: ImagePullBackOff']."""
    status = pod.get("status") or {}
    reasons = []
    for key in ("initContainerStatuses", "containerStatuses"):
        for cs in status.get(key) or []:
            state = cs.get("state") or {}
            if state.get("waiting"):
                reason = state["waiting"].get("reason") or "Waiting"
                message = state["waiting"].get("message")
                reasons.append("%s: %s%s" % (cs.get("name"), reason, " (%s)" % message if message else ""))
            elif state.get("terminated") and not cs.get("ready"):
                reasons.append("%s: %s" % (cs.get("name"), state["terminated"].get("reason") or "Terminated"))
    if not reasons and status.get("phase") == "Pending":
        cond = condition(pod, "PodScheduled") or {}
        if cond.get("status") == "False":
            reasons.append("unschedulable: %s" % (cond.get("message") or cond.get("reason")))
    return reasons


def uses_configmap(pod_spec, name):
    """True when a pod spec reads ConfigMap ``name``: a volume, a projected source, env or envFrom."""
    spec = pod_spec or {}
    for volume in spec.get("volumes") or []:
        if (volume.get("configMap") or {}).get("name") == name:
            return True
        for source in (volume.get("projected") or {}).get("sources") or []:
            if (source.get("configMap") or {}).get("name") == name:
                return True
    for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        for env_from in container.get("envFrom") or []:
            if (env_from.get("configMapRef") or {}).get("name") == name:
                return True
        for env in container.get("env") or []:
            if ((env.get("valueFrom") or {}).get("configMapKeyRef") or {}).get("name") == name:
                return True
    return False


def configmap_created_for(cm, daemonset_name, daemonset_uid=None):
    """True when the module created ConfigMap ``cm`` for this DaemonSet.

    Either it is owned by the DaemonSet (ownerReference with its uid), or it carries both labels the
    module writes on it: managed-by kubehw.devices and app.kubernetes.io/name of the DaemonSet.
    Anything else is someone else's ConfigMap, whatever its name.
    """
    if has_owner_uid(cm, daemonset_uid):
        return True
    labels = ((cm or {}).get("metadata") or {}).get("labels") or {}
    return labels.get(MANAGED_BY_LABEL) == MANAGED_BY and labels.get(NAME_LABEL) == daemonset_name


def owned_by(pod, daemonset):
    uid = (daemonset.get("metadata") or {}).get("uid")
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("kind") == "DaemonSet" and (uid is None or ref.get("uid") == uid):
            return True
    return False


def is_old_pod(pod, generation):
    label = ((pod.get("metadata") or {}).get("labels") or {}).get(POD_TEMPLATE_GENERATION_LABEL)
    return label is not None and label != str(generation)


def _resource_count(node, where, resource):
    value = ((node.get("status") or {}).get(where) or {}).get(resource)
    if value is None:
        return None
    number = quantity_value(value)
    return int(number) if number is not None else None


def _enough(counts, resource_names, min_count, any_of):
    """Each resource (or, with any_of, at least one of them) counts at least min_count."""
    ok = [counts.get(r) is not None and counts[r] >= min_count for r in resource_names]
    return any(ok) if any_of else all(ok)


def node_report(pods, nodes, resource_names, min_count, generation=None, any_of=False):
    """Per node running (or due to run) a plugin pod: pod readiness and the resources it advertises."""
    report = {}
    for pod in sorted(pods, key=lambda p: (p.get("metadata") or {}).get("creationTimestamp") or ""):
        node = pod_node(pod)
        if not node:
            continue
        meta = pod.get("metadata") or {}
        terminating = bool(meta.get("deletionTimestamp"))
        entry = report.get(node)
        # A terminating old pod loses to its replacement; otherwise the newest pod speaks for the node.
        if entry is not None and terminating and not entry["terminating"]:
            continue
        report[node] = {
            "pod": meta.get("name"),
            "pod_ready": pod_ready(pod),
            "phase": (pod.get("status") or {}).get("phase"),
            "waiting_reasons": pod_waiting_reasons(pod),
            "terminating": terminating,
            "updated": None if generation is None else not is_old_pod(pod, generation),
        }
    for node, entry in report.items():
        node_obj = nodes.get(node) or {}
        capacity = {}
        allocatable = {}
        for res in resource_names:
            capacity[res] = _resource_count(node_obj, "capacity", res)
            allocatable[res] = _resource_count(node_obj, "allocatable", res)
        entry["capacity"] = capacity
        entry["allocatable"] = allocatable
        entry["resource_ready"] = bool(node_obj) and _enough(capacity, resource_names, min_count, any_of)
    return report


def nodes_with_resource(nodes, node_names, resource_names, min_count, any_of=False):
    """True when every named node has every resource (with any_of: one of them) in capacity with at least min_count.

    any_of is for plugins whose resources are alternatives per node: the Intel GPU plugin serves
    gpu.intel.com/i915 on nodes driven by i915 and gpu.intel.com/xe on those driven by xe.
    """
    for name in node_names:
        node = nodes.get(name)
        if node is None:
            return False
        counts = dict((res, _resource_count(node, "capacity", res)) for res in resource_names)
        if not _enough(counts, resource_names, min_count, any_of):
            return False
    return True


def timeout_message(what, timeout, daemonset, rollout, report, resource_names, min_count, check_resources,
                    any_of=False):
    meta = daemonset.get("metadata") or {}
    parts = [timed_out(timeout, "waiting for %s of DaemonSet %s/%s: %s" % (
        what, meta.get("namespace"), meta.get("name"), rollout["reason"]))]
    not_ready = []
    for node in sorted(report):
        entry = report[node]
        if not entry["pod_ready"]:
            detail = "; ".join(entry["waiting_reasons"]) or entry.get("phase") or "not ready"
            not_ready.append("%s (pod %s: %s)" % (node, entry["pod"], detail))
    if not_ready:
        parts.append("nodes without a ready plugin pod: %s" % ", ".join(not_ready))
    missing_pods = rollout["desired"] - len(report)
    if missing_pods > 0:
        runtime_class = ((daemonset.get("spec") or {}).get("template") or {}).get("spec", {}).get("runtimeClassName")
        hint = ""
        if runtime_class:
            hint = (" (pods naming runtimeClassName %s are refused while RuntimeClass %s does not exist; the "
                    "nvidia_container_toolkit role creates nvidia)" % (runtime_class, runtime_class))
        parts.append("%d selected node(s) have no plugin pod yet%s" % (missing_pods, hint))
    if check_resources:
        lacking = []
        for node in sorted(report):
            entry = report[node]
            if _enough(entry["capacity"], resource_names, min_count, any_of):
                continue
            short = ["%s=%s" % (r, entry["capacity"].get(r)) for r in resource_names
                     if entry["capacity"].get(r) is None or entry["capacity"][r] < min_count]
            lacking.append("%s (%s)" % (node, ", ".join(short)))
        if lacking:
            parts.append("nodes lacking %s >= %d in capacity: %s" % (
                (" or " if any_of else ", ").join(resource_names), min_count, ", ".join(lacking)))
    return "; ".join(parts)


def _requirement_text(req):
    key, op, values = req.get("key"), req.get("operator"), req.get("values") or []
    if op == "In":
        return "%s in (%s)" % (key, ", ".join(values))
    if op == "NotIn":
        return "%s notin (%s)" % (key, ", ".join(values))
    if op == "Exists":
        return key
    if op == "DoesNotExist":
        return "!%s" % key
    return "%s %s %s" % (key, op, ",".join(values))


def _requirement_matches(req, labels):
    key, op, values = req.get("key"), req.get("operator"), req.get("values") or []
    present = key in labels
    if op == "In":
        return present and labels[key] in values
    if op == "NotIn":
        return not present or labels[key] not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    return False


def node_selection_report(pod_spec, nodes):
    """Why a pod spec selects the nodes it does: each nodeSelector label and affinity requirement with
    the number of nodes that satisfy it, e.g. 'nodeSelector gpu=yes (0 of 5 nodes)'."""
    spec = pod_spec or {}
    labels_of = [((n.get("metadata") or {}).get("labels") or {}) for n in nodes]
    parts = []
    for key, value in sorted((spec.get("nodeSelector") or {}).items()):
        count = sum(1 for labels in labels_of if labels.get(key) == value)
        parts.append("nodeSelector %s=%s (%d of %d nodes)" % (key, value, count, len(nodes)))
    terms = ((((spec.get("affinity") or {}).get("nodeAffinity") or {})
              .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or [])
    alternatives = []
    for term in terms:
        exprs = term.get("matchExpressions") or []
        if not exprs:
            continue
        count = sum(1 for labels in labels_of if all(_requirement_matches(e, labels) for e in exprs))
        alternatives.append("%s (%d of %d nodes)" % (" and ".join(_requirement_text(e) for e in exprs), count,
                                                     len(nodes)))
    if alternatives:
        parts.append("node affinity, any of: %s" % "; ".join(alternatives))
    if not parts:
        parts.append("no node selector or affinity (%d nodes; taints the pods do not tolerate exclude them)"
                     % len(nodes))
    return ", ".join(parts)


# -- which nodes a DaemonSet selects, and why not -------------------------------------------------
# The DaemonSet controller's predicates (pkg/controller/daemon/daemon_controller.go, nodeShouldRunDaemonPod and
# predicates): the pod template's required node affinity and nodeSelector match the node, and no NoSchedule or
# NoExecute taint of the node is left untolerated, the controller's own tolerations counted
# (pkg/controller/daemon/util/daemonset_util.go, AddOrUpdateDaemonPodTolerations).

DAEMON_TOLERATIONS = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
)
HOST_NETWORK_TOLERATION = {"key": "node.kubernetes.io/network-unavailable", "operator": "Exists", "effect": "NoSchedule"}
# Taints a joining node carries until the node lifecycle controller sees it Ready (added at registration by the
# apiserver's TaintNodesByCondition admission, removed by the node lifecycle controller).
JOINING_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable",
                  "node.kubernetes.io/network-unavailable")


def _expression_matches(req, labels):
    key, op, values = req.get("key"), req.get("operator"), req.get("values") or []
    if op in ("Gt", "Lt"):
        if key not in labels or len(values) != 1:
            return False
        try:
            have, want = int(labels[key]), int(values[0])
        except (TypeError, ValueError):
            return False
        return have > want if op == "Gt" else have < want
    return _requirement_matches(req, labels)


def _term_matches(term, labels, name):
    exprs = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not exprs and not fields:
        return False   # an empty term matches no node (k8s.io/component-helpers nodeaffinity)
    if not all(_expression_matches(e, labels) for e in exprs):
        return False
    return all(_expression_matches(f, {"metadata.name": name}) for f in fields)


def node_matches(pod_spec, node):
    """True when the node's labels (and name) satisfy the pod spec's nodeSelector and required node affinity."""
    spec = pod_spec or {}
    meta = node.get("metadata") or {}
    labels = meta.get("labels") or {}
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution"))
    if required is not None:
        return any(_term_matches(t, labels, meta.get("name")) for t in required.get("nodeSelectorTerms") or [])
    return True


def _tolerates(toleration, taint):
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    key = toleration.get("key")
    if toleration.get("operator") == "Exists":
        return not key or key == taint.get("key")
    return key == taint.get("key") and (toleration.get("value") or "") == (taint.get("value") or "")


def untolerated_taints(pod_spec, node):
    """The node's NoSchedule and NoExecute taints that the DaemonSet's pods do not tolerate (the controller's own
    tolerations counted)."""
    spec = pod_spec or {}
    tolerations = list(spec.get("tolerations") or []) + list(DAEMON_TOLERATIONS)
    if spec.get("hostNetwork"):
        tolerations.append(HOST_NETWORK_TOLERATION)
    return [t for t in (node.get("spec") or {}).get("taints") or []
            if t.get("effect") in ("NoSchedule", "NoExecute") and not any(_tolerates(tol, t) for tol in tolerations)]


def taint_text(taint):
    value = taint.get("value")
    return "%s%s:%s" % (taint.get("key"), "=%s" % value if value else "", taint.get("effect"))


def node_ready(node):
    return (condition(node, "Ready") or {}).get("status") == "True"


def node_label_selector(pod_spec):
    """A label selector every node the template can select matches (the apiserver filters the node list with it), or
    None when the template's selection cannot be written as one: its nodeSelector, and the expressions of its required
    node affinity when that has a single term of label expressions the selector syntax has (In, NotIn, Exists,
    DoesNotExist). Several terms (any of them) or Gt, Lt and matchFields leave the affinity to node_matches()."""
    spec = pod_spec or {}
    parts = ["%s=%s" % (key, value) for key, value in sorted((spec.get("nodeSelector") or {}).items())]
    terms = ((((spec.get("affinity") or {}).get("nodeAffinity") or {})
              .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or [])
    if len(terms) == 1 and not terms[0].get("matchFields"):
        exprs = terms[0].get("matchExpressions") or []
        written = [_selector_requirement(e) for e in exprs]
        if exprs and all(written):
            parts.extend(written)
    return ",".join(parts) or None


def _selector_requirement(expr):
    key, op, values = expr.get("key"), expr.get("operator"), sorted(expr.get("values") or [])
    if op == "Exists":
        return key
    if op == "DoesNotExist":
        return "!" + key
    if op in ("In", "NotIn") and values:
        return "%s %s (%s)" % (key, op.lower(), ",".join(values))
    return None


def selected_nodes(pod_spec, nodes):
    """Names of the nodes the DaemonSet controller runs a pod of this template on."""
    return sorted(n["metadata"]["name"] for n in nodes
                  if node_matches(pod_spec, n) and not untolerated_taints(pod_spec, n))


def admitted_nodes(pod_spec, nodes):
    """Names of the nodes whose labels and taints admit a pod of this template: those the DaemonSet controller runs
    one on, and those held back only while they join or are not Ready (stuck ones too), sorted. Which nodes an
    inventory's hosts must be among."""
    return sorted(set(selected_nodes(pod_spec, nodes)) | set(name for name, _why, _stuck in _held_back(pod_spec, nodes)))


def timestamp_seconds(timestamp):
    """Seconds since the epoch of an RFC 3339 time (second precision), or None."""
    if not timestamp:
        return None
    try:
        return calendar.timegm(time.strptime(timestamp[:19], "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None


# A node whose kubelet has reported Ready=False for this long (its own heartbeat this many seconds after the
# condition turned) is stuck, not joining: a broken network plugin or container runtime, a bad driver change. A
# joining node turns Ready within a minute or two of registering, once its network plugin runs.
NOT_READY_GRACE = 300


def stuck_not_ready(node):
    """Why a node is stuck NotReady ("Ready=False for 12m: KubeletNotReady: ..."), or None: its kubelet reports
    (the condition is False, not Unknown) and its last heartbeat came NOT_READY_GRACE seconds or more after the
    condition turned. Both times are the kubelet's own, so the machine's clock plays no part."""
    cond = condition(node, "Ready") or {}
    if cond.get("status") != "False":
        return None
    turned, heard = timestamp_seconds(cond.get("lastTransitionTime")), timestamp_seconds(cond.get("lastHeartbeatTime"))
    if turned is None or heard is None or heard - turned < NOT_READY_GRACE:
        return None
    said = ": ".join(str(part)[:200] for part in (cond.get("reason"), cond.get("message")) if part)
    return "Ready=False for %dm%s" % ((heard - turned) // 60, ": " + said if said else "")


def _held_back(pod_spec, nodes):
    """(node, why, stuck) for nodes that match the template's selection but are held back only by a joining node's
    taints (not-ready, unreachable, network-unavailable) or have not reported Ready yet; stuck: stuck_not_ready()."""
    for node in nodes:
        if not node_matches(pod_spec, node):
            continue
        blocking = untolerated_taints(pod_spec, node)
        if any(t.get("key") not in JOINING_TAINTS for t in blocking):
            continue
        if blocking or not node_ready(node):
            reasons = [taint_text(t) for t in blocking] or ["not Ready"]
            yield node["metadata"]["name"], ", ".join(reasons), stuck_not_ready(node)


def joining_nodes(pod_spec, nodes):
    """{node: why} for the nodes a rollout right after they were provisioned waits for: held back only by a joining
    node's taints or not Ready yet, and not stuck NotReady (stuck_not_ready())."""
    return dict((name, why) for name, why, stuck in _held_back(pod_spec, nodes) if not stuck)


def stuck_nodes(pod_spec, nodes):
    """{node: why} for the nodes the template selects once they are Ready, whose kubelet has reported NotReady for
    NOT_READY_GRACE seconds or more: not waited for, named as not-ready."""
    return dict((name, stuck) for name, _why, stuck in _held_back(pod_spec, nodes) if stuck)


def excluded_by_taints(pod_spec, nodes):
    """{node: untolerated taints} for nodes whose labels match but whose other taints keep the pods away."""
    out = {}
    for node in nodes:
        if node_matches(pod_spec, node):
            blocking = [t for t in untolerated_taints(pod_spec, node) if t.get("key") not in JOINING_TAINTS]
            if blocking:
                out[node["metadata"]["name"]] = ", ".join(taint_text(t) for t in blocking)
    return out


# -- pods the DaemonSet controller could not create -------------------------------------------------------

def creation_failures(events, daemonset):
    """The DaemonSet controller's FailedCreate events for this DaemonSet (by name and uid), newest first."""
    uid = (daemonset.get("metadata") or {}).get("uid")
    name = (daemonset.get("metadata") or {}).get("name")
    found = []
    for event in events or []:
        involved = event.get("involvedObject") or {}
        if event.get("reason") != "FailedCreate" or involved.get("kind") != "DaemonSet":
            continue
        if involved.get("name") != name or (uid and involved.get("uid") and involved["uid"] != uid):
            continue
        found.append(event)
    found.sort(key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "", reverse=True)
    return found


def latest_write_time(obj):
    """The newest managedFields time of an object as the apiserver returned it (its clock), or None."""
    times = [m.get("time") for m in ((obj or {}).get("metadata") or {}).get("managedFields") or [] if m.get("time")]
    return max(times) if times else None


def few(names, limit=10):
    """At most ``limit`` names, comma-separated, and how many more there are."""
    names = list(names)
    text = ", ".join(names[:limit])
    return text + (" and %d more" % (len(names) - limit) if len(names) > limit else "")
