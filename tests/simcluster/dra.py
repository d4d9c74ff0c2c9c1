# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Dynamic Resource Allocation (``resource.k8s.io``) in the simulated cluster. Test equipment.

What it serves and why (each behaviour's source is in tests/simcluster/FACTS.md, "Dynamic Resource
Allocation"):
- discovery of the group in the versions the configuration names (``dra_versions``, default ``[v1]`` as
  kube-apiserver 1.34+ serves it; ``[v1beta1]`` for a configuration that claims v1.32; ``[]`` for a cluster
  without DRA);
- DeviceClasses, ResourceSlices, ResourceClaims and ResourceClaimTemplates stored in the v1 shape, converted
  to and from v1beta1 for requests in that version (devices' ``basic`` wrapper, requests' ``exactly``);
- the apiserver's validation of the DeviceClass fields the collection sends, with a faithful subset of the
  CEL compiler (syntax errors and the type errors of operators on known types, with cel-go's message shape);
- kubelet plugins of known DRA driver images publishing ResourceSlices from the node's inventory (kubelets.py);
- the resource claim controller (claims from templates) and the scheduler's allocation of simple claims;
- extended resources a DeviceClass maps (``extendedResourceName``, KEP-5004) served by DRA on nodes that do
  not advertise them: the scheduler's special claim per pod and ``status.extendedResourceClaimStatus``.

server.py calls ``discovery``, ``version_served``, ``around`` and ``validate``; store.py lists the resources;
SimCluster starts ``kubelets.KubeletPlugins``, which runs ``sync_claims``; the scheduler (scheduler.py) calls
``device_plugin_requests``, ``claim_filter_reasons``, ``allocate_claims`` and ``claims_signature``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import re
import uuid

from tests.simcluster.store import RESOURCES

GROUP = "resource.k8s.io"
KNOWN_VERSIONS = ("v1", "v1beta2", "v1beta1")
DEFAULT_VERSIONS = ("v1",)
DRA_RESOURCES = ("deviceclasses", "resourceslices", "resourceclaims", "resourceclaimtemplates")

# pkg/apis/resource types.go (1.34): limits the validation below enforces
DEVICE_SELECTORS_MAX = 32
DEVICE_CONFIG_MAX = 32
CEL_MAX_LENGTH = 10 * 1024
OPAQUE_PARAMETERS_MAX = 10 * 1024
DRIVER_NAME_MAX = 63

_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN_RE = re.compile(r"^%s(\.%s)*$" % (_DNS_LABEL, _DNS_LABEL))
DNS1123_SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")


def served_versions(api):
    """resource.k8s.io versions this simulated apiserver serves (ApiServer.dra_versions, set from the config)."""
    versions = getattr(api, "dra_versions", None)
    if versions is None:
        return list(DEFAULT_VERSIONS)
    unknown = [v for v in versions if v not in KNOWN_VERSIONS]
    if unknown:
        raise ValueError("dra_versions: unknown versions %s (known: %s)" % (unknown, ", ".join(KNOWN_VERSIONS)))
    return list(versions)


# ---------------------------------------------------------------- discovery and routing

def _group_entry(versions):
    gvs = [{"groupVersion": "%s/%s" % (GROUP, v), "version": v} for v in versions]
    return {"name": GROUP, "versions": gvs, "preferredVersion": gvs[0]}


def discovery(api, path):
    """The answer for a discovery path that involves resource.k8s.io, or None to let the server answer."""
    versions = served_versions(api)
    if path == "/apis":
        groups = []
        for group in api._groups():  # pylint: disable=protected-access
            if not group:
                continue
            if group == GROUP:
                if versions:
                    groups.append(_group_entry(versions))
            else:
                groups.append(api._group(group))  # pylint: disable=protected-access
        return (200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}, {})
    parts = [p for p in path.split("/") if p]
    if len(parts) < 2 or parts[0] != "apis" or parts[1] != GROUP:
        return None
    if len(parts) == 2 and versions:
        body = _group_entry(versions)
        body.update({"kind": "APIGroup", "apiVersion": "v1"})
        return (200, body, {})
    if len(parts) == 3 and parts[2] in versions:
        resources = []
        for plural in DRA_RESOURCES:
            _g, _v, kind, namespaced, _short = RESOURCES[plural]
            resources.append({"name": plural, "singularName": kind.lower(), "namespaced": namespaced, "kind": kind,
                              "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update",
                                        "watch"]})
            if plural == "resourceclaims":
                resources.append({"name": plural + "/status", "singularName": "", "namespaced": True, "kind": kind,
                                  "verbs": ["get", "patch", "update"]})
        return (200, {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "%s/%s" % (GROUP, parts[2]),
                      "resources": resources}, {})
    return (404, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                  "message": "the server could not find the requested resource", "reason": "NotFound",
                  "details": {}, "code": 404}, {})


def version_served(api, resource, version):
    """Whether ``resource`` is served in ``version`` (other resources: only in their one version)."""
    if resource not in DRA_RESOURCES:
        return RESOURCES[resource][1] == version
    return version in served_versions(api)


def _path_version(path):
    parts = [p for p in path.split("/") if p]
    return parts[2] if len(parts) >= 3 and parts[0] == "apis" and parts[1] == GROUP else None


# ---------------------------------------------------------------- conversion (storage: v1)

_EXACT_FIELDS = ("deviceClassName", "selectors", "allocationMode", "count", "adminAccess", "tolerations")


def _claim_spec(spec, to_v1):
    requests = ((spec or {}).get("devices") or {}).get("requests")
    if not isinstance(requests, list):
        return
    out = []
    for req in requests:
        if not isinstance(req, dict):
            out.append(req)
            continue
        if to_v1:
            exact = dict((k, req[k]) for k in _EXACT_FIELDS if k in req)
            new = dict((k, v) for k, v in req.items() if k not in _EXACT_FIELDS)
            if exact:
                new["exactly"] = exact
        else:
            new = dict((k, v) for k, v in req.items() if k != "exactly")
            new.update(req.get("exactly") or {})
        out.append(new)
    spec["devices"]["requests"] = out


def convert(resource, obj, version, to_v1):
    """An object of ``resource`` between ``version`` and the stored v1 shape (v1beta2 has the v1 shapes)."""
    if not isinstance(obj, dict):
        return obj
    obj = copy.deepcopy(obj)
    if obj.get("apiVersion"):
        obj["apiVersion"] = "%s/%s" % (GROUP, "v1" if to_v1 else version)
    if version != "v1beta1":
        return obj
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else None
    if resource == "resourceslices" and spec and isinstance(spec.get("devices"), list):
        devices = []
        for dev in spec["devices"]:
            if not isinstance(dev, dict):
                devices.append(dev)
            elif to_v1:
                flat = {"name": dev.get("name")}
                flat.update(dev.get("basic") or {})
                devices.append(flat)
            else:
                devices.append({"name": dev.get("name"),
                                "basic": dict((k, v) for k, v in dev.items() if k != "name")})
        spec["devices"] = devices
    elif resource == "resourceclaims" and spec:
        _claim_spec(spec, to_v1)
    elif resource == "resourceclaimtemplates" and spec and isinstance(spec.get("spec"), dict):
        _claim_spec(spec["spec"], to_v1)
    return obj


def around(api, req, resource, call):
    """Run ``call(req)`` for a request; requests in another version than v1 are converted both ways."""
    if resource not in DRA_RESOURCES:
        return call(req)
    version = _path_version(req.path)
    if version == "v1":
        return _dry_run_create(resource, req, call(req))
    from tests.simcluster.server import Request  # server imports this module

    body = req.body
    if body:
        try:
            data = json.loads(body.decode("utf-8"))
        except ValueError:
            data = None
        if isinstance(data, dict) and req.method in ("POST", "PUT"):
            body = json.dumps(convert(resource, data, version, True)).encode("utf-8")
    path = req.path.replace("/apis/%s/%s/" % (GROUP, version), "/apis/%s/v1/" % GROUP, 1)
    converted = Request(req.method, path, req.query, req.headers, body, peer_cert=req.peer_cert)
    result = _dry_run_create(resource, req, call(converted))
    if not isinstance(result, tuple):
        # watches stream the stored v1 shape: not converted (the collection does not watch v1beta1)
        return result
    code, answer, headers = result
    if isinstance(answer, dict) and answer.get("kind", "").endswith("List") and "items" in answer:
        answer = dict(answer, apiVersion="%s/%s" % (GROUP, version),
                      items=[convert(resource, i, version, False) for i in answer["items"]])
    elif isinstance(answer, dict) and answer.get("kind") != "Status":
        answer = convert(resource, answer, version, False)
    return (code, answer, headers)


def _dry_run_create(resource, req, result):
    """A dry-run create answers the object as the registry prepared it: generation 1 for a DeviceClass
    (measured on v1.36.2), a uid, no resourceVersion (nothing was written)."""
    if (resource == "deviceclasses" and req.method == "POST" and req.q("dryRun") and isinstance(result, tuple)
            and result[0] == 201 and isinstance(result[1], dict)):
        meta = result[1].setdefault("metadata", {})
        meta.setdefault("generation", 1)
        meta.setdefault("uid", str(uuid.uuid4()))
    return result


# ---------------------------------------------------------------- defaulting

def _default_exact(exact):
    """SetDefaults_ExactDeviceRequest / DeviceSubRequest: allocationMode ExactCount, then count 1 (v1.36.2)."""
    if isinstance(exact, dict):
        exact.setdefault("allocationMode", "ExactCount")
        if exact["allocationMode"] == "ExactCount" and not exact.get("count"):
            exact["count"] = 1


def default(resource, obj):
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


# ---------------------------------------------------------------- validation

def _is_extended_resource_name(name):
    from tests.simcluster.server import is_extended_resource_name  # server imports this module

    return is_extended_resource_name(name)


def _driver_errors(field, driver):
    if not driver:
        return [(field, "Required", "")]
    errors = []
    if len(driver) > DRIVER_NAME_MAX:
        errors.append((field, "Too long", "may not be more than %d bytes" % DRIVER_NAME_MAX, driver))
    if not _DNS_SUBDOMAIN_RE.match(driver.lower()):
        errors.append((field, "Invalid", DNS1123_SUBDOMAIN_MESSAGE, driver))
    return errors


def validate(resource, obj, old=None):
    """Field errors as (field, kind, detail[, value]) tuples; server.py wraps them in FieldError."""
    if resource != "deviceclasses":
        return []
    errors = []
    name = (obj.get("metadata") or {}).get("name") or ""
    if len(name) > 253 or not _DNS_SUBDOMAIN_RE.match(name):
        errors.append(("metadata.name", "Invalid", DNS1123_SUBDOMAIN_MESSAGE, name))
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    old_spec = (old or {}).get("spec") or {}
    selectors = spec.get("selectors") or []
    if len(selectors) > DEVICE_SELECTORS_MAX:
        errors.append(("spec.selectors", "Too many", "%d: must have at most %d items" % (len(selectors), DEVICE_SELECTORS_MAX)))
    # unchanged selectors count as stored: the apiserver does not compile them again on update
    stored = old is not None and selectors == (old_spec.get("selectors") or [])
    for index, selector in enumerate(selectors):
        field = "spec.selectors[%d].cel" % index
        cel = selector.get("cel") if isinstance(selector, dict) else None
        if not isinstance(cel, dict):
            errors.append((field, "Required", ""))
            continue
        expression = cel.get("expression") or ""
        if stored:
            continue
        if len(expression) > CEL_MAX_LENGTH:
            errors.append((field + ".expression", "Too long", "may not be more than %d bytes" % CEL_MAX_LENGTH,
                           expression))
            continue
        problem = compile_cel(expression)
        if problem:
            errors.append((field + ".expression", "Invalid", problem, expression))
    config = spec.get("config") or []
    if len(config) > DEVICE_CONFIG_MAX:
        errors.append(("spec.config", "Too many", "%d: must have at most %d items" % (len(config), DEVICE_CONFIG_MAX)))
    for index, entry in enumerate(config):
        field = "spec.config[%d].opaque" % index
        opaque = entry.get("opaque") if isinstance(entry, dict) else None
        if not isinstance(opaque, dict):
            errors.append((field, "Required", ""))
            continue
        errors.extend(_driver_errors(field + ".driver", opaque.get("driver")))
        parameters = opaque.get("parameters")
        if parameters is None:
            errors.append((field + ".parameters", "Required", ""))
        elif len(json.dumps(parameters, separators=(",", ":"))) > OPAQUE_PARAMETERS_MAX:
            errors.append((field + ".parameters", "Too long", "may not be more than %d bytes" % OPAQUE_PARAMETERS_MAX,
                           ""))
    extended = spec.get("extendedResourceName")
    if extended is not None and not _is_extended_resource_name(extended):
        errors.append(("spec.extendedResourceName", "Invalid", "must be a valid extended resource name", extended))
    return errors


# ---------------------------------------------------------------- CEL: a faithful subset of cel-go's compiler

class CelError(Exception):
    def __init__(self, offset, message):
        super(CelError, self).__init__(message)
        self.offset = offset
        self.message = message


OPERAND_EXPECTED = ("{'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, "
                    "BYTES, IDENTIFIER}")
_TOKEN_RE = re.compile(r"""
    (?P<ws>\s+)
  | (?P<num>0[xX][0-9a-fA-F]+[uU]?|[0-9]+\.[0-9]+([eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+|[0-9]+[uU]?)
  | (?P<str>[bB]?[rR]?("([^"\\\n]|\\.)*"|'([^'\\\n]|\\.)*'))
  | (?P<id>[_a-zA-Z][_a-zA-Z0-9]*)
  | (?P<op>\|\||&&|==|!=|<=|>=|[<>+\-*/%!?:.,\[\](){}])
""", re.VERBOSE)
RESERVED = ("true", "false", "null", "in")
# the DRA CEL environment (k8s.io/dynamic-resource-allocation/cel): one variable, `device`
# (map types carry cel-go's full name for the "must evaluate to bool" message; measured on v1.36.2)
DEVICE_FIELDS = {"driver": "string", "attributes": "map(string, map(string, google.protobuf.Any))",
                 "capacity": "map(string, map(string, kubernetes.Quantity))", "allowMultipleAllocations": "bool"}
# how cel-go names the types this subset does not track in full
TYPE_NAMES = {"list": "list(dyn)", "map": "map(dyn, dyn)"}
GLOBAL_FUNCTIONS = ("size", "has", "int", "uint", "double", "string", "bytes", "bool", "dyn", "type", "duration",
                    "timestamp", "matches", "quantity", "isQuantity", "semver", "isSemver", "url", "isURL", "ip",
                    "isIP", "cidr", "isCIDR", "format")
NUMERIC = ("int", "uint", "double")


def _tokenize(text):
    tokens, pos = [], 0
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if not m:
            raise CelError(pos, "Syntax error: token recognition error at: '%s'" % text[pos])
        if not m.group("ws"):
            kind = m.lastgroup
            value = m.group(kind)
            if kind == "id" and value in RESERVED:
                kind = "op" if value == "in" else "lit"
            tokens.append((kind, value, pos))
        pos = m.end()
    tokens.append(("eof", "<EOF>", len(text)))
    return tokens


class _Parser:
    """Recursive descent over CEL's grammar; returns the expression's type ('dyn' when unknown)."""

    def __init__(self, text):
        self.tokens = _tokenize(text)
        self.i = 0
        # cel-go parses first and type-checks after: a syntax error anywhere wins over a type error
        self.type_error = None

    def check(self, fn, *args):
        try:
            return fn(*args)
        except CelError as err:
            self.type_error = self.type_error or err
            return "dyn"

    def undeclared(self, name, pos):
        self.type_error = self.type_error or CelError(pos, "undeclared reference to '%s' (in container '')" % name)
        return "dyn"

    def peek(self):
        return self.tokens[self.i]

    def take(self):
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def expect(self, value):
        tok = self.peek()
        if tok[1] != value or tok[0] not in ("op",):
            raise CelError(tok[2], "Syntax error: mismatched input '%s' expecting '%s'" % (tok[1], value))
        return self.take()

    def parse(self):
        typ = self.expr()
        tok = self.peek()
        if tok[0] != "eof":
            raise CelError(tok[2], "Syntax error: mismatched input '%s' expecting <EOF>" % tok[1])
        if self.type_error is not None:
            raise self.type_error
        return typ

    def expr(self):
        cond = self.binary(0)
        if self.peek()[1] == "?" and self.peek()[0] == "op":
            where = self.take()[2]
            self.check(_need, cond[0], ("bool",), "_?_:_", cond[0], where)
            left = self.binary(0)
            self.expect(":")
            right = self.expr()
            return (left[0] if left[0] == right[0] else "dyn", cond[1])
        return cond

    LEVELS = (("||",), ("&&",), ("==", "!=", "<", "<=", ">", ">=", "in"), ("+", "-"), ("*", "/", "%"))

    def binary(self, level):
        if level == len(self.LEVELS):
            return self.unary()
        left = self.binary(level + 1)
        while self.peek()[0] == "op" and self.peek()[1] in self.LEVELS[level]:
            op_tok = self.take()
            right = self.binary(level + 1)
            left = (self.check(_binary_type, op_tok[1], left[0], right[0], op_tok[2]), left[1])
        return left

    def unary(self):
        tok = self.peek()
        if tok[0] == "op" and tok[1] in ("!", "-"):
            self.take()
            operand = self.unary()
            if tok[1] == "!":
                self.check(_need, operand[0], ("bool",), "!_", operand[0], tok[2])
                return ("bool", tok[2])
            self.check(_need, operand[0], ("int", "double"), "-_", operand[0], tok[2])
            return (operand[0], tok[2])
        return self.member()

    def member(self):
        typ, start = self.primary()
        while self.peek()[0] == "op" and self.peek()[1] in (".", "["):
            tok = self.take()
            if tok[1] == ".":
                name = self.take()
                if name[0] != "id":
                    raise CelError(name[2], "Syntax error: mismatched input '%s' expecting IDENTIFIER" % name[1])
                if self.peek()[1] == "(" and self.peek()[0] == "op":
                    self.take()
                    self.args(")")
                    typ = "bool" if name[1] in ("startsWith", "endsWith", "contains", "matches", "exists",
                                                "all", "exists_one", "isGreaterThan", "isLessThan") else "dyn"
                elif typ == "device":
                    if name[1] not in DEVICE_FIELDS:   # cel-go points at the dot (measured on v1.36.2)
                        self.type_error = self.type_error or CelError(tok[2], "undefined field '%s'" % name[1])
                    typ = DEVICE_FIELDS.get(name[1], "dyn")
                else:
                    typ = "dyn"
            else:
                self.expr()
                self.expect("]")
                typ = "dyn"
        return (typ, start)

    def args(self, closing):
        if self.peek()[1] == closing and self.peek()[0] == "op":
            self.take()
            return
        first = True
        while True:
            if first and closing == ")":
                first = False
                start = self.peek()[2]
                try:
                    self.expr()
                except CelError as err:   # an empty argument list was possible: ')' is expected too (v1.36.2)
                    if err.offset == start and err.message.endswith(OPERAND_EXPECTED):
                        err.message = err.message.replace("'(', '.'", "'(', ')', '.'")
                    raise
            else:
                self.expr()
            tok = self.peek()
            if tok[0] == "op" and tok[1] == ",":
                self.take()
                continue
            if tok[0] == "op" and tok[1] == closing:
                self.take()
                return
            raise CelError(tok[2], "Syntax error: mismatched input '%s' expecting {')', ','}" % tok[1]
                           if closing == ")" else "Syntax error: mismatched input '%s' expecting {'%s', ','}"
                           % (tok[1], closing))

    def primary(self):
        tok = self.take()
        kind, value, pos = tok
        if kind == "num":
            if value.lower().endswith("u"):
                return ("uint", pos)
            return ("double" if ("." in value or ("e" in value.lower() and not value.lower().startswith("0x")))
                    else "int", pos)
        if kind == "str":
            return ("bytes" if value[0] in "bB" else "string", pos)
        if kind == "lit":
            return ("null_type" if value == "null" else "bool", pos)
        if kind == "id":
            if self.peek()[1] == "(" and self.peek()[0] == "op":
                self.take()
                self.args(")")
                if value not in GLOBAL_FUNCTIONS:
                    return (self.undeclared(value, pos), pos)
                return ({"size": "int", "has": "bool", "int": "int", "uint": "uint", "double": "double",
                         "string": "string", "bool": "bool"}.get(value, "dyn"), pos)
            if value != "device":
                return (self.undeclared(value, pos), pos)
            return ("device", pos)
        if kind == "op" and value == "(":
            inner = self.expr()
            self.expect(")")
            return (inner[0], pos)
        if kind == "op" and value == "[":
            self.args("]")
            return ("list", pos)
        if kind == "op" and value == "{":
            if not (self.peek()[1] == "}" and self.peek()[0] == "op"):
                while True:
                    self.expr()
                    self.expect(":")
                    self.expr()
                    if self.peek()[1] == "," and self.peek()[0] == "op":
                        self.take()
                        continue
                    break
            self.expect("}")
            return ("map", pos)
        raise CelError(pos, "Syntax error: mismatched input '%s' expecting %s" % (value, OPERAND_EXPECTED))


def _kind(typ):
    return typ.split("(", 1)[0]


def _need(typ, allowed, op, shown, pos):
    if _kind(typ) not in allowed and typ != "dyn":
        raise CelError(pos, "found no matching overload for '%s' applied to '(%s)'" % (op, shown))


def _binary_type(op, left, right, pos):
    name = "@in" if op == "in" else "_%s_" % op
    if "dyn" in (left, right):
        return "bool" if op in ("==", "!=", "<", "<=", ">", ">=", "in", "&&", "||") else "dyn"
    ok = True
    if op in ("&&", "||"):
        ok = left == right == "bool"
        result = "bool"
    elif op in ("==", "!="):
        ok = left == right or "null_type" in (left, right)
        result = "bool"
    elif op in ("<", "<=", ">", ">="):
        ok = (left == right and left in NUMERIC + ("string", "bytes", "bool")) or (left in NUMERIC and right in NUMERIC)
        result = "bool"
    elif op == "in":
        ok = _kind(right) in ("list", "map")
        result = "bool"
    elif op == "+":
        ok = left == right and _kind(left) in NUMERIC + ("string", "bytes", "list")
        result = left
    elif op == "%":
        ok = left == right and left in ("int", "uint")
        result = left
    else:
        ok = left == right and left in NUMERIC
        result = left
    if not ok:
        raise CelError(pos, "found no matching overload for '%s' applied to '(%s, %s)'" % (name, left, right))
    return result


def compile_cel(expression):
    """None, or the detail the apiserver gives for a DeviceClass selector that does not compile.

    Shape from cel-go's issue formatting as the apiserver reports it: ``compilation failed: ERROR:
    <input>:LINE:COL: MESSAGE`` followed by the source line and a caret (columns 1-based).
    """
    try:
        typ = _Parser(expression).parse()[0]
    except CelError as err:
        before = expression[:err.offset]
        line = before.count("\n") + 1
        column = err.offset - (before.rfind("\n") + 1)
        source = expression.split("\n")[line - 1]
        return "compilation failed: ERROR: <input>:%d:%d: %s\n | %s\n | %s^" % (
            line, column + 1, err.message, source, "." * column)
    if typ not in ("bool", "dyn"):
        return "must evaluate to bool or the unknown type, not %s" % TYPE_NAMES.get(typ, typ)
    return None


# ---------------------------------------------------------------- simulated DRA kubelet plugins

# The drivers' kubelet plugins publishing ResourceSlices: tests/simcluster/kubelets.py (KubeletPlugins), with
# the drivers, their device shapes and the wanted slices in the kubelet core (tests/support/kubelet_core.py).


# ---------------------------------------------------------------- claims: the claim controller and the scheduler

POD_CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
# The scheduler puts it on a claim it allocates (dynamicresources.go bindClaim, resourceapi.Finalizer); the resource
# claim controller removes it with the allocation once no pod uses the claim, so a claim deleted while in use stays
# (deletionTimestamp set) until then.
DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"
NO_ALLOCATION = "cannot allocate all claims"


class _Unsupported(Exception):
    pass


class _Evaluator:
    """Evaluates the selector subset the collection uses against one device: device.driver,
    device.attributes["<domain>"].<name> (or ["<name>"]), literals, == != < <= > >=, && || !, parentheses."""

    def __init__(self, text, device):
        self.tokens = _tokenize(text)
        self.i = 0
        self.device = device

    def peek(self):
        return self.tokens[self.i]

    def take(self, value=None):
        tok = self.tokens[self.i]
        if value is not None and tok[1] != value:
            raise _Unsupported(tok[1])
        self.i += 1
        return tok

    def run(self):
        value = self.disjunction()
        if self.peek()[0] != "eof":
            raise _Unsupported(self.peek()[1])
        return value is True

    def disjunction(self):
        value = self.conjunction()
        while self.peek()[1] == "||":
            self.take()
            right = self.conjunction()
            value = value is True or right is True
        return value

    def conjunction(self):
        value = self.comparison()
        while self.peek()[1] == "&&":
            self.take()
            right = self.comparison()
            value = value is True and right is True
        return value

    def comparison(self):
        left = self.unary()
        op = self.peek()[1]
        if self.peek()[0] == "op" and op in ("==", "!=", "<", "<=", ">", ">="):
            self.take()
            right = self.unary()
            if op == "==":
                return left == right
            if op == "!=":
                return left != right
            if left is None or right is None or type(left) is not type(right):
                return False
            return {"<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right}[op]
        return left

    def unary(self):
        if self.peek()[1] == "!":
            self.take()
            return self.unary() is not True
        if self.peek()[1] == "(":
            self.take()
            value = self.disjunction()
            self.take(")")
            return value
        return self.operand()

    def operand(self):
        kind, value, _pos = self.take()
        if kind == "str":
            return json.loads(value) if value.startswith('"') else value[1:-1]
        if kind == "num":
            return float(value) if "." in value else int(value.rstrip("uU"), 0)
        if kind == "lit":
            return {"true": True, "false": False, "null": None}[value]
        if kind != "id" or value != "device":
            raise _Unsupported(value)
        self.take(".")
        field = self.take()[1]
        if field == "driver":
            return self.device["driver"]
        if field not in ("attributes", "capacity"):
            raise _Unsupported(field)
        self.take("[")
        domain = self.operand()  # a string literal, in single or double quotes as CEL allows
        self.take("]")
        if self.peek()[1] == ".":
            self.take()
            name = self.take()[1]
        else:
            self.take("[")
            name = self.operand()
            self.take("]")
        entries = self.device.get(field) or {}
        entry = entries.get("%s/%s" % (domain, name))
        if entry is None and domain == self.device["driver"]:
            entry = entries.get(name)
        if not isinstance(entry, dict):
            return None
        for key in ("string", "int", "bool", "version", "value"):
            if key in entry:
                return entry[key]
        return None


def selector_matches(expression, device):
    """Whether a device (with its driver) satisfies a selector; expressions beyond the subset match nothing."""
    try:
        return _Evaluator(expression, device).run()
    except (_Unsupported, CelError, ValueError, IndexError, KeyError, TypeError):
        return False


def _pod_claims(pod):
    """(pod claim name, ResourceClaim name or None while its template's claim is not created) per pod claim."""
    statuses = dict((s.get("name"), s.get("resourceClaimName"))
                    for s in (pod.get("status") or {}).get("resourceClaimStatuses") or [])
    out = []
    for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
        out.append((entry.get("name"), entry.get("resourceClaimName") or statuses.get(entry.get("name"))))
    return out


def _node_devices(store, node):
    slices, _rv = store.list("resourceslices")
    newest = {}
    for item in slices:
        spec = item.get("spec") or {}
        key = (spec.get("driver"), (spec.get("pool") or {}).get("name"))
        newest[key] = max(newest.get(key, 0), (spec.get("pool") or {}).get("generation") or 0)
    devices = []
    for item in slices:
        spec = item.get("spec") or {}
        pool = spec.get("pool") or {}
        if spec.get("nodeName") != node or pool.get("generation", 0) != newest[(spec.get("driver"), pool.get("name"))]:
            continue
        for dev in spec.get("devices") or []:
            devices.append(dict(dev, driver=spec.get("driver"), pool=pool.get("name")))
    return devices


def _taken(store):
    claims, _rv = store.list("resourceclaims")
    return set((r.get("driver"), r.get("pool"), r.get("device")) for c in claims
               for r in (((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or [])


def _allocated_node(claim):
    for term in ((((claim.get("status") or {}).get("allocation") or {}).get("nodeSelector") or {})
                 .get("nodeSelectorTerms") or []):
        for field in term.get("matchFields") or []:
            if field.get("key") == "metadata.name" and field.get("values"):
                return field["values"][0]
    return None


# -- extended resources served by DRA (KEP-5004, DRAExtendedResource) ------------------------------------
# Read from kubernetes/kubernetes pkg/scheduler/framework/plugins/dynamicresources/extendeddynamicresources.go
# and extended/util.go (master, late 2025; alpha in 1.34, beta in 1.36): a DeviceClass maps the extended
# resource named by spec.extendedResourceName, and always deviceclass.resource.kubernetes.io/<class name>. On a
# node whose allocatable has none of a mapped resource, DRA serves the pod's request for it: the scheduler
# builds one special claim for the pod (generateName "<pod>-extended-resources-", annotation
# resource.kubernetes.io/extended-resource-claim: "true", the pod as controller owner), one request per
# container and resource named container-<i>-request-<j> (i over initContainers + containers, j the index of
# the resource among the container's sorted request names; exactly: the class, ExactCount, the quantity),
# creates it in PreBind with the allocation, and patches the pod's status.extendedResourceClaimStatus
# {requestMappings: [{containerName, resourceName, requestName}], resourceClaimName}. A node whose allocatable
# has the resource (a device plugin advertises it) is left to NodeResourcesFit, not DRA.
EXTENDED_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
IMPLICIT_EXTENDED_PREFIX = "deviceclass.resource.kubernetes.io/"


def extended_resource_classes(store):
    """{extended resource name: DeviceClass name}. Where two classes name the same resource, the one created
    later wins, and among classes created in the same second the first by name (the DeviceClassSpec
    extendedResourceName comment, staging/src/k8s.io/api/resource/v1/types.go)."""
    classes, _rv = store.list("deviceclasses")
    mapping = {}
    ordered = sorted(classes, key=lambda c: c["metadata"]["name"])
    # stable: equal timestamps keep the name order
    ordered.sort(key=lambda c: c["metadata"].get("creationTimestamp") or "", reverse=True)
    for item in ordered:
        name = item["metadata"]["name"]
        mapping.setdefault(IMPLICIT_EXTENDED_PREFIX + name, name)
        explicit = (item.get("spec") or {}).get("extendedResourceName")
        if explicit:
            mapping.setdefault(explicit, name)
    return mapping


def _is_quantity_zero(value):
    text = str(value if value is not None else "0").strip()
    return re.match(r"^[+]?0*(\.0*)?[a-zA-Z]*$", text) is not None


def dra_served(store, requests, node_obj, mapping=None):
    """{resource: class name} of the pod's extended resource requests (``requests`` as the scheduler computed
    them) that DRA serves on ``node_obj``: mapped to a DeviceClass, and none of it in the node's allocatable."""
    if not any("/" in r for r in requests):
        return {}   # no extended resource asked for (they all have a domain): no list of classes per node
    mapping = extended_resource_classes(store) if mapping is None else mapping
    allocatable = (node_obj.get("status") or {}).get("allocatable") or {}
    return dict((r, mapping[r]) for r, v in requests.items()
                if v and r in mapping and _is_quantity_zero(allocatable.get(r)))


def device_plugin_requests(store, requests, node_obj):
    """The requests NodeResourcesFit checks on ``node_obj``: all but those DRA serves there."""
    served = dra_served(store, requests, node_obj)
    return dict((r, v) for r, v in requests.items() if r not in served) if served else requests


def extended_claim(store, pod):
    """The pod's special claim from an earlier cycle, or None."""
    meta = pod["metadata"]
    claims, _rv = store.list("resourceclaims", meta.get("namespace"))
    for claim in claims:
        cmeta = claim["metadata"]
        if (cmeta.get("annotations") or {}).get(EXTENDED_CLAIM_ANNOTATION) == "true" and any(
                r.get("uid") == meta.get("uid") and r.get("controller") for r in cmeta.get("ownerReferences") or []):
            return claim
    return None


def _extended_requests(pod, served):
    """The special claim's requests and the pod's request mappings for the resources in ``served``.
    Simplification: init containers get their own requests (upstream lets a non-sidecar init container reuse
    a later container's devices); the collection's pods have no init containers asking for devices."""
    spec = pod.get("spec") or {}
    containers = list(spec.get("initContainers") or []) + list(spec.get("containers") or [])
    requests, mappings = [], []
    for resource in sorted(served):
        for index, container in enumerate(containers):
            res = container.get("resources") or {}
            wanted = dict(res.get("limits") or {})
            wanted.update(res.get("requests") or {})
            if resource not in wanted or _is_quantity_zero(wanted[resource]):
                continue
            name = "container-%d-request-%d" % (index, sorted(wanted).index(resource))
            exact = {"deviceClassName": served[resource], "allocationMode": "ExactCount",
                     "count": int(str(wanted[resource]))}
            requests.append({"name": name, "exactly": exact})
            mappings.append({"containerName": container.get("name"), "resourceName": resource, "requestName": name})
    requests.sort(key=lambda r: r["name"])
    return requests, mappings


def _pick(store, request, devices, taken):
    """Results for one request from the free devices matching its class and selectors, or None."""
    exact = request.get("exactly") or {}
    device_class = store.get("deviceclasses", None, exact.get("deviceClassName") or "")
    if device_class is None:
        return None
    selectors = [s["cel"]["expression"] for s in ((device_class.get("spec") or {}).get("selectors") or []) +
                 (exact.get("selectors") or []) if isinstance(s, dict) and s.get("cel")]
    free = [d for d in devices if (d["driver"], d["pool"], d["name"]) not in taken
            and all(selector_matches(s, d) for s in selectors)]
    want = len(free) if exact.get("allocationMode") == "All" else int(exact.get("count") or 1)
    if not free or len(free) < want:
        return None
    results = []
    for dev in free[:want]:
        taken.add((dev["driver"], dev["pool"], dev["name"]))
        results.append({"request": request.get("name"), "driver": dev["driver"], "pool": dev["pool"],
                        "device": dev["name"]})
    return results


def plan_allocation(store, pod, node, node_obj=None, requests=None):
    """{claim name: results} for the pod's unallocated claims on ``node``, or None when they cannot all be
    allocated there (a claim missing, allocated to another node, or too few matching free devices). The
    special claim for extended resources DRA serves on the node is planned under the key None, as
    (requests, mappings, results)."""
    namespace = pod["metadata"].get("namespace")
    devices = _node_devices(store, node)
    taken = _taken(store)
    plan = {}
    served = dra_served(store, requests, node_obj) if node_obj is not None and requests else {}
    if served:
        if extended_claim(store, pod) is not None:
            # a claim from an earlier cycle: upstream deletes it in PostFilter and tries anew
            return None
        ext_requests, mappings = _extended_requests(pod, served)
        results = []
        for request in ext_requests:
            picked = _pick(store, request, devices, taken)
            if picked is None:
                return None
            results.extend(picked)
        plan[None] = (ext_requests, mappings, results)
    for _pod_claim, claim_name in _pod_claims(pod):
        claim = store.get("resourceclaims", namespace, claim_name) if claim_name else None
        if claim is None:
            return None
        if (claim.get("status") or {}).get("allocation"):
            if _allocated_node(claim) not in (None, node):
                return None
            continue
        results = []
        for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
            picked = _pick(store, request, devices, taken)
            if picked is None:
                return None
            results.extend(picked)
        plan[claim_name] = results
    return plan


def waiting_for_claims(store, pod):
    """Whether the scheduler holds the pod back before trying any node (DynamicResources' PreEnqueue): a claim
    made from a template is not created yet, or a claim it names is missing or being deleted. Such a pod gets no
    PodScheduled condition; the claim's creation brings it back (dynamicresources.go PreEnqueue and
    foreachPodResourceClaim, kubernetes 1.33/1.34)."""
    namespace = pod["metadata"].get("namespace")
    for _pod_claim, claim_name in _pod_claims(pod):
        claim = store.get("resourceclaims", namespace, claim_name) if claim_name else None
        if claim is None or claim["metadata"].get("deletionTimestamp"):
            return True
    return False


def prefilter_rejection(store, pod):
    """The reason DynamicResources' PreFilter refuses the pod before any node is tried, or None: a request of an
    unallocated claim naming a DeviceClass that does not exist. The apiserver accepts such a claim (validation
    checks only that deviceClassName is a DNS subdomain, pkg/apis/resource/validation ValidateDeviceClassName);
    kube-scheduler answers UnschedulableAndUnresolvable "request <request>: device class <name> does not exist"
    (dynamicresources.go validateDeviceClass, kubernetes 1.34), and the pod waits for a DeviceClass event."""
    namespace = pod["metadata"].get("namespace")
    for _pod_claim, claim_name in _pod_claims(pod):
        claim = store.get("resourceclaims", namespace, claim_name) if claim_name else None
        if claim is None or (claim.get("status") or {}).get("allocation"):
            continue
        for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
            class_name = (request.get("exactly") or {}).get("deviceClassName")
            if class_name and store.get("deviceclasses", None, class_name) is None:
                return "request %s: device class %s does not exist" % (request.get("name"), class_name)
    return None


# DynamicResources' PostFilter for a pod with claims it tried to allocate and could not (no allocated claim to
# give back): dynamicresources.go PostFilter, kubernetes 1.33/1.34. RunPostFilterPlugins joins the reasons of
# the post-filter plugins (DynamicResources before DefaultPreemption) with ", ".
POST_FILTER_STILL = "still not schedulable"
# The same PostFilter after PreFilter refused the pod: PreFilter returned before recording the pod's claims in
# its cycle state, so PostFilter's fast path answers (state.claims.empty()).
POST_FILTER_NO_CLAIMS = "no new claims to deallocate"


def post_filter_message(pod, prefiltered=False):
    """What DynamicResources' PostFilter adds to the scheduler's message for ``pod``: "no new claims to
    deallocate" for a pod without spec.resourceClaims (its fast path; kube-scheduler v1.36.2 with
    DRAExtendedResource, on by default, says so for every such pod, cpu-only ones included: measured by
    tests/integration/test_facts.py) and after a PreFilter refusal (``prefiltered``), else "still not
    schedulable"."""
    if not (pod.get("spec") or {}).get("resourceClaims"):
        return POST_FILTER_NO_CLAIMS
    return POST_FILTER_NO_CLAIMS if prefiltered else POST_FILTER_STILL


def _needs_dra(store, pod, node_obj, requests):
    return bool((pod.get("spec") or {}).get("resourceClaims")) or bool(
        node_obj is not None and requests and dra_served(store, requests, node_obj))


def claim_filter_reasons(store, pod, node, node_obj=None, requests=None):
    """The scheduler's DynamicResources filter: [] when the pod's claims (and the extended resources DRA
    serves on the node, given ``node_obj`` and the pod's ``requests``) can be allocated on the node.
    A refusal is UnschedulableAndUnresolvable (``statusUnschedulable`` in dynamicresources.go), so preemption
    answers "Preemption is not helpful for scheduling" for that node."""
    if not _needs_dra(store, pod, node_obj, requests):
        return []
    return [] if plan_allocation(store, pod, node, node_obj, requests) is not None else [NO_ALLOCATION]


def _node_selector(node):
    return {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}


def allocate_claims(store, pod, node, node_obj=None, requests=None):
    """Write the allocation (devices, node selector) and reserve every claim of the pod for it, as the
    scheduler does before binding; create the special claim for extended resources DRA serves and record it
    in the pod's status. Returns False when the claims could not be allocated after all."""
    if not _needs_dra(store, pod, node_obj, requests):
        return True
    plan = plan_allocation(store, pod, node, node_obj, requests)
    if plan is None:
        return False
    namespace, meta = pod["metadata"].get("namespace"), pod["metadata"]
    consumer = {"resource": "pods", "name": meta.get("name"), "uid": meta.get("uid")}
    if None in plan:
        ext_requests, mappings, results = plan.pop(None)
        created = store.create("resourceclaims", {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"generateName": meta["name"] + "-extended-resources-", "namespace": namespace,
                         "annotations": {EXTENDED_CLAIM_ANNOTATION: "true"},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": meta["name"],
                                              "uid": meta.get("uid"), "controller": True}]},
            "spec": {"devices": {"requests": ext_requests}}})
        claim_name = created["metadata"]["name"]

        def allocate(claim, results=results):
            claim["status"] = {"allocation": {"devices": {"results": results}, "nodeSelector": _node_selector(node)},
                               "reservedFor": [dict(consumer)]}
            claim["metadata"]["finalizers"] = [DELETE_PROTECTION]
        store.mutate("resourceclaims", namespace, claim_name, allocate)

        def record(obj, claim_name=claim_name, mappings=mappings):
            obj.setdefault("status", {})["extendedResourceClaimStatus"] = {
                "requestMappings": mappings, "resourceClaimName": claim_name}
        store.mutate("pods", namespace, meta["name"], record)
    for _pod_claim, claim_name in _pod_claims(pod):
        def fn(claim, results=plan.get(claim_name)):
            status = claim.setdefault("status", {})
            if results is not None and not status.get("allocation"):
                status["allocation"] = {"devices": {"results": results}, "nodeSelector": {"nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}
                finalizers = claim["metadata"].setdefault("finalizers", [])
                if DELETE_PROTECTION not in finalizers:
                    finalizers.append(DELETE_PROTECTION)
            reserved = status.setdefault("reservedFor", [])
            if consumer not in reserved:
                reserved.append(consumer)
        store.mutate("resourceclaims", namespace, claim_name, fn)
    return True


def sync_claims(store):
    """The resource claim controller: claims from templates for pods (named <pod>-<claim>-<random>, owned by
    the pod, listed in its status.resourceClaimStatuses), reservations of pods that are gone dropped, an
    unreserved claim deallocated, generated claims deleted with their pod."""
    import random
    import string

    pods, _rv = store.list("pods")
    live = set(p["metadata"].get("uid") for p in pods if not p["metadata"].get("deletionTimestamp"))
    for pod in pods:
        meta = pod["metadata"]
        if meta.get("deletionTimestamp") or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        have = dict(_pod_claims(pod))
        for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
            template_name = entry.get("resourceClaimTemplateName")
            if not template_name or have.get(entry.get("name")):
                continue
            template = store.get("resourceclaimtemplates", meta.get("namespace"), template_name)
            if template is None:
                continue
            tspec = template.get("spec") or {}
            name = "%s-%s-%s" % (meta["name"], entry.get("name"),
                                 "".join(random.choices(string.ascii_lowercase + string.digits, k=5)))
            claim_meta = copy.deepcopy(tspec.get("metadata") or {})
            claim_meta.update({"name": name, "namespace": meta.get("namespace")})
            claim_meta.setdefault("annotations", {})[POD_CLAIM_ANNOTATION] = entry.get("name")
            # no blockOwnerDeletion (measured on v1.36.2 by tests/integration/test_facts.py)
            claim_meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": meta["name"],
                                              "uid": meta.get("uid"), "controller": True}]
            store.create("resourceclaims", {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                                            "metadata": claim_meta, "spec": copy.deepcopy(tspec.get("spec") or {})})

            def record(obj, pod_claim=entry.get("name"), claim_name=name):
                statuses = obj.setdefault("status", {}).setdefault("resourceClaimStatuses", [])
                statuses.append({"name": pod_claim, "resourceClaimName": claim_name})
            store.mutate("pods", meta.get("namespace"), meta["name"], record)
    claims, _rv = store.list("resourceclaims")
    for claim in claims:
        cmeta = claim["metadata"]
        owner = [r for r in cmeta.get("ownerReferences") or [] if r.get("kind") == "Pod" and r.get("controller")]
        if owner and owner[0].get("uid") not in live:
            store.delete("resourceclaims", cmeta.get("namespace"), cmeta["name"])
            continue
        reserved = (claim.get("status") or {}).get("reservedFor") or []
        unused_and_deleted = cmeta.get("deletionTimestamp") and not reserved
        if any(r.get("uid") not in live for r in reserved) or unused_and_deleted:
            def drop(obj):
                status = obj.setdefault("status", {})
                status["reservedFor"] = [r for r in status.get("reservedFor") or [] if r.get("uid") in live]
                if not status["reservedFor"]:
                    # no longer in use: deallocated, and the scheduler's delete protection lifted, so a claim
                    # deleted while in use goes now (pkg/controller/resourceclaim/controller.go syncClaim)
                    status.pop("reservedFor")
                    status.pop("allocation", None)
                    meta = obj["metadata"]
                    meta["finalizers"] = [f for f in meta.get("finalizers") or [] if f != DELETE_PROTECTION]
            store.mutate("resourceclaims", cmeta.get("namespace"), cmeta["name"], drop)


def claims_signature(store, pod):
    """Part of the scheduler's memo key: a pod with claims is tried again after any write (slices, claims and
    classes change without a pod or node event); others keep their memo."""
    if not (pod.get("spec") or {}).get("resourceClaims") and not _asks_mapped(store, pod):
        return ""
    return "|dra:%s" % store.resource_version


def _asks_mapped(store, pod):
    mapping = extended_resource_classes(store)
    for container in ((pod.get("spec") or {}).get("containers") or []) + \
            ((pod.get("spec") or {}).get("initContainers") or []):
        res = container.get("resources") or {}
        if any(r in mapping for r in list(res.get("limits") or {}) + list(res.get("requests") or {})):
            return True
    return False
