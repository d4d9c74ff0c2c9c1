# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The write verbs of the simulated apiserver: create, update and patch, with decoding, field validation,
admission, defaulting, the registry strategies, validation and dry runs.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json

from tests.simcluster import openapi  # fieldValidation
from tests.simcluster.decoding import decode_object
from tests.simcluster.defaulting import default_object
from tests.simcluster.errors import FieldError, bad_request, generic_422, invalid_error
from tests.simcluster.http_front import Request
from tests.simcluster.patches import PATCH_TYPES, apply_json_patch, merge_patch, strategic_merge
from tests.simcluster.quantity import QuantityError
from tests.simcluster.store import (
    RESOURCES, StoreError, already_exists, api_version, conflict, kind_of, missing_runtime_class,
    missing_service_account, not_found, now_rfc3339,
)
from tests.simcluster.strategy import prepare_for_create, prepare_for_update, taint_new_node
from tests.simcluster.validation import validate_object


class WriteVerbsMixin:
    """create, update and patch of ApiServer. Needs ``self.store``.
    """

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
            taint_new_node(body)
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
