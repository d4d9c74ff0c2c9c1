# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The apiserver's validation per kind: containers' resource lists and quantities, pod updates, DaemonSet
selectors, RuntimeClass handlers, and the resource.k8s.io kinds (dra_validation.py). Raises the 422 Invalid
of errors.py.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

from tests.simcluster import dra_validation
from tests.simcluster.defaulting import default_pod_spec
from tests.simcluster.dra_versions import DRA_RESOURCES
from tests.simcluster.errors import FieldError, invalid_error
from tests.simcluster.names import (
    DNS1123_LABEL_MESSAGE, DNS_LABEL_RE, STANDARD_CONTAINER_RESOURCES, STANDARD_RESOURCES, is_extended_resource_name,
    is_integer_resource,
)
from tests.simcluster.quantity import parse_quantity


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


def label_selector_matches(selector, labels):
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
    if not DNS_LABEL_RE.match(text):
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
        elif not label_selector_matches(selector, (template.get("metadata") or {}).get("labels")):
            errors.append(FieldError("spec.template.metadata.labels", "Invalid",
                                     "`selector` does not match template `labels`",
                                     (template.get("metadata") or {}).get("labels") or {}))
        if old is not None and selector != (old.get("spec") or {}).get("selector"):
            errors.append(FieldError("spec.selector", "Invalid", "field is immutable", selector))
        _validate_pod_spec(errors, "spec.template.spec", template.get("spec") or {})
    elif resource == "runtimeclasses":
        _validate_runtime_class(errors, obj, old)
    elif resource in DRA_RESOURCES:
        errors.extend(FieldError(*e) for e in dra_validation.validate(resource, obj, old))
    if errors:
        raise invalid_error(resource, name, errors)
