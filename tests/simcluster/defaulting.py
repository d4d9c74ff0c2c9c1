# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The apiserver's defaulting per kind (SetDefaults_*, and the DefaultTolerationSeconds admission on pods), in
place, on create and update; and the QoS class a pod gets on create.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def _drop_empty(mapping, *keys):
    for key in keys:
        if key in mapping and (mapping[key] is None or mapping[key] == {} or mapping[key] == []):
            del mapping[key]


def _mapping(value):
    """value if it is a mapping, else an empty one: defaulting runs before validation, on whatever was sent."""
    return value if isinstance(value, dict) else {}


def _default_container(c):
    image = c.get("image") or ""
    if "imagePullPolicy" not in c:
        tail = image.rsplit("/", 1)[-1]
        if "@" in image:
            c["imagePullPolicy"] = "IfNotPresent"
        elif ":" not in tail or tail.endswith(":latest"):
            c["imagePullPolicy"] = "Always"
        else:
            c["imagePullPolicy"] = "IfNotPresent"
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    c.setdefault("resources", {})
    res = c["resources"]
    if isinstance(res, dict) and isinstance(res.get("limits"), dict):
        # requests default to limits for every resource given only as a limit
        requests = res.setdefault("requests", {})
        for key, value in res["limits"].items():
            requests.setdefault(key, value)
    for port in c.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
    for env in c.get("env") or []:
        _default_field_ref(_mapping(_mapping(env).get("valueFrom")).get("fieldRef"))
    for key in ("livenessProbe", "readinessProbe", "startupProbe"):
        _default_probe(c.get(key))
    for hook in ("postStart", "preStop"):
        _default_http_get(_mapping(c.get("lifecycle")).get(hook))


def _default_field_ref(field_ref):
    """SetDefaults_ObjectFieldSelector: apiVersion v1."""
    if isinstance(field_ref, dict):
        field_ref.setdefault("apiVersion", "v1")


def _default_http_get(handler):
    """SetDefaults_HTTPGetAction: path "/", scheme HTTP."""
    action = handler.get("httpGet") if isinstance(handler, dict) else None
    if isinstance(action, dict):
        action.setdefault("path", "/")
        action.setdefault("scheme", "HTTP")


def _default_probe(probe):
    """SetDefaults_Probe: timeout 1 s, period 10 s, success threshold 1, failure threshold 3."""
    if not isinstance(probe, dict):
        return
    for key, value in (("timeoutSeconds", 1), ("periodSeconds", 10), ("successThreshold", 1), ("failureThreshold", 3)):
        probe.setdefault(key, value)
    _default_http_get(probe)
    if isinstance(probe.get("grpc"), dict):
        probe["grpc"].setdefault("service", "")


def default_pod_spec(spec, is_pod):
    if not isinstance(spec, dict):
        return
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    for field in ("containers", "initContainers"):
        for c in spec.get(field) or []:
            if isinstance(c, dict):
                _default_container(c)
    for vol in spec.get("volumes") or []:
        if not isinstance(vol, dict):
            continue
        if isinstance(vol.get("hostPath"), dict):
            vol["hostPath"].setdefault("type", "")
        for src in ("secret", "configMap", "projected", "downwardAPI"):
            if isinstance(vol.get(src), dict):
                vol[src].setdefault("defaultMode", 420)
        for item in _mapping(vol.get("downwardAPI")).get("items") or []:
            _default_field_ref(_mapping(item).get("fieldRef"))
    if is_pod:
        spec.setdefault("enableServiceLinks", True)
        spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
        spec.setdefault("priority", 0)
        spec.setdefault("serviceAccountName", "default")
        # DefaultTolerationSeconds admission
        tolerations = spec.setdefault("tolerations", [])
        keys = set((t.get("key"), t.get("effect")) for t in tolerations if isinstance(t, dict))
        for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
            if (key, "NoExecute") not in keys and not any(
                    isinstance(t, dict) and t.get("operator") == "Exists" and not t.get("key") for t in tolerations):
                tolerations.append({"key": key, "operator": "Exists", "effect": "NoExecute",
                                    "tolerationSeconds": 300})
    if spec.get("serviceAccountName"):
        # the v1 conversion writes the deprecated alias from serviceAccountName, in pods and pod templates alike
        spec["serviceAccount"] = spec["serviceAccountName"]


NODE_INFO_FIELDS = ("architecture", "bootID", "containerRuntimeVersion", "kernelVersion", "kubeProxyVersion",
                    "kubeletVersion", "machineID", "operatingSystem", "osImage", "systemUUID")


def _default_node_status_structs(status):
    endpoints = status.get("daemonEndpoints")
    if endpoints is None:
        endpoints = status["daemonEndpoints"] = {}
    if isinstance(endpoints, dict):
        if endpoints.get("kubeletEndpoint") is None:
            endpoints["kubeletEndpoint"] = {}
        if isinstance(endpoints["kubeletEndpoint"], dict):
            endpoints["kubeletEndpoint"].setdefault("Port", 0)
    info = status.get("nodeInfo")
    if info is None:
        info = status["nodeInfo"] = {}
    if isinstance(info, dict):
        for field in NODE_INFO_FIELDS:
            if info.get(field) is None:
                info[field] = ""


def default_object(resource, obj, create):
    meta = obj.setdefault("metadata", {})
    _drop_empty(meta, "labels", "annotations", "finalizers", "ownerReferences")
    if resource == "nodes":
        # NodeSpec, NodeStatus, NodeDaemonEndpoints and NodeSystemInfo are Go structs (no omitempty):
        # a node stored without them comes back with zero values (measured on v1.32, FACTS.md)
        if obj.get("spec") is None:
            obj["spec"] = {}
        if obj.get("status") is None:
            obj["status"] = {}
        status = obj["status"]
        if isinstance(status, dict):
            _default_node_status_structs(status)
            # SetDefaults_NodeStatus: allocatable starts as a copy of capacity, never follows it
            if status.get("allocatable") is None and status.get("capacity") is not None:
                status["allocatable"] = dict(status["capacity"])
            # NodeStatus's lists and maps are omitempty: an empty one is not stored, so a later key-level add
            # ("/status/conditions/-", "/status/capacity/<key>") answers 422 (measured on v1.36.2)
            _drop_empty(status, "capacity", "allocatable", "conditions", "addresses", "images", "volumesInUse",
                        "volumesAttached")
    elif resource == "pods":
        default_pod_spec(obj.setdefault("spec", {}), True)
    elif resource == "daemonsets":
        spec = obj.setdefault("spec", {})
        spec.setdefault("revisionHistoryLimit", 10)
        strategy = spec.setdefault("updateStrategy", {})
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            rolling = strategy.setdefault("rollingUpdate", {})
            rolling.setdefault("maxUnavailable", 1)
            rolling.setdefault("maxSurge", 0)
        template = spec.setdefault("template", {})
        tmeta = template.setdefault("metadata", {})
        tmeta.setdefault("creationTimestamp", None)
        default_pod_spec(template.setdefault("spec", {}), False)
    elif resource in ("resourceclaims", "resourceclaimtemplates"):
        _default_claim_requests(resource, obj)
    elif resource == "namespaces":
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        obj.setdefault("status", {}).setdefault("phase", "Active")
        meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta.get("name", "")


def _default_exact(exact):
    """SetDefaults_ExactDeviceRequest / DeviceSubRequest: allocationMode ExactCount, then count 1 (v1.36.2)."""
    if isinstance(exact, dict):
        exact.setdefault("allocationMode", "ExactCount")
        if exact["allocationMode"] == "ExactCount" and not exact.get("count"):
            exact["count"] = 1


def _default_claim_requests(resource, obj):
    """Defaults of a stored (v1) ResourceClaim or ResourceClaimTemplate, in place."""
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else None
    if resource == "resourceclaimtemplates" and spec is not None:
        spec = spec.get("spec") if isinstance(spec.get("spec"), dict) else None
    if resource not in ("resourceclaims", "resourceclaimtemplates") or spec is None:
        return
    for request in ((spec.get("devices") if isinstance(spec.get("devices"), dict) else {}).get("requests") or []):
        if isinstance(request, dict):
            _default_exact(request.get("exactly"))
            for sub in request.get("firstAvailable") or []:
                _default_exact(sub)
