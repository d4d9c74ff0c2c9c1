# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Server-side field validation (the `fieldValidation` query parameter) and the part of
`/openapi/v3` that tells kubectl the server does it.

kubectl 1.27+ validates by default (`--validate=strict`): it reads `/openapi/v3`, then the document
of the object's group/version, and looks for a PATCH operation of that kind
(`x-kubernetes-group-version-kind`) with a `fieldValidation` query parameter
(k8s.io/cli-runtime/pkg/resource/query_param_verifier_v3.go, v0.32). When it finds one it sends
`?fieldValidation=Strict` and leaves validation to the server; when it does not, it falls back to
client-side validation, which downloads `/openapi/v2` ("failed to download openapi" here). So these
documents hold the paths and operations with their parameters and group/version/kind, and no
schemas (`components.schemas` is empty: kubectl apply then computes patches from its compiled-in
types, as it does against a server without OpenAPI).

The server side follows the API documentation, "Field validation"
(https://kubernetes.io/docs/reference/using-api/api-concepts/#field-validation), for v1.32:
- the decoder drops fields the kind does not have, whatever the directive;
- `Ignore`: silently; `Warn` (the default when the parameter is absent): one `Warning: 299 - "unknown
  field \\"spec.foo\\""` header per field; `Strict`: 400 BadRequest
  `<Kind> in version "<v>" cannot be handled as a <Kind>: strict decoding error: unknown field
  "spec.foo", unknown field "spec.bar"` (the shape a v1.32 apiserver answers, e.g. `Service in version
  "v1" cannot be handled as a Service: strict decoding error: unknown field "metadata.app"`);
- create (POST) and update (PUT) bodies and the result of a patch are checked.
Known fields are listed below for every kind the simulated cluster serves except Event and the
resource.k8s.io kinds, down to ObjectMeta, the pod spec and its containers; deeper objects (probes,
affinity, volumes' sources, ...) are taken whole. Not simulated: duplicate-field detection, and the
422 for a `fieldValidation` value other than the three.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os

from tests.simcluster.store import RESOURCES, STATUS_RESOURCES, StoreError

DIRECTIVES = ("Ignore", "Warn", "Strict")
ANY = None      # an object (or value) taken whole
MAP = None      # string map: labels, annotations, data


def _fields(*names, **typed):
    out = dict((name, ANY) for name in names)
    out.update(typed)
    return out


OBJECT_META = _fields(
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation", "creationTimestamp",
    "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations", "finalizers", "managedFields",
    ownerReferences=[_fields("apiVersion", "kind", "name", "uid", "controller", "blockOwnerDeletion")])

CONTAINER = _fields(
    "name", "image", "command", "args", "workingDir", "ports", "envFrom", "env", "resources", "resizePolicy",
    "restartPolicy", "volumeMounts", "volumeDevices", "livenessProbe", "readinessProbe", "startupProbe", "lifecycle",
    "terminationMessagePath", "terminationMessagePolicy", "imagePullPolicy", "securityContext", "stdin", "stdinOnce",
    "tty")

POD_SPEC = _fields(
    "volumes", "ephemeralContainers", "restartPolicy", "terminationGracePeriodSeconds", "activeDeadlineSeconds",
    "dnsPolicy", "nodeSelector", "serviceAccountName", "serviceAccount", "automountServiceAccountToken", "nodeName",
    "hostNetwork", "hostPID", "hostIPC", "shareProcessNamespace", "securityContext", "imagePullSecrets", "hostname",
    "subdomain", "affinity", "schedulerName", "tolerations", "hostAliases", "priorityClassName", "priority",
    "dnsConfig", "readinessGates", "runtimeClassName", "enableServiceLinks", "preemptionPolicy", "overhead",
    "topologySpreadConstraints", "setHostnameAsFQDN", "os", "hostUsers", "schedulingGates", "resourceClaims",
    "resources", containers=[CONTAINER], initContainers=[CONTAINER])

_TOP = ("apiVersion", "kind")
POLICY_RULE = _fields("verbs", "apiGroups", "resources", "resourceNames", "nonResourceURLs")
SUBJECT = _fields("kind", "apiGroup", "name", "namespace")

# kind -> known fields (None: not checked)
SCHEMAS = {
    "Namespace": _fields(*_TOP, metadata=OBJECT_META, spec=_fields("finalizers"), status=ANY),
    "Node": _fields(*_TOP, metadata=OBJECT_META, status=ANY, spec=_fields(
        "podCIDR", "podCIDRs", "providerID", "unschedulable", "taints", "configSource", "externalID")),
    "Pod": _fields(*_TOP, metadata=OBJECT_META, spec=POD_SPEC, status=ANY),
    "ConfigMap": _fields(*_TOP, "data", "binaryData", "immutable", metadata=OBJECT_META),
    "Secret": _fields(*_TOP, "data", "stringData", "type", "immutable", metadata=OBJECT_META),
    "ServiceAccount": _fields(*_TOP, "secrets", "imagePullSecrets", "automountServiceAccountToken",
                              metadata=OBJECT_META),
    "DaemonSet": _fields(*_TOP, metadata=OBJECT_META, status=ANY, spec=_fields(
        "selector", "updateStrategy", "minReadySeconds", "revisionHistoryLimit",
        template=_fields(metadata=OBJECT_META, spec=POD_SPEC))),
    "ClusterRole": _fields(*_TOP, "aggregationRule", metadata=OBJECT_META, rules=[POLICY_RULE]),
    "Role": _fields(*_TOP, metadata=OBJECT_META, rules=[POLICY_RULE]),
    "ClusterRoleBinding": _fields(*_TOP, metadata=OBJECT_META, roleRef=_fields("apiGroup", "kind", "name"),
                                  subjects=[SUBJECT]),
    "RoleBinding": _fields(*_TOP, metadata=OBJECT_META, roleRef=_fields("apiGroup", "kind", "name"),
                           subjects=[SUBJECT]),
    "RuntimeClass": _fields(*_TOP, "handler", metadata=OBJECT_META, overhead=_fields("podFixed"),
                            scheduling=_fields("nodeSelector", "tolerations")),
    "PodDisruptionBudget": _fields(*_TOP, metadata=OBJECT_META, status=ANY, spec=_fields(
        "minAvailable", "maxUnavailable", "selector", "unhealthyPodEvictionPolicy")),
}


def directive(req):
    """The request's fieldValidation directive; the apiserver's default is Warn.

    SIMCLUSTER_FIELD_VALIDATION=Strict makes Strict the default, so a test run shows any field a
    module sends that the kind does not have (a real apiserver would drop it with only a warning).
    """
    value = req.q("fieldValidation")
    if value in DIRECTIVES:
        return value
    default = os.environ.get("SIMCLUSTER_FIELD_VALIDATION")
    return default if default in DIRECTIVES else "Warn"


def _drop_unknown(obj, schema, path, found):
    if schema is None:
        return
    if isinstance(schema, list):
        if isinstance(obj, list):
            for i, item in enumerate(obj):
                _drop_unknown(item, schema[0], "%s[%d]" % (path, i), found)
        return
    if not isinstance(obj, dict):
        return
    for key in list(obj):
        where = "%s.%s" % (path, key) if path else key
        if key not in schema:
            found.append(where)
            del obj[key]
        else:
            _drop_unknown(obj[key], schema[key], where, found)


def check_fields(resource, obj, mode):
    """Drop the fields the kind does not have from obj (in place); return the Warning headers to send.

    Raises the apiserver's 400 under Strict.
    """
    spec = RESOURCES.get(resource)
    schema = SCHEMAS.get(spec[2]) if spec else None
    if schema is None or not isinstance(obj, dict):
        return []
    found = []
    _drop_unknown(obj, schema, "", found)
    if not found:
        return []
    if mode == "Strict":
        kind, version = spec[2], spec[1]
        raise StoreError(400, "BadRequest", '%s in version "%s" cannot be handled as a %s: strict decoding error: %s'
                         % (kind, version, kind, ", ".join('unknown field "%s"' % f for f in found)), {})
    if mode == "Warn":
        return ['299 - "unknown field \\"%s\\""' % f for f in found]
    return []


# ---------------------------------------------------------------- /openapi/v3

def _gv_key(group, version):
    return "api/%s" % version if not group else "apis/%s/%s" % (group, version)


def _group_versions(version_served):
    out = []
    for plural, (group, version, _kind, _ns, _short) in sorted(RESOURCES.items()):
        if version_served(plural, version) and (group, version) not in out:
            out.append((group, version))
    return out


def _param(name, description):
    return {"name": name, "in": "query", "description": description, "schema": {"type": "string", "uniqueItems": True}}


WRITE_PARAMS = [
    _param("dryRun", "When present, indicates that modifications should not be persisted."),
    _param("fieldManager", "fieldManager is a name associated with the actor or entity that is making these changes."),
    _param("fieldValidation", "fieldValidation instructs the server on how to handle objects in the request "
                              "containing unknown or duplicate fields. Valid values are: Ignore, Warn, Strict."),
]


def _operation(action, group, version, kind, op_id, params=None):
    return {"operationId": op_id, "parameters": list(params or []),
            "responses": {"200": {"description": "OK"}},
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": {"group": group, "version": version, "kind": kind}}


def gv_document(group, version):
    paths = {}
    prefix = "/api/%s" % version if not group else "/apis/%s/%s" % (group, version)
    for plural, (g, v, kind, namespaced, _short) in sorted(RESOURCES.items()):
        if g != group or v != version:
            continue
        base = prefix + ("/namespaces/{namespace}/" if namespaced else "/") + plural
        name = base + "/{name}"
        paths[base] = {
            "get": _operation("list", g, v, kind, "list" + kind),
            "post": _operation("post", g, v, kind, "create" + kind, WRITE_PARAMS),
        }
        paths[name] = {
            "get": _operation("get", g, v, kind, "read" + kind),
            "put": _operation("put", g, v, kind, "replace" + kind, WRITE_PARAMS),
            "patch": _operation("patch", g, v, kind, "patch" + kind,
                                WRITE_PARAMS + [_param("force", "Force is going to force Apply requests.")]),
            "delete": _operation("delete", g, v, kind, "delete" + kind, [WRITE_PARAMS[0]]),
        }
        if plural in STATUS_RESOURCES:
            paths[name + "/status"] = {
                "get": _operation("get", g, v, kind, "read%sStatus" % kind),
                "put": _operation("put", g, v, kind, "replace%sStatus" % kind, WRITE_PARAMS),
                "patch": _operation("patch", g, v, kind, "patch%sStatus" % kind, WRITE_PARAMS),
            }
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.32.0"}, "paths": paths,
            "components": {"schemas": {}}}


def answer(path, version_served):
    """(code, body, headers) for /openapi/v3 and /openapi/v3/<group-version>, else None."""
    parts = [p for p in path.split("/") if p]
    if parts[:2] != ["openapi", "v3"]:
        return None
    gvs = _group_versions(version_served)
    if len(parts) == 2:
        root = {}
        for group, version in gvs:
            digest = hashlib.sha512(json.dumps(gv_document(group, version), sort_keys=True).encode()).hexdigest()
            root[_gv_key(group, version)] = {"serverRelativeURL": "/openapi/v3/%s?hash=%s"
                                             % (_gv_key(group, version), digest.upper()[:128])}
        return (200, {"paths": root}, {})
    wanted = "/".join(parts[2:])
    for group, version in gvs:
        if _gv_key(group, version) == wanted:
            return (200, gv_document(group, version), {})
    return (404, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                  "message": "the server could not find the requested resource", "reason": "NotFound",
                  "details": {}, "code": 404}, {})
