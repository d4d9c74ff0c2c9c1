# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""DaemonSets (device_plugin_deploy's and dra_driver_deploy's): the defaults kube-apiserver fills in, and the semantic
comparison with the live object.

Private to the collection."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json

from ansible_collections.kubehw.devices.plugins.module_utils._extended_resources import (
    escape_pointer,
    quantity_value,
)
from ansible_collections.kubehw.devices.plugins.module_utils._pod_spec import default_pull_policy
from ansible_collections.kubehw.devices.plugins.module_utils._k8s_objects import stale_keys

_MISSING = object()

# -- server defaults and semantic comparison -----------------------------------------------------


def _default_container(container):
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    if container.get("image"):
        container.setdefault("imagePullPolicy", default_pull_policy(container["image"]))
    for port in container.get("ports") or []:
        port.setdefault("protocol", "TCP")
    for env in container.get("env") or []:
        field_ref = (env.get("valueFrom") or {}).get("fieldRef")
        if field_ref is not None:
            field_ref.setdefault("apiVersion", "v1")
    for probe_key in ("livenessProbe", "readinessProbe", "startupProbe"):
        probe = container.get(probe_key)
        if probe:
            probe.setdefault("timeoutSeconds", 1)
            probe.setdefault("periodSeconds", 10)
            probe.setdefault("successThreshold", 1)
            probe.setdefault("failureThreshold", 3)
            if "httpGet" in probe:
                probe["httpGet"].setdefault("scheme", "HTTP")


def apply_defaults(daemonset):
    """Return a copy with the defaults kube-apiserver v1.32 fills into an apps/v1 DaemonSet."""
    ds = copy.deepcopy(daemonset)
    spec = ds.setdefault("spec", {})
    spec.setdefault("revisionHistoryLimit", 10)
    strategy = spec.setdefault("updateStrategy", {})
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = strategy.setdefault("rollingUpdate", {})
        rolling.setdefault("maxUnavailable", 1)
        rolling.setdefault("maxSurge", 0)
    pod = spec.setdefault("template", {}).setdefault("spec", {})
    pod.setdefault("restartPolicy", "Always")
    pod.setdefault("terminationGracePeriodSeconds", 30)
    pod.setdefault("dnsPolicy", "ClusterFirst")
    pod.setdefault("securityContext", {})
    pod.setdefault("schedulerName", "default-scheduler")
    if pod.get("serviceAccountName") and "serviceAccount" not in pod:
        # The deprecated alias is still filled in from serviceAccountName.
        pod["serviceAccount"] = pod["serviceAccountName"]
    for container in (pod.get("containers") or []) + (pod.get("initContainers") or []):
        _default_container(container)
    for volume in pod.get("volumes") or []:
        if "hostPath" in volume:
            volume["hostPath"].setdefault("type", "")
        for source in ("configMap", "secret"):
            if source in volume:
                volume[source].setdefault("defaultMode", 420)
        if "projected" in volume:
            volume["projected"].setdefault("defaultMode", 420)
    return ds


def _is_empty(value):
    return value is _MISSING or value is None or value == {} or value == [] or value == "" or value is False


def _scalar_equal(want, have, path):
    if want == have and type(want) is type(have):
        return True
    if isinstance(want, bool) or isinstance(have, bool):
        return False
    if "resources" in path and ("limits" in path or "requests" in path):
        # The apiserver canonicalises quantities ("0.5" is stored as "500m").
        a, b = quantity_value(want), quantity_value(have)
        return a is not None and a == b
    return False


def _differences(want, have, path, out):
    if isinstance(want, dict):
        if _is_empty(want) and _is_empty(have):
            return
        if not isinstance(have, dict):
            out.append(path or "/")
            return
        for key, value in want.items():
            if value is None:
                continue
            _differences(value, have.get(key, _MISSING), "%s/%s" % (path, escape_pointer(key)), out)
    elif isinstance(want, list):
        if _is_empty(want) and _is_empty(have):
            return
        if not isinstance(have, list) or len(have) != len(want):
            out.append(path)
            return
        for index, (a, b) in enumerate(zip(want, have)):
            _differences(a, b, "%s/%d" % (path, index), out)
    else:
        if _is_empty(want) and _is_empty(have):
            return
        if not _scalar_equal(want, have, path):
            out.append(path)


def differences(desired, live):
    """Paths where the live object does not match what we want.

    Both sides are defaulted as the apiserver would, then every field we set must match; fields
    only the live object has (status, managedFields, what others added) are not ours to judge.
    Lists must match item by item, so an env var, toleration or volume that is gone counts.
    """
    if live is None:
        return ["/"]
    want = apply_defaults(desired)
    have = apply_defaults(live)
    out = []
    _differences(want.get("spec"), have.get("spec"), "/spec", out)
    meta_want = want.get("metadata") or {}
    meta_have = have.get("metadata") or {}
    for key in ("labels", "annotations"):
        for item, value in (meta_want.get(key) or {}).items():
            if (meta_have.get(key) or {}).get(item) != value:
                out.append("/metadata/%s/%s" % (key, escape_pointer(item)))
        for item in sorted(stale_keys(desired, live, key)):
            out.append("/metadata/%s/%s" % (key, escape_pointer(item)))
    return out


def configmap_differences(desired, live):
    if live is None:
        return ["/"]
    out = []
    if (live.get("data") or {}) != (desired.get("data") or {}):
        out.append("/data")
    for item, value in desired["metadata"].get("labels", {}).items():
        if ((live.get("metadata") or {}).get("labels") or {}).get(item) != value:
            out.append("/metadata/labels/%s" % escape_pointer(item))
    return out


def selector_conflict(desired, live):
    """The selector is immutable: a live DaemonSet selecting other labels cannot be updated in place."""
    if live is None:
        return None
    have = (live.get("spec") or {}).get("selector")
    want = desired["spec"]["selector"]
    if have != want:
        return ("DaemonSet %s/%s exists with selector %s, but this module selects %s; spec.selector is "
                "immutable. Delete the DaemonSet (state=absent) or choose another name."
                % (desired["metadata"]["namespace"], desired["metadata"]["name"],
                   json.dumps(have, sort_keys=True), json.dumps(want, sort_keys=True)))
    return None
