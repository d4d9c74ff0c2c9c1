# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""HTTP(S) front of the simulated cluster: answers as kube-apiserver v1.32 does.

What a real apiserver answers is recorded in tests/simcluster/FACTS.md, with sources;
every deviation from it is a bug of this file.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import copy
import json
import queue
import re
import socket
import ssl
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jsonpatch

from tests.simcluster import tokenrequest  # serviceaccounts/token (TokenRequest)
from tests.simcluster import openapi  # fieldValidation and the /openapi/v3 kubectl reads
from tests.simcluster import auth, eviction
from tests.simcluster import dra  # resource.k8s.io (Dynamic Resource Allocation)
from tests.simcluster.quantity import QUANTITY_FORMAT_ERROR, QuantityError, canonical_quantity, parse_quantity
from tests.simcluster.store import (
    RESOURCES, STATUS_RESOURCES, StoreError, already_exists, api_version, conflict, group_resource,
    is_namespaced, kind_of, missing_runtime_class, missing_service_account, not_found, now_rfc3339,
)


GENERIC_422 = "the server rejected our request due to an error in our request"
PATCH_TYPES = ("application/json-patch+json", "application/merge-patch+json",
               "application/strategic-merge-patch+json")


def pod_grace_period(pod, requested):
    """The grace period a pod DELETE gets, as kube-apiserver's pod strategy decides it (CheckGracefulDelete in
    pkg/registry/core/pod/strategy.go): the request's gracePeriodSeconds, else the pod's
    terminationGracePeriodSeconds (defaulted to 30 on create); 0 for a pod not bound to a node or already
    Succeeded/Failed; a negative value becomes 1. With 0 the registry removes the pod at once (store.go
    updateForGracefulDeletionAndFinalizers: no grace left and no finalizers)."""
    spec = pod.get("spec") or {}
    period = requested if requested is not None else spec.get("terminationGracePeriodSeconds", 30)
    if not spec.get("nodeName") or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        period = 0
    return 1 if period < 0 else period


def status_body(code, reason, message, details=None, status="Failure"):
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": status,
            "message": message, "reason": reason, "code": code}
    if details is not None:
        body["details"] = details
    if status == "Success":
        body.pop("reason")
        body.pop("message")
    return body


def _qualified_kind(resource):
    group = RESOURCES[resource][0]
    return "%s.%s" % (kind_of(resource), group) if group else kind_of(resource)


_QUALIFIED_NAME_PART = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
INTEGER_NATIVE = frozenset(["pods", "services", "replicationcontrollers", "resourcequotas", "secrets",
                            "configmaps", "persistentvolumeclaims", "services.nodeports",
                            "services.loadbalancers"])
STANDARD_CONTAINER_RESOURCES = frozenset(["cpu", "memory", "ephemeral-storage"])
# pkg/apis/core/helper/helpers.go standardResources (IsStandardResourceName), besides hugepages-*
STANDARD_RESOURCES = STANDARD_CONTAINER_RESOURCES | frozenset([
    "requests.cpu", "requests.memory", "requests.ephemeral-storage", "limits.cpu", "limits.memory",
    "limits.ephemeral-storage", "pods", "services", "replicationcontrollers", "resourcequotas", "secrets",
    "persistentvolumeclaims", "configmaps", "storage", "requests.storage", "services.nodeports",
    "services.loadbalancers"])


def _is_qualified_name(value):
    if value.count("/") > 1:
        return False
    if "/" in value:
        prefix, name = value.split("/", 1)
        if not prefix or len(prefix) > 253 or not all(_DNS_LABEL.match(p) for p in prefix.split(".")):
            return False
    else:
        name = value
    return bool(name) and len(name) <= 63 and bool(_QUALIFIED_NAME_PART.match(name))


def is_extended_resource_name(name):
    """helper.IsExtendedResourceName of the apiserver: not native, and requests.<name> qualified."""
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    return _is_qualified_name("requests." + name)


def is_integer_resource(name):
    return name in INTEGER_NATIVE or is_extended_resource_name(name)


# ---------------------------------------------------------------- field errors

class FieldError:
    REASONS = {"Invalid": "FieldValueInvalid", "Required": "FieldValueRequired",
               "Forbidden": "FieldValueForbidden", "NotSupported": "FieldValueNotSupported",
               "Too long": "FieldValueTooLong", "Too many": "FieldValueTooMany"}

    def __init__(self, field, kind, detail, value=None):
        self.field = field
        self.kind = kind
        self.detail = detail
        self.value = value

    def body(self):
        if self.kind == "Invalid":
            return "Invalid value: %s: %s" % (_go_value(self.value), self.detail)
        if self.kind == "Required":
            return "Required value: %s" % self.detail if self.detail else "Required value"
        if self.kind == "Forbidden":
            return "Forbidden: %s" % self.detail
        return "%s: %s" % (self.kind, self.detail)

    def __str__(self):
        return "%s: %s" % (self.field, self.body())


def _go_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def invalid_error(resource, name, errors):
    """StoreError 422 Invalid as errors.NewInvalid builds it."""
    if len(errors) == 1:
        agg = str(errors[0])
    else:
        agg = "[%s]" % ", ".join(str(e) for e in errors)
    kind = _qualified_kind(resource) if resource else ""
    message = '%s "%s" is invalid: %s' % (kind, name, agg)
    details = {}
    if name:
        details["name"] = name
    if resource:
        group = RESOURCES[resource][0]
        if group:
            details["group"] = group
        details["kind"] = kind_of(resource)
    details["causes"] = [{"reason": FieldError.REASONS.get(e.kind, e.kind), "message": e.body(), "field": e.field}
                         for e in errors]
    return StoreError(422, "Invalid", message, details)


def generic_422():
    return StoreError(422, "Invalid", GENERIC_422, {})


def bad_request(message):
    return StoreError(400, "BadRequest", message)


# ---------------------------------------------------------------- decoding (quantities)

def _canonicalize_resource_map(mapping):
    """Quantities are serialized as canonical strings; raises QuantityError like the decoder."""
    if not isinstance(mapping, dict):
        raise QuantityError("json: cannot unmarshal %s into Go value of type map" % type(mapping).__name__)
    for key in list(mapping):
        if mapping[key] is None:
            raise QuantityError(QUANTITY_FORMAT_ERROR)
        mapping[key] = canonical_quantity(mapping[key])


def _pod_spec_resources(spec):
    for field in ("containers", "initContainers"):
        for container in spec.get(field) or []:
            if isinstance(container, dict) and isinstance(container.get("resources"), dict):
                yield container["resources"]


def decode_object(resource, obj):
    """What decoding into the Go type does to quantities. Raises QuantityError."""
    if resource == "nodes":
        status = obj.get("status")
        if isinstance(status, dict):
            for field in ("capacity", "allocatable"):
                if status.get(field) is not None:
                    _canonicalize_resource_map(status[field])
    elif resource == "runtimeclasses":
        pod_fixed = (obj.get("overhead") or {}).get("podFixed") if isinstance(obj.get("overhead"), dict) else None
        if pod_fixed is not None:
            _canonicalize_resource_map(pod_fixed)
    elif resource in ("pods", "daemonsets"):
        spec = obj.get("spec") or {}
        if resource == "daemonsets":
            spec = ((spec.get("template") or {}).get("spec")) or {}
        if isinstance(spec, dict):
            for res in _pod_spec_resources(spec):
                for field in ("limits", "requests"):
                    if res.get(field) is not None:
                        _canonicalize_resource_map(res[field])


def _drop_empty(mapping, *keys):
    for key in keys:
        if key in mapping and (mapping[key] is None or mapping[key] == {} or mapping[key] == []):
            del mapping[key]


# ---------------------------------------------------------------- defaulting

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
        for src in ("secret", "configMap"):
            if isinstance(vol.get(src), dict):
                vol[src].setdefault("defaultMode", 420)
    if is_pod:
        spec.setdefault("enableServiceLinks", True)
        spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
        spec.setdefault("priority", 0)
        spec.setdefault("serviceAccountName", "default")
        spec["serviceAccount"] = spec["serviceAccountName"]
        # DefaultTolerationSeconds admission
        tolerations = spec.setdefault("tolerations", [])
        keys = set((t.get("key"), t.get("effect")) for t in tolerations if isinstance(t, dict))
        for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
            if (key, "NoExecute") not in keys and not any(
                    isinstance(t, dict) and t.get("operator") == "Exists" and not t.get("key") for t in tolerations):
                tolerations.append({"key": key, "operator": "Exists", "effect": "NoExecute",
                                    "tolerationSeconds": 300})


def qos_class(spec):
    containers = [c for c in spec.get("containers") or [] if isinstance(c, dict)]
    requests_any = limits_any = False
    guaranteed = True
    for c in containers:
        res = c.get("resources") or {}
        limits, requests = res.get("limits") or {}, res.get("requests") or {}
        if limits or requests:
            requests_any = requests_any or bool(requests)
            limits_any = limits_any or bool(limits)
        for key in ("cpu", "memory"):
            if key not in limits or requests.get(key, limits.get(key)) != limits.get(key):
                guaranteed = False
    if not requests_any and not limits_any:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


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
        dra.default(resource, obj)
    elif resource == "namespaces":
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        obj.setdefault("status", {}).setdefault("phase", "Active")
        meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta.get("name", "")


def _admit_new_node(node):
    status = node.get("status") if isinstance(node.get("status"), dict) else {}
    if any(isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True"
           for c in status.get("conditions") or []):
        return
    spec = node.get("spec") if isinstance(node.get("spec"), dict) else None
    if spec is None:
        return
    taints = spec.get("taints") if isinstance(spec.get("taints"), list) else []
    if not any(isinstance(t, dict) and t.get("key") == "node.kubernetes.io/not-ready" for t in taints):
        spec["taints"] = taints + [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]


# ---------------------------------------------------------------- validation

def _validate_quantity_map(errors, prefix, mapping, bracket=False):
    for key in sorted(mapping or {}):
        field = "%s[%s]" % (prefix, key) if bracket else "%s.%s" % (prefix, key)
        value = mapping[key]
        amount, _fmt = parse_quantity(value)
        if amount < 0:
            errors.append(FieldError(field, "Invalid", "must be greater than or equal to 0", value))
        if is_integer_resource(key) and amount.denominator != 1:
            errors.append(FieldError(field, "Invalid", "must be an integer", value))


def _validate_resource_list(errors, path, mapping):
    # pkg/apis/core/validation/validation.go validateContainerResourceName: validateResourceName's error, then
    # the container rule's (both for a name without a domain that is no standard resource; measured on v1.36.2)
    for key in sorted(mapping):
        if "/" in key or key.startswith("hugepages-"):
            continue
        if key not in STANDARD_RESOURCES:
            errors.append(FieldError("%s[%s]" % (path, key), "Invalid",
                                     "must be a standard resource type or fully qualified", key))
        if key not in STANDARD_CONTAINER_RESOURCES:
            errors.append(FieldError("%s[%s]" % (path, key), "Invalid", "must be a standard resource for containers", key))
    _validate_quantity_map(errors, path, mapping, bracket=True)


def _validate_container_resources(errors, prefix, container):
    res = container.get("resources") or {}
    limits, requests = res.get("limits") or {}, res.get("requests") or {}
    for kind, mapping in (("limits", limits), ("requests", requests)):
        _validate_resource_list(errors, "%s.resources.%s" % (prefix, kind), mapping)
    for key in sorted(requests):
        overcommit = not (is_extended_resource_name(key) or key.startswith("hugepages-"))
        if key in limits:
            req_amount, lim_amount = parse_quantity(requests[key])[0], parse_quantity(limits[key])[0]
            if req_amount != lim_amount and not overcommit:
                errors.append(FieldError("%s.resources.requests" % prefix, "Invalid",
                                         "must be equal to %s limit of %s" % (key, limits[key]), requests[key]))
            elif req_amount > lim_amount:
                errors.append(FieldError("%s.resources.requests" % prefix, "Invalid",
                                         "must be less than or equal to %s limit of %s" % (key, limits[key]),
                                         requests[key]))
        elif not overcommit:
            errors.append(FieldError("%s.resources.limits" % prefix, "Required",
                                     "Limit must be set for non overcommitable resources"))


def _validate_pod_spec(errors, prefix, spec):
    containers = spec.get("containers")
    if not containers:
        errors.append(FieldError("%s.containers" % prefix, "Required", ""))
        return
    for i, c in enumerate(containers):
        cp = "%s.containers[%d]" % (prefix, i)
        if not isinstance(c, dict):
            continue
        if not c.get("name"):
            errors.append(FieldError("%s.name" % cp, "Required", ""))
        if not c.get("image"):
            errors.append(FieldError("%s.image" % cp, "Required", ""))
        _validate_container_resources(errors, cp, c)
    for i, c in enumerate(spec.get("initContainers") or []):
        if isinstance(c, dict):
            _validate_container_resources(errors, "%s.initContainers[%d]" % (prefix, i), c)


def _selector_matches(selector, labels):
    labels = labels or {}
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


POD_MUTABLE_SPEC = ("activeDeadlineSeconds", "terminationGracePeriodSeconds")

# apimachinery's IsDNS1123Label message (RegexError with its two examples, double space included).
DNS1123_LABEL_MESSAGE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end "
    "with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')")


def _validate_runtime_class(errors, obj, old):
    # RuntimeClass node.k8s.io/v1, as the Kubernetes API reference describes `handler`: "The Handler must be
    # lowercase, conform to the DNS Label (RFC 1123) requirements, and is immutable."
    # (https://kubernetes.io/docs/reference/kubernetes-api/cluster-resources/runtime-class-v1/). The apiserver
    # checks it with NameIsDNSLabel on every write and ValidateImmutableField on update, so a changed handler is
    # 422 Invalid "handler: Invalid value: ...: field is immutable". podFixed overhead is checked as container
    # limits are (field overhead.limits[<name>]); scheduling.nodeSelector and tolerations are not simulated.
    handler = obj.get("handler")
    text = handler if isinstance(handler, str) else ""
    if len(text) > 63:
        errors.append(FieldError("handler", "Invalid", "must be no more than 63 characters", text))
    if not _DNS_LABEL.match(text):
        errors.append(FieldError("handler", "Invalid", DNS1123_LABEL_MESSAGE, text))
    pod_fixed = (obj.get("overhead") or {}).get("podFixed") or {}
    _validate_resource_list(errors, "overhead.limits", pod_fixed)
    if old is not None and handler != old.get("handler"):
        errors.append(FieldError("handler", "Invalid", "field is immutable", text))


def validate_object(resource, obj, old=None):
    errors = []
    name = obj.get("metadata", {}).get("name", "")
    if resource == "nodes":
        status = obj.get("status") or {}
        for field in ("capacity", "allocatable"):
            _validate_quantity_map(errors, "status.%s" % field, status.get(field))
    elif resource == "pods":
        _validate_pod_spec(errors, "spec", obj.get("spec") or {})
        if old is not None and not errors:
            new_spec, old_spec = copy.deepcopy(obj.get("spec") or {}), copy.deepcopy(old.get("spec") or {})
            # pods written straight into the store (by the controllers) were never defaulted
            default_pod_spec(old_spec, True)
            # images, extra tolerations and the fields below may change on a running pod
            for spec in (new_spec, old_spec):
                for field in ("containers", "initContainers"):
                    for c in spec.get(field) or []:
                        if isinstance(c, dict):
                            c.pop("image", None)
                for field in POD_MUTABLE_SPEC + ("tolerations",):
                    spec.pop(field, None)
            old_tol = old.get("spec", {}).get("tolerations") or []
            new_tol = obj.get("spec", {}).get("tolerations") or []
            if new_spec != old_spec or any(t not in new_tol for t in old_tol):
                errors.append(FieldError(
                    "spec", "Forbidden",
                    "pod updates may not change fields other than `spec.containers[*].image`,"
                    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "
                    "(only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
                    "(allow it to be set to 1 if it was previously negative)"))
    elif resource == "daemonsets":
        spec = obj.get("spec") or {}
        selector = spec.get("selector")
        template = spec.get("template") or {}
        if not selector or not (selector.get("matchLabels") or selector.get("matchExpressions")):
            errors.append(FieldError("spec.selector", "Required", ""))
        elif not _selector_matches(selector, (template.get("metadata") or {}).get("labels")):
            errors.append(FieldError("spec.template.metadata.labels", "Invalid",
                                     "`selector` does not match template `labels`",
                                     (template.get("metadata") or {}).get("labels") or {}))
        if old is not None and selector != (old.get("spec") or {}).get("selector"):
            errors.append(FieldError("spec.selector", "Invalid", "field is immutable", selector))
        _validate_pod_spec(errors, "spec.template.spec", template.get("spec") or {})
    elif resource == "runtimeclasses":
        _validate_runtime_class(errors, obj, old)
    elif resource in dra.DRA_RESOURCES:
        errors.extend(FieldError(*e) for e in dra.validate(resource, obj, old))
    if errors:
        raise invalid_error(resource, name, errors)


# ---------------------------------------------------------------- strategy (create / update)

def prepare_for_create(resource, obj):
    if resource == "pods":
        obj["status"] = {"phase": "Pending", "qosClass": qos_class(obj.get("spec") or {})}
    elif resource == "daemonsets":
        obj["status"] = {"currentNumberScheduled": 0, "numberMisscheduled": 0,
                         "desiredNumberScheduled": 0, "numberReady": 0}
        obj["metadata"].setdefault("annotations", {})["deprecated.daemonset.template.generation"] = "1"
    elif resource == "namespaces":
        obj["status"] = {"phase": "Active"}


# pkg/registry/core/{node,pod,namespace}/strategy.go, pkg/registry/apps/daemonset/strategy.go: *StatusStrategy
STATUS_KEEPS_METADATA = frozenset(["nodes", "pods", "daemonsets", "namespaces"])


def prepare_for_update(resource, old, new, subresource):
    """Keep the part a given endpoint may not change (main resource: status; /status: the rest)."""
    if resource not in STATUS_RESOURCES:
        return new
    if subresource == "status":
        result = copy.deepcopy(old)
        if resource in STATUS_KEEPS_METADATA and isinstance(new.get("metadata"), dict):
            # the status strategies of these kinds copy only the old spec: labels and annotations written
            # through /status are stored (measured on v1.36.2); a pod keeps its ownerReferences
            result["metadata"] = copy.deepcopy(new["metadata"])
            if resource == "pods":
                result["metadata"].pop("ownerReferences", None)
                if old["metadata"].get("ownerReferences"):
                    result["metadata"]["ownerReferences"] = copy.deepcopy(old["metadata"]["ownerReferences"])
        result["metadata"]["resourceVersion"] = new.get("metadata", {}).get(
            "resourceVersion", old["metadata"]["resourceVersion"])
        if "status" in new:
            result["status"] = new["status"]
        else:
            result.pop("status", None)
        return result
    if "status" in old:
        new["status"] = copy.deepcopy(old["status"])
    else:
        new.pop("status", None)
    if resource == "daemonsets":
        old_template = (old.get("spec") or {}).get("template")
        new_template = (new.get("spec") or {}).get("template")
        annotations = new.setdefault("metadata", {}).setdefault("annotations", {})
        current = (old["metadata"].get("annotations") or {}).get("deprecated.daemonset.template.generation", "1")
        annotations["deprecated.daemonset.template.generation"] = (
            str(int(current) + 1) if old_template != new_template else current)
    if resource == "namespaces":
        new["spec"] = copy.deepcopy(old.get("spec", {}))
    return new


# ---------------------------------------------------------------- patches

MERGE_KEYS = {
    "containers": "name", "initContainers": "name", "ephemeralContainers": "name",
    "env": "name", "volumes": "name", "volumeMounts": "mountPath", "volumeDevices": "devicePath",
    "ports": "containerPort", "imagePullSecrets": "name", "conditions": "type", "addresses": "type",
    "ownerReferences": "uid", "hostAliases": "ip", "topologySpreadConstraints": "topologyKey",
}
MERGE_PRIMITIVE_LISTS = frozenset(["finalizers"])


def merge_patch(target, patch):
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        target = {}
    result = copy.deepcopy(target)
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge(target, patch):
    """Strategic merge patch for the fields kubehw uses (merge keys of the core types)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        out = dict((k, v) for k, v in patch.items() if k != "$patch")
        return copy.deepcopy(out)
    if patch.get("$patch") == "delete":
        return None
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key in ("$retainKeys", "$patch"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if isinstance(result.get(field), list):
                result[field] = [v for v in result[field] if v not in (value or [])]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            merged = strategic_merge(result.get(key), value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list) and key in MERGE_KEYS:
            result[key] = _merge_list(result.get(key), value, MERGE_KEYS[key])
        elif isinstance(value, list) and key in MERGE_PRIMITIVE_LISTS:
            current = list(result.get(key) or [])
            result[key] = current + [v for v in value if v not in current]
        else:
            result[key] = copy.deepcopy(value)
    return result


def _merge_list(current, patch, merge_key):
    current = copy.deepcopy(current) if isinstance(current, list) else []
    if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
        return [copy.deepcopy(p) for p in patch if not (isinstance(p, dict) and "$patch" in p)]
    for item in patch:
        if not isinstance(item, dict):
            continue
        key_value = item.get(merge_key)
        index = next((i for i, c in enumerate(current) if isinstance(c, dict) and c.get(merge_key) == key_value), None)
        if item.get("$patch") == "delete":
            if index is not None:
                del current[index]
            continue
        if index is None:
            current.append(strategic_merge({}, item))
        else:
            current[index] = strategic_merge(current[index], item)
    return current


def _lenient_json_patch(ops, doc):
    """`replace` of a missing key inside an existing map adds it, as the apiserver does."""
    result = []
    for op in ops:
        if isinstance(op, dict) and op.get("op") == "replace" and isinstance(op.get("path"), str):
            try:
                pointer = jsonpatch.JsonPointer(op["path"])
                parent_parts, last = pointer.parts[:-1], pointer.parts[-1] if pointer.parts else None
                parent = jsonpatch.JsonPointer.from_parts(parent_parts).resolve(doc) if pointer.parts else None
            except (jsonpatch.JsonPointerException, KeyError, IndexError, TypeError):
                parent = None
            if isinstance(parent, dict) and last not in parent:
                op = dict(op, op="add")
        result.append(op)
    return result


def apply_json_patch(body_text, doc):
    try:
        ops = json.loads(body_text)
    except ValueError as e:
        raise bad_request("error decoding patch: %s" % e)
    if isinstance(ops, dict):
        raise bad_request("error decoding patch: json: cannot unmarshal object into Go value of type "
                          "[]handlers.jsonPatchOp")
    if not isinstance(ops, list):
        raise bad_request("error decoding patch: json: cannot unmarshal %s into Go value of type "
                          "[]handlers.jsonPatchOp" % ("string" if isinstance(ops, str) else "number"))
    # replay op by op so a replace-of-missing-key sees the state the earlier ops left
    current = doc
    for op in ops:
        if not isinstance(op, dict):
            raise bad_request("error decoding patch: json: cannot unmarshal %s into Go struct field "
                              "jsonPatchOp of type map" % type(op).__name__)
        try:
            current = jsonpatch.JsonPatch(_lenient_json_patch([op], current)).apply(current)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, KeyError, IndexError, TypeError):
            raise generic_422()
    return current


# ---------------------------------------------------------------- server

# Fault kinds beyond an HTTP status. Each applies only to the verbs named here.
#   "drop": close the connection before doing anything (any verb)
#   "commit-504", "commit-drop": do the write, store it, then answer 504 Timeout / drop the connection
#   "too-large-rv": a list answers 504 ResourceVersionTooLarge (a lagging apiserver behind a load balancer)
#   "continue-expired": a list that sends a continue token answers 410 Expired
#   "watch-expired", "watch-too-large": a watch answers 200 and one ERROR event (410 / 504), then ends
FAULT_VERBS = {
    "commit-504": ("create", "update", "patch"),
    "commit-drop": ("create", "update", "patch"),
    "too-large-rv": ("list",),
    "continue-expired": ("list",),
    "watch-expired": ("watch",),
    "watch-too-large": ("watch",),
}

# The apiserver's text for a write whose storage call outlived the request deadline
# (k8s.io/apiserver endpoints/handlers/finisher, v1.32).
COMMIT_TIMEOUT_MESSAGE = "Timeout: request did not complete within requested timeout - context deadline exceeded"
# k8s.io/apiserver/pkg/storage/etcd3/store.go (v1.32), for a continue token older than the compaction.
CONTINUE_EXPIRED_MESSAGE = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new list "
    "without the continue parameter, or use the continue token in this response to retrieve the remainder of the "
    "results. Continuing with the provided token results in an inconsistent list - objects that were created, "
    "modified, or deleted between the time the first chunk was returned and now may show up in the list.")


def too_large_rv(asked, current):
    """504 as measured on v1.32 for a list at a resourceVersion ahead of the server's."""
    return StoreError(504, "Timeout", "Timeout: Too large resource version: %s, current: %s" % (asked, current),
                      {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                       "retryAfterSeconds": 1})


class Fault:
    def __init__(self, method, path_regex, status, count, retry_after):
        self.method = (method or "*").upper()
        self.regex = re.compile(path_regex)
        self.status = status
        self.count = count
        self.retry_after = retry_after

    def matches(self, method, path, verb=None, query=None):
        if not ((self.method in ("*", method)) and self.regex.search(path) is not None):
            return False
        verbs = FAULT_VERBS.get(self.status)
        if verbs is not None and verb not in verbs:
            return False
        if self.status == "continue-expired" and not (query or {}).get("continue"):
            return False
        return True


class Request:
    def __init__(self, method, path, query, headers, body, peer_cert=None):
        self.peer_cert = peer_cert
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.content_type = (headers.get("Content-Type") or "").split(";")[0].strip().lower()

    def q(self, name, default=None):
        values = self.query.get(name)
        return values[-1] if values else default

    def flag(self, name):
        return (self.q(name) or "").lower() in ("true", "1")


class Streamed:
    """A watch answer: written by the handler thread."""

    def __init__(self, watch, resource, timeout, bookmarks, error=None):
        self.watch = watch
        self.resource = resource
        self.timeout = timeout
        self.bookmarks = bookmarks
        self.error = error


class ApiServer:
    """The routing and REST semantics; wired to a TLS ThreadingHTTPServer by start()."""

    def __init__(self, store, authenticator, ssl_context=None, host="127.0.0.1", port=0,
                 bookmark_interval=5.0, admin_hooks=None):
        self.store = store
        # auth.Authenticator: bearer tokens (admin + config), anonymous, impersonation
        self.authenticator = authenticator
        self.admin_token = authenticator.admin_token
        self.ssl_context = ssl_context
        self.host = host
        self.port = port
        self.bookmark_interval = bookmark_interval
        self.admin_hooks = admin_hooks or {}
        self._faults = []
        self._list_snapshots = {}   # continue token -> (items, resourceVersion, offset of the next page)
        self._log = []
        self._lock = threading.Lock()
        self._httpd = None
        self._thread = None

    # -- lifecycle
    @property
    def url(self):
        scheme = "https" if self.ssl_context else "http"
        return "%s://%s:%d" % (scheme, self.host, self.port)

    def start(self):
        self._httpd = _HTTPServer((self.host, self.port), _Handler, self)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="simcluster-api",
                                        kwargs={"poll_interval": 0.02}, daemon=True)
        self._thread.start()

    def stop(self):
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self.store.close_watches()
        self._httpd.server_close()
        self._httpd.close_all()
        self._thread.join(5)
        self._httpd = None

    # -- request log and faults
    @property
    def requests(self):
        with self._lock:
            return [dict(e) for e in self._log]

    def clear_requests(self):
        with self._lock:
            del self._log[:]

    def inject_fault(self, method, path_regex, status=500, count=1, retry_after=None):
        if status != "drop" and status not in FAULT_VERBS and status not in (409, 429, 500, 502, 503, 504):
            raise ValueError("status must be 409, 429, 500, 502, 503, 504, 'drop' or one of %s, got %r"
                             % (", ".join(sorted(FAULT_VERBS)), status))
        with self._lock:
            self._faults.append(Fault(method, path_regex, status, int(count), retry_after))

    def clear_faults(self):
        with self._lock:
            del self._faults[:]

    def pending_faults(self):
        """The injected faults not yet used up: [{method, path_regex, status, count}]."""
        with self._lock:
            return [{"method": f.method, "path_regex": f.regex.pattern, "status": f.status, "count": f.count}
                    for f in self._faults]

    def _take_fault(self, method, path, verb=None, query=None):
        with self._lock:
            for fault in self._faults:
                if fault.count > 0 and fault.matches(method, path, verb, query):
                    fault.count -= 1
                    if fault.count == 0:
                        self._faults.remove(fault)
                    return fault
        return None

    def _log_request(self, req):
        entry = {"method": req.method, "path": req.path,
                 "query": dict((k, v[-1]) for k, v in req.query.items()),
                 "content_type": req.content_type or None,
                 "body": req.body.decode("utf-8", "replace") if req.body else None,
                 "status": None, "user": None, "time": time.time()}
        with self._lock:
            self._log.append(entry)
        return entry

    def _finish_log(self, entry, status, user):
        with self._lock:
            entry["status"] = status
            entry["user"] = user

    # -- entry point from the handler
    def handle(self, req):
        """Return (code, body, headers) or a Streamed, or "drop"."""
        if req.path.startswith("/simcluster/"):
            return self._admin(req)
        entry = self._log_request(req)
        user_name = None
        try:
            user, error = self.authenticator.identify(self.store, req.headers, peer_cert=req.peer_cert)
            if error is not None:
                result = (error[0], error[1], {})
            else:
                user_name = _user_name(user)
                result = self._authorized(req, user)
        except StoreError as e:
            # the apiserver copies details.retryAfterSeconds into a Retry-After header (responsewriters)
            retry = (e.details or {}).get("retryAfterSeconds") if isinstance(e.details, dict) else None
            result = (e.code, e.status(), {"Retry-After": str(retry)} if retry else {})
        code = result if isinstance(result, str) else (200 if isinstance(result, Streamed) else result[0])
        self._finish_log(entry, code, user_name)
        return result

    def _authorized(self, req, user):
        route = self._route(req)
        if route is None:
            # a non-resource request's verb is the lowercased HTTP method, GET is "get", never "list"
            # (staging/src/k8s.io/apiserver/pkg/endpoints/request/requestinfo.go, NewRequestInfo)
            verb = req.method.lower()
            allowed, reason = auth.authorize_path(self.store, user, verb, req.path)
            if not allowed:
                return (403, auth.forbidden_path_status(user, verb, req.path, reason), {})
            return self._non_resource(req, user)
        resource, namespace, name, sub, verb = route
        allowed, reason = auth.authorize(self.store, user, verb, resource, sub or "", namespace, name)
        if not allowed:
            return (403, auth.forbidden_status(user, verb, resource, sub or "", None, namespace, name, reason), {})
        fault = self._take_fault(req.method, req.path, verb, req.query)
        if fault is not None and fault.status not in FAULT_VERBS:
            return self._fault_answer(fault, resource, name)
        if fault is not None and fault.status in ("watch-expired", "watch-too-large"):
            since = req.q("resourceVersion") or self.store.resource_version
            error = (StoreError(410, "Expired", "too old resource version: %s (%s)"
                                % (since, int(self.store.resource_version) + 1))
                     if fault.status == "watch-expired" else too_large_rv(since, self.store.resource_version))
            return Streamed(None, resource, 0, False, error=error)
        if fault is not None and fault.status == "too-large-rv":
            raise too_large_rv(int(self.store.resource_version) + 1000, self.store.resource_version)
        if fault is not None and fault.status == "continue-expired":
            raise StoreError(410, "Expired", CONTINUE_EXPIRED_MESSAGE)
        result = dra.around(self, req, resource,
                            lambda r: self._resource(r, resource, namespace, name, sub, verb))
        if fault is not None and isinstance(result, tuple) and 200 <= result[0] < 300:
            # "commit-504" / "commit-drop": the write is stored; only its answer is lost
            if fault.status == "commit-drop":
                return "drop"
            return (504, status_body(504, "Timeout", COMMIT_TIMEOUT_MESSAGE, {}), {})
        return result

    def _fault_answer(self, fault, resource=None, name=None):
        if fault.status == "drop":
            return "drop"
        if fault.status == 409:
            # what a concurrent writer causes: the apiserver's optimistic-concurrency conflict
            return (409, status_body(409, "Conflict", 'Operation cannot be fulfilled on %s "%s": the object has been '
                                     'modified; please apply your changes to the latest version and try again'
                                     % (resource, name), {"name": name, "kind": resource}), {})
        reasons = {429: ("TooManyRequests", "Too many requests, please try again later."),
                   500: ("InternalError", "Internal error occurred: injected fault"),
                   502: ("InternalError", "Bad gateway (injected fault)"),
                   503: ("ServiceUnavailable", "The server is currently unable to handle the request"),
                   504: ("Timeout", "The server was unable to return a response in the time allotted")}
        reason, message = reasons[fault.status]
        headers = {}
        details = None
        if fault.retry_after is not None:
            headers["Retry-After"] = str(fault.retry_after)
            details = {"retryAfterSeconds": int(fault.retry_after)}
        return (fault.status, status_body(fault.status, reason, message, details), headers)

    # -- non-resource paths
    def _non_resource(self, req, user):
        fault = self._take_fault(req.method, req.path)
        if fault is not None:
            return self._fault_answer(fault)
        if req.method != "GET":
            raise StoreError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        path = req.path.rstrip("/") or "/"
        if path in ("/healthz", "/readyz", "/livez"):
            return (200, "ok", {})
        if path == "/version":
            return (200, {"major": "1", "minor": "32", "gitVersion": "v1.32.0-simcluster",
                          "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
                          "buildDate": "2024-12-11T00:00:00Z", "goVersion": "go1.23.4", "compiler": "gc",
                          "platform": "linux/amd64"}, {})
        answer = openapi.answer(path, lambda resource, version: dra.version_served(self, resource, version))
        if answer is not None:
            return answer
        if path == "/api":
            return (200, {"kind": "APIVersions", "versions": ["v1"],
                          "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0",
                                                          "serverAddress": "%s:%d" % (self.host, self.port)}]}, {})
        answer = dra.discovery(self, path)
        if answer is not None:
            return answer
        if path == "/apis":
            return (200, {"kind": "APIGroupList", "apiVersion": "v1",
                          "groups": [self._group(g) for g in self._groups() if g]}, {})
        parts = [p for p in path.split("/") if p]
        if parts == ["api", "v1"]:
            return (200, self._resource_list("", "v1"), {})
        if len(parts) == 2 and parts[0] == "apis" and parts[1] in self._groups():
            body = self._group(parts[1])
            body.update({"kind": "APIGroup", "apiVersion": "v1"})
            return (200, body, {})
        if len(parts) == 3 and parts[0] == "apis" and parts[1] in self._groups() and parts[2] == "v1":
            return (200, self._resource_list(parts[1], "v1"), {})
        raise StoreError(404, "NotFound", "the server could not find the requested resource", {})

    @staticmethod
    def _groups():
        out = []
        for group, _v, _k, _n, _s in RESOURCES.values():
            if group not in out:
                out.append(group)
        return out

    @staticmethod
    def _group(group):
        gv = {"groupVersion": "%s/v1" % group, "version": "v1"}
        return {"name": group, "versions": [gv], "preferredVersion": gv}

    @staticmethod
    def _resource_list(group, version):
        resources = []
        for plural, (g, v, kind, namespaced, short) in RESOURCES.items():
            if g != group or v != version:
                continue
            verbs = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
            entry = {"name": plural, "singularName": kind.lower(), "namespaced": namespaced, "kind": kind,
                     "verbs": verbs}
            if short:
                entry["shortNames"] = short
            resources.append(entry)
            if plural in STATUS_RESOURCES:
                resources.append({"name": plural + "/status", "singularName": "", "namespaced": namespaced,
                                  "kind": kind, "verbs": ["get", "patch", "update"]})
        return {"kind": "APIResourceList", "apiVersion": "v1",
                "groupVersion": "%s/%s" % (group, version) if group else version, "resources": resources}

    # -- resource routing
    def _route(self, req):
        parts = [urllib.parse.unquote(p) for p in req.path.split("/") if p]
        if not parts:
            return None
        if parts[0] == "api" and len(parts) >= 3:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[0] == "apis" and len(parts) >= 4:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        watch_path = False
        if rest and rest[0] == "watch":
            watch_path, rest = True, rest[1:]
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] in RESOURCES and is_namespaced(rest[2]):
            namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise StoreError(404, "NotFound", "the server could not find the requested resource", {})
        resource = rest[0]
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        spec = RESOURCES.get(resource)
        if spec is None or spec[0] != group or not dra.version_served(self, resource, version):
            raise StoreError(404, "NotFound", "the server could not find the requested resource", {})
        if namespace is not None and not spec[3]:
            raise StoreError(404, "NotFound", "the server could not find the requested resource", {})
        pod_log = sub == "log" and resource == "pods" and req.method == "GET"
        # TokenRequest (tests/simcluster/tokenrequest.py): POST only, authorized as create serviceaccounts/token
        if sub == "token" and resource == "serviceaccounts" and req.method == "POST" and namespace is not None:
            return resource, namespace, name, sub, "create"
        # the Eviction subresource (tests/simcluster/eviction.py): POST only, authorized as create pods/eviction
        eviction = sub == "eviction" and resource == "pods" and req.method == "POST" and namespace is not None
        if eviction:
            return resource, namespace, name, sub, "create"
        if sub is not None and not pod_log and not (sub == "status" and resource in STATUS_RESOURCES):
            raise StoreError(404, "NotFound", "the server could not find the requested resource", {})
        method = req.method
        if method == "GET":
            if name is None:
                verb = "watch" if (watch_path or req.flag("watch")) else "list"
            else:
                verb = "watch" if watch_path else "get"
        elif method == "POST":
            if name is not None or (spec[3] and namespace is None):
                raise StoreError(405, "MethodNotAllowed",
                                 "the server does not allow this method on the requested resource")
            verb = "create"
        elif method == "PUT":
            verb = "update"
        elif method == "PATCH":
            verb = "patch"
        elif method == "DELETE":
            verb = "delete" if name is not None else "deletecollection"
        else:
            raise StoreError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        if verb in ("update", "patch") and name is None:
            raise StoreError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        return resource, namespace, name, sub, verb

    def _resource(self, req, resource, namespace, name, sub, verb):
        if sub == "eviction":
            return eviction.evict(self, req, namespace, name, _selector_matches)
        if sub == "token":
            return tokenrequest.create_token(self, req, namespace, name)
        handler = getattr(self, "_do_" + verb)
        return handler(req, resource, namespace, name, sub)

    # -- verbs
    def _do_get(self, req, resource, namespace, name, sub):
        obj = self.store.get(resource, namespace, name)
        if obj is None:
            raise not_found(resource, name)
        if sub == "log":
            return self._pod_log(obj)
        return (200, obj, {})

    @staticmethod
    def _pod_log(pod):
        """A simulated container prints nothing; one that never started has no log, as on a kubelet."""
        statuses = (pod.get("status") or {}).get("containerStatuses") or []
        container = ((pod.get("spec") or {}).get("containers") or [{}])[0].get("name")
        started = any("running" in (st.get("state") or {}) or "terminated" in (st.get("state") or {})
                      for st in statuses)
        if not started:
            reason = "ContainerCreating"
            for st in statuses:
                reason = ((st.get("state") or {}).get("waiting") or {}).get("reason") or reason
            raise StoreError(400, "BadRequest", 'container "%s" in pod "%s" is waiting to start: %s' % (
                container, pod["metadata"]["name"], reason))
        return (200, "", {})

    def _do_list(self, req, resource, namespace, name, sub):
        token = req.q("continue")
        asked_rv = req.q("resourceVersion")
        try:
            limit = int(req.q("limit") or 0)
        except ValueError:
            raise bad_request("invalid limit %r" % req.q("limit"))
        if token:
            if asked_rv not in (None, "", "0"):
                raise bad_request("specifying resource version is not allowed when using continue")
            items, rv, offset = self._continued_list(token)
        else:
            if asked_rv not in (None, "", "0"):
                try:
                    ahead = int(asked_rv) > int(self.store.resource_version)
                except ValueError:
                    raise bad_request('invalid resource version: strconv.ParseUint: parsing "%s": invalid syntax'
                                      % asked_rv)
                if ahead:
                    raise too_large_rv(asked_rv, self.store.resource_version)
            items, rv = self.store.list(resource, namespace, req.q("labelSelector"), req.q("fieldSelector"))
            offset = 0
        for item in items:
            # list items carry no type meta on the wire
            item.pop("kind", None)
            item.pop("apiVersion", None)
        metadata = {"resourceVersion": rv}
        if limit > 0 and len(items) - offset > limit:
            page = items[offset:offset + limit]
            next_offset = offset + limit
            last = page[-1]["metadata"]
            start = "%s/%s" % (last.get("namespace") or "", last["name"])
            # the apiserver's token is base64 JSON {"v", "rv", "start"}; the rest of this snapshot is kept here
            metadata["continue"] = base64.urlsafe_b64encode(json.dumps(
                {"v": "meta.k8s.io/v1", "rv": int(rv), "start": start + "\u0000"}).encode("utf-8")).decode("ascii")
            with self._lock:
                self._list_snapshots[metadata["continue"]] = (items, rv, next_offset)
                while len(self._list_snapshots) > 64:
                    self._list_snapshots.pop(next(iter(self._list_snapshots)))
            if not req.q("labelSelector") and not req.q("fieldSelector"):
                # remainingItemCount is left out when the list has a selector (ListMeta docs)
                metadata["remainingItemCount"] = len(items) - next_offset
            items = page
        else:
            items = items[offset:]
        return (200, {"kind": kind_of(resource) + "List", "apiVersion": api_version(resource),
                      "metadata": metadata, "items": items}, {})

    def _continued_list(self, token):
        """(all items of the first page's snapshot, its resourceVersion, offset of the next page)."""
        try:
            decoded = json.loads(base64.urlsafe_b64decode(token.encode("ascii")).decode("utf-8"))
            token_rv = int(decoded["rv"])
        except (ValueError, KeyError, TypeError, UnicodeError):
            raise bad_request("continue key is not valid: incorrect encoded start resourceVersion (version "
                              "meta.k8s.io/v1)")
        with self._lock:
            snapshot = self._list_snapshots.get(token)
        if snapshot is None or token_rv <= self.store.compacted_resource_version:
            # etcd no longer has the revision the list started at
            raise StoreError(410, "Expired", CONTINUE_EXPIRED_MESSAGE)
        items, rv, offset = snapshot
        # the snapshot's items are the store's copies, never changed after the first page: only the list
        # is copied (copying every item again made each page of a 5,000-node list cost as much as the first)
        return list(items), rv, offset

    def _do_watch(self, req, resource, namespace, name, sub):
        field_selector = req.q("fieldSelector")
        if name is not None:
            field_selector = ",".join(x for x in (field_selector, "metadata.name=%s" % name) if x)
        try:
            timeout = float(req.q("timeoutSeconds")) if req.q("timeoutSeconds") else 1800.0
        except ValueError:
            raise bad_request("invalid timeoutSeconds")
        try:
            watch = self.store.watch(resource, namespace, req.q("resourceVersion"), req.q("labelSelector"),
                                     field_selector)
        except StoreError as e:
            if e.code != 410:
                raise
            # the watch cache answers 200 and one ERROR event with the 410 Status
            return Streamed(None, resource, timeout, False, error=e)
        return Streamed(watch, resource, timeout, req.flag("allowWatchBookmarks"))

    def _read_body(self, req, resource):
        if req.content_type and req.content_type not in ("application/json", "application/yaml"):
            raise StoreError(415, "UnsupportedMediaType",
                             'the body of the request was in an unknown format - accepted media types include: '
                             'application/json, application/yaml')
        if req.content_type == "application/yaml":
            import yaml
            try:
                body = yaml.safe_load(req.body.decode("utf-8")) if req.body else None
            except yaml.YAMLError as e:
                raise bad_request("error decoding request body: %s" % e)
            req = Request(req.method, req.path, req.query, req.headers, json.dumps(body).encode("utf-8"))
        try:
            body = json.loads(req.body.decode("utf-8") if req.body else "")
        except ValueError as e:
            raise bad_request("error decoding request body: %s" % e)
        if not isinstance(body, dict):
            raise bad_request("the body of the request was in an unknown format - accepted media types include: "
                              "application/json, application/yaml, application/vnd.kubernetes.protobuf")
        try:
            decode_object(resource, body)
        except QuantityError as e:
            raise bad_request('%s in version "%s" cannot be handled as a %s: %s'
                              % (kind_of(resource), RESOURCES[resource][1], kind_of(resource), e))
        return body

    def _do_create(self, req, resource, namespace, name, sub):
        body = self._read_body(req, resource)
        warnings = openapi.check_fields(resource, body, openapi.directive(req))
        meta = body.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise bad_request("metadata must be an object")
        if namespace is not None:
            if meta.get("namespace") and meta["namespace"] != namespace:
                raise bad_request("the namespace of the provided object does not match the namespace sent on the "
                                  "request")
            meta["namespace"] = namespace
        meta.pop("resourceVersion", None)
        default_object(resource, body, True)
        if resource == "nodes":
            # the NodeTaint admission plugin (plugin/pkg/admission/nodetaint) taints every new node not-ready;
            # the node lifecycle controller removes it once the node is Ready (measured on v1.36.2).
            # Simplified: a node created Ready is left alone, since nothing here would remove the taint.
            _admit_new_node(body)
        if resource == "pods":
            # admission runs before validation, for dry runs too (ServiceAccount before RuntimeClass)
            refusal = missing_service_account(self.store, body) or missing_runtime_class(self.store, body)
            if refusal is not None:
                raise refusal
        prepare_for_create(resource, body)
        validate_object(resource, body)
        if req.q("dryRun"):
            if self.store.get(resource, namespace, meta.get("name", "")) is not None:
                raise already_exists(resource, meta.get("name"))
            body["apiVersion"], body["kind"] = api_version(resource), kind_of(resource)
            meta.setdefault("creationTimestamp", now_rfc3339())
            return (201, body, {"Warning": warnings} if warnings else {})
        return (201, self.store.create(resource, body), {"Warning": warnings} if warnings else {})

    def _write(self, req, resource, namespace, name, compute):
        """Run compute(current) -> new under the store lock; common checks for update and patch."""
        dry_run = bool(req.q("dryRun"))
        result = {}

        def fn(obj):
            old = copy.deepcopy(obj)
            new = compute(copy.deepcopy(obj))
            meta = new.setdefault("metadata", {})
            if not isinstance(meta, dict):
                raise bad_request("metadata must be an object")
            if meta.get("name") not in (None, name):
                raise bad_request("the name of the object (%s) does not match the name on the URL (%s)"
                                  % (meta.get("name"), name))
            rv = meta.get("resourceVersion")
            if rv not in (None, "") and rv != old["metadata"]["resourceVersion"]:
                raise conflict(resource, name)
            meta["resourceVersion"] = old["metadata"]["resourceVersion"]
            default_object(resource, new, False)
            validate_object(resource, new, old)
            result["obj"] = new
            if not dry_run:
                obj.clear()
                obj.update(new)

        if dry_run:
            current = self.store.get(resource, namespace, name)
            if current is None:
                raise not_found(resource, name)
            fn(current)
            return (200, result["obj"], {})
        new = self.store.mutate(resource, namespace, name, fn)
        if new is None:
            raise not_found(resource, name)
        return (200, new, {})

    def _do_update(self, req, resource, namespace, name, sub):
        body = self._read_body(req, resource)
        warnings = openapi.check_fields(resource, body, openapi.directive(req))
        if namespace is not None and (body.get("metadata") or {}).get("namespace") not in (None, namespace):
            raise bad_request("the namespace of the provided object does not match the namespace sent on the request")

        def compute(current):
            return prepare_for_update(resource, current, copy.deepcopy(body), sub)
        code, obj, headers = self._write(req, resource, namespace, name, compute)
        return (code, obj, dict(headers, Warning=warnings) if warnings else headers)

    def _do_patch(self, req, resource, namespace, name, sub):
        ctype = req.content_type
        if ctype not in PATCH_TYPES:
            raise StoreError(415, "UnsupportedMediaType",
                             "the body of the request was in an unknown format - accepted media types include: "
                             "application/json-patch+json, application/merge-patch+json, "
                             "application/strategic-merge-patch+json")
        text = req.body.decode("utf-8") if req.body else ""
        if ctype != "application/json-patch+json":
            try:
                patch = json.loads(text)
            except ValueError as e:
                raise bad_request("error decoding patch: %s" % e)
            if not isinstance(patch, dict):
                raise bad_request("error decoding patch: json: cannot unmarshal %s into Go value of type "
                                  "map[string]interface {}" % ("array" if isinstance(patch, list) else "string"))

        def compute(current):
            if ctype == "application/json-patch+json":
                patched = apply_json_patch(text, current)
            elif ctype == "application/merge-patch+json":
                patched = merge_patch(current, patch)
            else:
                patched = strategic_merge(current, patch)
            if not isinstance(patched, dict):
                raise generic_422()
            warnings.extend(openapi.check_fields(resource, patched, openapi.directive(req)))
            try:
                decode_object(resource, patched)
            except QuantityError as e:
                raise invalid_error(None, "", [FieldError(
                    "patch", "Invalid", str(e), json.dumps(patched, separators=(",", ":")))])
            return prepare_for_update(resource, current, patched, sub)
        warnings = []
        code, obj, headers = self._write(req, resource, namespace, name, compute)
        return (code, obj, dict(headers, Warning=warnings) if warnings else headers)

    def _delete_options(self, req):
        opts = {}
        if req.body:
            try:
                opts = json.loads(req.body.decode("utf-8")) or {}
            except ValueError as e:
                raise bad_request("error decoding DeleteOptions: %s" % e)
        for key in ("propagationPolicy", "gracePeriodSeconds", "dryRun"):
            if req.q(key) is not None:
                opts[key] = req.q(key)
        return opts

    def _do_delete(self, req, resource, namespace, name, sub):
        if sub:
            raise StoreError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        opts = self._delete_options(req)
        current = self.store.get(resource, namespace, name)
        if current is None:
            raise not_found(resource, name)
        pre = opts.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != current["metadata"]["uid"]:
            raise StoreError(409, "Conflict", 'Operation cannot be fulfilled on %s "%s": Precondition failed: '
                             "UID in precondition: %s, UID in object meta: %s"
                             % (group_resource(resource), name, pre["uid"], current["metadata"]["uid"]),
                             {"name": name, "kind": resource})
        if pre.get("resourceVersion") and pre["resourceVersion"] != current["metadata"]["resourceVersion"]:
            raise conflict(resource, name)
        if opts.get("dryRun"):
            return (200, current, {})
        obj = self.delete_object(resource, namespace, name, opts)
        if obj is None:
            raise not_found(resource, name)
        if resource in ("pods", "namespaces", "nodes") or obj["metadata"].get("deletionTimestamp"):
            return (200, obj, {})
        details = {"name": name, "kind": resource, "uid": obj["metadata"]["uid"]}
        if RESOURCES[resource][0]:
            details["group"] = RESOURCES[resource][0]
        return (200, status_body(200, None, None, details, status="Success"), {})

    def _do_deletecollection(self, req, resource, namespace, name, sub):
        opts = self._delete_options(req)
        items, rv = self.store.list(resource, namespace, req.q("labelSelector"), req.q("fieldSelector"))
        deleted = []
        for item in items:
            if opts.get("dryRun"):
                deleted.append(item)
                continue
            obj = self.delete_object(resource, item["metadata"].get("namespace"), item["metadata"]["name"], opts)
            if obj is not None:
                obj.pop("kind", None)
                obj.pop("apiVersion", None)
                deleted.append(obj)
        return (200, {"kind": kind_of(resource) + "List", "apiVersion": api_version(resource),
                      "metadata": {"resourceVersion": self.store.resource_version}, "items": deleted}, {})

    def delete_object(self, resource, namespace, name, opts=None):
        """Delete as the apiserver + garbage collector would; returns the last state or None."""
        opts = opts or {}
        current = self.store.get(resource, namespace, name)
        if current is None:
            return None
        grace = opts.get("gracePeriodSeconds")
        grace = int(grace) if grace not in (None, "") else None
        if resource == "pods":
            grace = pod_grace_period(current, grace)
        if current["metadata"].get("finalizers"):
            obj = self.store.mark_deleting(resource, namespace, name, grace)
        elif resource == "pods" and self.store.graceful_pod_delete and grace > 0:
            obj = self.store.mark_deleting(resource, namespace, name, grace)
        elif resource == "pods":
            # grace 0: the registry still writes deletionTimestamp (a MODIFIED event), then removes the pod in the
            # same request (DELETED); the reply is the removed pod, deletionGracePeriodSeconds 0
            self.store.mark_deleting(resource, namespace, name, 0)
            obj = self.store.delete(resource, namespace, name)
        else:
            obj = self.store.delete(resource, namespace, name)
        if obj is None:
            return None
        if resource == "namespaces":
            for res in RESOURCES:
                if is_namespaced(res):
                    for item in self.store.list(res, name)[0]:
                        self.delete_object(res, name, item["metadata"]["name"], {"gracePeriodSeconds": 0})
        if opts.get("propagationPolicy") != "Orphan":
            for res, ns, dep in self.store.dependents(obj["metadata"]["uid"]):
                self.delete_object(res, ns, dep, {"propagationPolicy": opts.get("propagationPolicy")})
        return obj

    # -- admin endpoints (admin token only)
    def _admin(self, req):
        auth = req.headers.get("Authorization") or ""
        if auth != "Bearer %s" % self.admin_token:
            return (401, status_body(401, "Unauthorized", "Unauthorized"), {})
        parts = [p for p in req.path.split("/") if p][1:]
        try:
            payload = json.loads(req.body.decode("utf-8")) if req.body else {}
        except ValueError as e:
            return (400, status_body(400, "BadRequest", "invalid JSON body: %s" % e), {})
        if parts == ["requests"] and req.method == "GET":
            return (200, {"requests": self.requests}, {})
        if parts == ["requests"] and req.method == "DELETE":
            self.clear_requests()
            return (200, {"cleared": True}, {})
        if parts == ["faults"] and req.method == "POST":
            try:
                self.inject_fault(payload.get("method", "*"), payload["path_regex"], payload.get("status", 500),
                                  payload.get("count", 1), payload.get("retry_after"))
            except (KeyError, ValueError, re.error) as e:
                return (400, status_body(400, "BadRequest", "bad fault: %s" % e), {})
            return (201, {"injected": payload}, {})
        if parts == ["faults"] and req.method == "DELETE":
            self.clear_faults()
            return (200, {"cleared": True}, {})
        if len(parts) == 3 and parts[0] == "nodes" and req.method == "POST" and \
                parts[2] in ("unreachable", "fail-pods"):
            hook = self.admin_hooks.get(parts[2])
            if hook is None:
                return (501, status_body(501, "NotImplemented", "no controllers running"), {})
            if parts[2] == "unreachable":
                hook(parts[1], payload.get("unreachable", True))
            else:
                hook(parts[1], payload.get("reason", "ImagePullBackOff"))
            return (200, {"node": parts[1], parts[2]: payload or True}, {})
        if parts == ["compact"] and req.method == "POST":
            self.store.compact(expire_watches=bool(payload.get("expire_watches")))
            return (200, {"compacted": True}, {})
        return (404, status_body(404, "NotFound", "no such simcluster endpoint"), {})


def _user_name(user):
    if user is None:
        return None
    if isinstance(user, dict):
        return user.get("name") or user.get("username") or user.get("user")
    for attr in ("name", "username", "user"):
        if getattr(user, attr, None):
            return getattr(user, attr)
    return str(user)


# ---------------------------------------------------------------- HTTP plumbing

class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address, handler, api):
        self.api = api
        self._conns = set()
        self._conns_lock = threading.Lock()
        super(_HTTPServer, self).__init__(address, handler)

    def get_request(self):
        sock, addr = super(_HTTPServer, self).get_request()
        # headers and body go out in separate writes: without this, Nagle + delayed ACK add 40 ms
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.api.ssl_context is not None:
            # handshake in the handler thread, so one slow client does not block accept()
            sock = self.api.ssl_context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        with self._conns_lock:
            self._conns.add(sock)
        return sock, addr

    def shutdown_request(self, request):
        with self._conns_lock:
            self._conns.discard(request)
        super(_HTTPServer, self).shutdown_request(request)

    def close_all(self):
        with self._conns_lock:
            conns, self._conns = list(self._conns), set()
        for sock in conns:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                sock.close()
            except OSError:
                pass

    def handle_error(self, request, client_address):
        # clients that go away (watch closed, dropped by a fault) are not errors of the server
        pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "simcluster"
    sys_version = ""
    timeout = 300

    def setup(self):
        if isinstance(self.request, ssl.SSLSocket):
            self.request.settimeout(10)
            try:
                self.request.do_handshake()
            except (ssl.SSLError, OSError):
                self.close_connection = True
                raise
        super(_Handler, self).setup()

    def log_message(self, format, *args):  # pylint: disable=redefined-builtin
        pass

    def _body(self):
        if (self.headers.get("Transfer-Encoding") or "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().strip().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _dispatch(self):
        api = self.server.api
        split = urllib.parse.urlsplit(self.path)
        peer_cert = self.request.getpeercert() if isinstance(self.request, ssl.SSLSocket) else None
        req = Request(self.command, split.path, urllib.parse.parse_qs(split.query, keep_blank_values=True),
                      self.headers, self._body(), peer_cert=peer_cert)
        try:
            result = api.handle(req)
        except Exception as e:  # pylint: disable=broad-except
            # a bug of the simulator must reach the test as a 500 naming it, not a hang
            result = (500, status_body(500, "InternalError", "simcluster internal error: %r" % (e,)), {})
        if result == "drop":
            self.close_connection = True
            try:
                self.request.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        if isinstance(result, Streamed):
            self._stream(api, result)
            return
        code, body, headers = result
        if isinstance(body, str):
            data = body.encode("utf-8")
            ctype = "text/plain; charset=utf-8"
        else:
            data = json.dumps(body).encode("utf-8")
            ctype = "application/json"
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-cache, private")
        for key, value in headers.items():
            for item in (value if isinstance(value, list) else [value]):
                self.send_header(key, item)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        self.wfile.flush()

    def _chunk(self, event):
        data = (json.dumps(event) + "\n").encode("utf-8")
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _stream(self, api, streamed):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        self.wfile.flush()
        watch = streamed.watch
        try:
            if streamed.error is not None:
                self._chunk({"type": "ERROR", "object": streamed.error.status()})
            else:
                deadline = time.monotonic() + streamed.timeout
                last_sent = time.monotonic()
                while True:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    try:
                        item = watch.queue.get(timeout=min(remaining, 0.5))
                    except queue.Empty:
                        item = False
                    if item is None:
                        break
                    if item is False:
                        if streamed.bookmarks and time.monotonic() - last_sent >= api.bookmark_interval:
                            self._chunk({"type": "BOOKMARK", "object": {
                                "kind": kind_of(streamed.resource), "apiVersion": api_version(streamed.resource),
                                "metadata": {"resourceVersion": api.store.resource_version}}})
                            last_sent = time.monotonic()
                        continue
                    event_type, obj = item
                    self._chunk({"type": event_type, "object": obj})
                    last_sent = time.monotonic()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (OSError, ValueError):
            self.close_connection = True
        finally:
            if watch is not None:
                watch.stop()

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _dispatch
