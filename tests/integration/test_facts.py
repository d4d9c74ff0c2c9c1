# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fidelity probes: each row of tests/simcluster/FACTS.md sends the same requests to the simulated cluster and to a
real kube-apiserver, and compares what the row says matters (status code, reason, the message where the row quotes
it, the fields it names).

Every row is one test, run twice: `test_fact[<row>-sim]` checks the simulated cluster's answer against the row;
`test_fact[<row>-real]` checks the real control plane's answer against the row and against the simulated
cluster's. The real control plane is the cluster of KUBECONFIG when set, else one started from ../shared/k8s
(up.sh, state under .cache/, free ports) for this module and stopped (down.sh) after it; when neither is there,
the real half skips and says why. Each probe makes objects of its own run-unique names and deletes them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import fcntl
import itertools
import json
import os
import re
import time
import uuid

import pytest

from tests.simcluster import SimCluster
from tests.support import control_plane

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUN_ID = uuid.uuid4().hex[:6]
_SERIAL = itertools.count(1)
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
GENERIC_422 = "the server rejected our request due to an error in our request"
SIM_CONFIG = {"nodes": []}


# ------------------------------------------------------------------------------------------------- clusters

class Target:
    """One cluster: raw HTTPS requests as the admin (or a given token), objects named per probe, cleanups."""

    def __init__(self, kind, server, ca_file=None, token=None, cert=None, sim=None):
        import urllib3
        self.kind = kind
        self.server = server.rstrip("/")
        self.token = token
        self.sim = sim
        kwargs = {"ca_certs": ca_file, "cert_reqs": "CERT_REQUIRED" if ca_file else "CERT_NONE"}
        if cert:
            kwargs["cert_file"], kwargs["key_file"] = cert
        self.http = urllib3.PoolManager(num_pools=4, maxsize=4, **kwargs)
        self.namespace = None
        self._cleanups = []

    @classmethod
    def from_kubeconfig(cls, kind, path):
        import kubernetes
        conf = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(config_file=path, client_configuration=conf)
        token = None
        for value in conf.api_key.values():   # {"BearerToken": "Bearer <token>"} (or "authorization" in old clients)
            token = value.split(" ", 1)[-1]
        cert = (conf.cert_file, conf.key_file) if conf.cert_file else None
        return cls(kind, conf.host, ca_file=conf.ssl_ca_cert if conf.verify_ssl else None, token=token, cert=cert)

    def name(self, what="x"):
        return "kf-%s-%s-%d" % (RUN_ID, what, next(_SERIAL))

    def req(self, method, path, body=None, content_type="application/json", token=None, timeout=15, headers=None):
        """(status, parsed JSON body or text, headers)"""
        hdrs = dict(headers or {})
        token = self.token if token is None else token
        if token:
            hdrs["Authorization"] = "Bearer " + token
        data = None
        if body is not None:
            data = body if isinstance(body, (bytes, str)) else json.dumps(body)
            hdrs["Content-Type"] = content_type
        resp = self.http.request(method, self.server + path, body=data, headers=hdrs, timeout=timeout,
                                 retries=False, redirect=False)
        raw = resp.data.decode("utf-8", "replace")
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = raw
        return resp.status, parsed, resp.headers

    def watch(self, path, seconds=30):
        """(status, [events]) of a watch the server ends itself (timeoutSeconds in path) or after `seconds`."""
        hdrs = {"Authorization": "Bearer " + self.token} if self.token else {}
        resp = self.http.request("GET", self.server + path, headers=hdrs, preload_content=False, retries=False,
                                 timeout=seconds)
        events, buf = [], b""
        try:
            for chunk in resp.stream(4096):
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.strip():
                        events.append(json.loads(line))
        except Exception:  # pylint: disable=broad-except
            pass    # the client-side timeout: no more events
        finally:
            resp.release_conn()
        if buf.strip():
            events.append(json.loads(buf))
        return resp.status, events

    def ok(self, method, path, body=None, content_type="application/json", expect=(200, 201)):
        code, parsed, _headers = self.req(method, path, body, content_type)
        assert code in expect, "%s: %s %s answered %s %s" % (self.kind, method, path, code, parsed)
        return parsed

    def later(self, method, path):
        """Delete (or send method to) path when the probe ends."""
        self._cleanups.append((method, path))

    def cleanup(self):
        while self._cleanups:
            method, path = self._cleanups.pop()
            with contextlib.suppress(Exception):
                self.req(method, path)

    # -- objects a probe needs
    def node(self, name=None, status=None, **meta):
        name = name or self.name("node")
        body = {"apiVersion": "v1", "kind": "Node", "metadata": dict(meta, name=name)}
        if status is not None:
            body["status"] = status
        self.ok("POST", "/api/v1/nodes", body)
        self.later("DELETE", "/api/v1/nodes/" + name)
        return name

    def node_with_capacity(self, capacity):
        name = self.node()
        self.ok("PATCH", "/api/v1/nodes/%s/status" % name,
                [{"op": "add", "path": "/status/capacity", "value": capacity}], JSON_PATCH)
        return name

    def get(self, path):
        return self.ok("GET", path, expect=(200,))


@pytest.fixture(scope="module")
def sim_target():
    with _sim(controllers=False) as target:
        yield target


@pytest.fixture(scope="module")
def sim_controllers_target():
    with _sim(controllers=True) as target:
        yield target


@contextlib.contextmanager
def _sim(controllers):
    sim = SimCluster(SIM_CONFIG, controllers=controllers).start()
    try:
        target = Target("sim", sim.url, ca_file=sim.ca_cert_path, token=sim.admin_token, sim=sim)
        target.namespace = _make_namespace(target)
        yield target
        target.req("DELETE", "/api/v1/namespaces/" + target.namespace)
    finally:
        sim.stop()


def _make_namespace(target):
    """A namespace for the probes, once its ServiceAccount `default` exists (made by a controller on a real one)."""
    name = target.name("ns")
    target.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    deadline = time.time() + 30
    while target.req("GET", "/api/v1/namespaces/%s/serviceaccounts/default" % name)[0] != 200:
        if target.sim is not None:   # no controllers: the probes' namespace gets its account as a controller would
            target.ok("POST", "/api/v1/namespaces/%s/serviceaccounts" % name, {"metadata": {"name": "default"}})
            continue
        assert time.time() < deadline, "%s: no ServiceAccount default in %s after 30 s" % (target.kind, name)
        time.sleep(0.2)
    return name


@contextlib.contextmanager
def _started_control_plane():
    """(target, None) from KUBECONFIG or a control plane started here; (None, reason) when there is none."""
    if os.environ.get("KUBECONFIG"):
        yield Target.from_kubeconfig("real", os.environ["KUBECONFIG"]), None
        return
    home = control_plane.locate()
    if home is None:
        yield None, ("KUBECONFIG is not set and no real control plane was found ($KUBEHW_K8S_HOME, or ../shared/k8s "
                     "beside the checkout): none to compare with")
        return
    # pytest-xdist workers of one run share one control plane: the first starts it, the last owner stops it
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID", "%s-%d" % (RUN_ID, os.getpid()))[:12]
    base = os.path.join(REPO_ROOT, ".cache", "facts-k8s")
    # the unpacked binaries are kept for later runs (up.sh unpacks a newer .xz again); their folder's lock also
    # guards starting, sharing and stopping
    binaries = os.path.join(base, "bin")
    os.makedirs(binaries, exist_ok=True)
    plane = control_plane.ControlPlane(home, os.path.join(base, run), bin_dir=binaries)
    reason = None
    with _locked(binaries):
        if os.path.exists(os.path.join(plane.state_dir, "facts-ready")):
            plane.add_owner()
        else:
            try:
                plane.start()
                open(os.path.join(plane.state_dir, "facts-ready"), "w").close()
            except control_plane.ControlPlaneError as err:
                reason = str(err)[-2000:]
    try:
        if reason:
            yield None, reason
            return
        yield Target.from_kubeconfig("real", plane.kubeconfig), None
    finally:
        with _locked(binaries):
            if not plane.remove_owner():
                plane.stop(wipe=True)


@contextlib.contextmanager
def _locked(folder):
    with open(os.path.join(folder, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@pytest.fixture(scope="module")
def real_target():
    with _started_control_plane() as (target, reason):
        if target is None:
            print("\nreal control plane: " + reason)
            yield reason
            return
        target.namespace = _make_namespace(target)
        yield target
        target.req("DELETE", "/api/v1/namespaces/" + target.namespace)


# ------------------------------------------------------------------------------------------------- rows

ROWS = []


def row(row_id, expect, controllers=False, known_difference=None):
    """Register probe(target) -> observation; expect: the row's observation (a dict), or a callable check.

    controllers: the row is about what a controller or the scheduler does, so the simulated half runs on a
    simulated cluster with its controllers (the real control plane always has them).
    known_difference: the simulated cluster is known to answer differently in a file of the lead engineer's
    (controllers.py): the row's sim half and comparison are expected to fail (strict: a fix makes them XPASS)."""
    def register(probe):
        probe.controllers = controllers
        probe.known_difference = known_difference
        probe.row_id = row_id
        ROWS.append(pytest.param(probe, expect, id=row_id))
        return probe
    return register


def status_fields(body, *extra):
    """code, reason, message (and details when asked) of a Status body."""
    if not isinstance(body, dict):
        return {"body": body}
    out = {"kind": body.get("kind"), "reason": body.get("reason"), "message": body.get("message")}
    for key in extra:
        out[key] = body.get(key)
    return out


def answer(code, body, *extra):
    out = status_fields(body, *extra)
    out["code"] = code
    return out


def patch_status(t, node, ops, sub="/status", content_type=JSON_PATCH):
    return t.req("PATCH", "/api/v1/nodes/%s%s" % (node, sub), ops, content_type)[:2]


def generic(code=422):
    return {"code": code, "kind": "Status", "reason": "Invalid", "message": GENERIC_422, "details": {}}


DONGLE = "/status/capacity/example.com~1dongle"


# -- Node status: JSON patch on PATCH /api/v1/nodes/<name>/status

@row("node-status-add-key-without-capacity-map-422", generic())
def probe_node_status_add_key_without_capacity_map_422(t):
    node = t.node()
    code, body = patch_status(t, node, [{"op": "add", "path": DONGLE, "value": "4"}])
    return answer(code, body, "details")


@row("node-status-add-empty-capacity-map-dropped", {"code": 200, "capacity": None, "next_add": generic()})
def probe_node_status_add_empty_capacity_map_dropped(t):
    node = t.node()
    code, body = patch_status(t, node, [{"op": "add", "path": "/status/capacity", "value": {}}])
    capacity = body["status"].get("capacity") if code == 200 else body
    code2, body2 = patch_status(t, node, [{"op": "add", "path": DONGLE, "value": "4"}])
    return {"code": code, "capacity": capacity, "next_add": answer(code2, body2, "details")}


@row("node-status-add-whole-capacity-map-200", {
    "code": 200, "capacity": {"example.com/dongle": "4"}, "allocatable": {"example.com/dongle": "4"}})
def probe_node_status_add_whole_capacity_map_200(t):
    node = t.node()
    code, body = patch_status(t, node, [{"op": "add", "path": "/status/capacity",
                                         "value": {"example.com/dongle": "4"}}])
    stored = t.get("/api/v1/nodes/" + node)["status"]
    return {"code": code, "capacity": stored.get("capacity"), "allocatable": stored.get("allocatable")}


@row("node-status-add-existing-key-replaces", {"code": 200, "capacity": {"example.com/dongle": "6"}})
def probe_node_status_add_existing_key_replaces(t):
    node = t.node_with_capacity({"example.com/dongle": "4"})
    code, body = patch_status(t, node, [{"op": "add", "path": DONGLE, "value": "6"}])
    return {"code": code, "capacity": t.get("/api/v1/nodes/" + node)["status"].get("capacity")}


@row("node-status-replace-missing-key-adds", {"code": 200, "capacity": {"example.com/dongle": "4", "example.com/x": "2"}})
def probe_node_status_replace_missing_key_adds(t):
    node = t.node_with_capacity({"example.com/dongle": "4"})
    code, body = patch_status(t, node, [{"op": "replace", "path": "/status/capacity/example.com~1x", "value": "2"}])
    return {"code": code, "capacity": t.get("/api/v1/nodes/" + node)["status"].get("capacity")}


@row("node-status-remove-missing-key-422", generic())
def probe_node_status_remove_missing_key_422(t):
    node = t.node_with_capacity({"example.com/dongle": "4"})
    code, body = patch_status(t, node, [{"op": "remove", "path": "/status/capacity/example.com~1x"}])
    return answer(code, body, "details")


@row("node-status-test-op-mismatch-422", generic())
def probe_node_status_test_op_mismatch_422(t):
    node = t.node_with_capacity({"example.com/dongle": "4"})
    code, body = patch_status(t, node, [{"op": "test", "path": DONGLE, "value": "5"},
                                        {"op": "replace", "path": DONGLE, "value": "6"}])
    return answer(code, body, "details")


@row("node-status-stale-resourceversion-409", {
    "code": 409, "kind": "Status", "reason": "Conflict", "stored": {"example.com/dongle": "4"},
    "message": 'Operation cannot be fulfilled on nodes "<node>": the object has been modified; please apply your '
               'changes to the latest version and try again'})
def probe_node_status_stale_resourceversion_409(t):
    node = t.node_with_capacity({"example.com/dongle": "4"})
    stale = t.get("/api/v1/nodes/" + node)["metadata"]["resourceVersion"]
    t.ok("PATCH", "/api/v1/nodes/" + node, {"metadata": {"labels": {"touched": "yes"}}}, MERGE_PATCH)
    code, body = patch_status(t, node, [{"op": "replace", "path": "/metadata/resourceVersion", "value": stale},
                                        {"op": "replace", "path": DONGLE, "value": "6"}])
    out = answer(code, body)
    out["message"] = (out["message"] or "").replace(node, "<node>")
    out["stored"] = t.get("/api/v1/nodes/" + node)["status"]["capacity"]
    return out


@row("node-status-patch-body-object-400", {
    "code": 400, "kind": "Status", "reason": "BadRequest",
    "message": "error decoding patch: json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp"})
def probe_node_status_patch_body_object_400(t):
    node = t.node_with_capacity({"example.com/dongle": "4"})
    return answer(*patch_status(t, node, {"op": "add", "path": DONGLE, "value": "6"}))


def _invalid_value(t, value, name="example.com/dongle"):
    node = t.node_with_capacity({"example.com/dongle": "4"})
    code, body = patch_status(t, node, [{"op": "add", "path": "/status/capacity/" + name.replace("/", "~1"),
                                         "value": value}])
    out = answer(code, body)
    out["message"] = (out["message"] or "").replace(node, "<node>")
    details = body.get("details") or {} if isinstance(body, dict) else {}
    out["causes"] = [(c.get("reason"), c.get("field")) for c in details.get("causes") or []]
    out["stored"] = t.get("/api/v1/nodes/" + node)["status"]["capacity"]
    return out


def _invalid_capacity(value, detail, field="status.capacity.example.com/dongle", reason="FieldValueInvalid"):
    return {"code": 422, "kind": "Status", "reason": "Invalid", "causes": [(reason, field)],
            "stored": {"example.com/dongle": "4"},
            "message": 'Node "<node>" is invalid: %s: Invalid value: %s: %s' % (field, value, detail)}


@row("node-status-fractional-value-4.5-422", _invalid_capacity('"4500m"', "must be an integer"))
def probe_node_status_fractional_value_4_5_422(t):
    return _invalid_value(t, "4.5")


@row("node-status-fractional-value-500m-422", _invalid_capacity('"500m"', "must be an integer"))
def probe_node_status_fractional_value_500m_422(t):
    return _invalid_value(t, "500m")


@row("node-status-negative-value-422", _invalid_capacity('"-1"', "must be greater than or equal to 0"))
def probe_node_status_negative_value_422(t):
    return _invalid_value(t, "-1")


def _patched_object(out):
    """The 'patch' error quotes the whole patched object: keep what it says about capacity."""
    found = re.match(r'^(.*Invalid value: )"(.*)"(: quantities .*)$', out["message"], re.S)
    if found:
        out["message"] = found.group(1) + '"<the patched node>"' + found.group(3)
        out["patched_capacity"] = json.loads(json.loads('"%s"' % found.group(2)))["status"].get("capacity")
    return out


@row("node-status-unparsable-value-422", {
    "code": 422, "kind": "Status", "reason": "Invalid", "causes": [("FieldValueInvalid", "patch")],
    "stored": {"example.com/dongle": "4"}, "patched_capacity": {"example.com/dongle": "abc"},
    "message": ' "" is invalid: patch: Invalid value: "<the patched node>": quantities must match the regular expression '
               "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"})
def probe_node_status_unparsable_value_422(t):
    return _patched_object(_invalid_value(t, "abc"))


@row("node-status-number-and-1Ki-accepted", {
    "codes": [200, 200], "capacity": {"example.com/dongle": "4", "example.com/big": "1Ki"}})
def probe_node_status_number_and_1ki_accepted(t):
    node = t.node_with_capacity({"example.com/dongle": "1"})
    first = patch_status(t, node, [{"op": "add", "path": DONGLE, "value": 4}])[0]
    second = patch_status(t, node, [{"op": "add", "path": "/status/capacity/example.com~1big", "value": "1Ki"}])[0]
    return {"codes": [first, second], "capacity": t.get("/api/v1/nodes/" + node)["status"]["capacity"]}


@row("node-status-patch-on-main-resource-drops-status", {
    "code": 200, "answered": {"example.com/dongle": "4"}, "stored": {"example.com/dongle": "4"}})
def probe_node_status_patch_on_main_resource_drops_status(t):
    node = t.node_with_capacity({"example.com/dongle": "4"})
    code, body = patch_status(t, node, [{"op": "add", "path": DONGLE, "value": "6"}], sub="")
    return {"code": code, "answered": body["status"]["capacity"],
            "stored": t.get("/api/v1/nodes/" + node)["status"]["capacity"]}


@row("node-status-missing-node-404", {"code": 404, "kind": "Status", "reason": "NotFound",
                                      "message": 'nodes "<node>" not found', "details": {"name": "<node>", "kind": "nodes"}})
def probe_node_status_missing_node_404(t):
    node = t.name("absent")
    out = answer(*patch_status(t, node, [{"op": "add", "path": DONGLE, "value": "6"}]), "details")
    return json.loads(json.dumps(out).replace(node, "<node>"))


@row("node-status-quantities-canonical", {"capacity": {"cpu": "4", "memory": "1536Mi", "dongle": "4500m",
                                                       "example.com/dongle": "4", "example.com/big": "2k"}})
def probe_node_status_quantities_canonical(t):
    node = t.node_with_capacity({"cpu": 4, "memory": "1.5Gi", "dongle": "4.5", "example.com/dongle": 4,
                                 "example.com/big": "2000"})
    return {"capacity": t.get("/api/v1/nodes/" + node)["status"]["capacity"]}


ODD_NAMES = ["dongle", "kubernetes.io/foo", "example.com/Dongle_X", "requests.example.com/dongle",
             "example.com/bad name", "a/b/c", "-bad.com/x", "example.com/"]


@row("node-status-resource-names-not-validated", {"code": 200, "capacity": dict.fromkeys(ODD_NAMES, "1")})
def probe_node_status_resource_names_not_validated(t):
    node = t.node()
    code = patch_status(t, node, [{"op": "add", "path": "/status/capacity", "value": dict.fromkeys(ODD_NAMES, "1")}])[0]
    return {"code": code, "capacity": t.get("/api/v1/nodes/" + node)["status"].get("capacity")}


@row("allocatable-defaulted-once-never-follows", {
    "first": {"example.com/dongle": "4"}, "after": {"example.com/dongle": "4"}, "capacity": {"example.com/dongle": "6"}})
def probe_allocatable_defaulted_once_never_follows(t):
    node = t.node_with_capacity({"example.com/dongle": "4"})
    first = t.get("/api/v1/nodes/" + node)["status"].get("allocatable")
    patch_status(t, node, [{"op": "add", "path": DONGLE, "value": "6"}])
    status = t.get("/api/v1/nodes/" + node)["status"]
    return {"first": first, "after": status.get("allocatable"), "capacity": status.get("capacity")}


def _without_taints(spec):
    return dict((k, v) for k, v in (spec or {}).items() if k != "taints")


@row("status-subresource-stores-labels-and-annotations", dict.fromkeys(
    ["node", "pod", "daemonset", "namespace"], {"code": 200, "labels": {"touched": "yes"}, "annotations": {"an": "x"},
                                                "spec_kept": True, "rv_bumped": True}))
def probe_status_subresource_stores_labels_and_annotations(t):
    out = {}
    namespaced = "/api/v1/namespaces/%s" % t.namespace
    ds_labels = {"app": t.name("ds")}
    for kind, path, body in (
            ("node", "/api/v1/nodes", {"metadata": {"name": t.name("node")}}),
            ("pod", namespaced + "/pods", _pod(t.name("pod"))),
            ("daemonset", "/apis/apps/v1/namespaces/%s/daemonsets" % t.namespace, {"metadata": {"name": t.name("ds")}, "spec": {
                "selector": {"matchLabels": ds_labels}, "template": {"metadata": {"labels": ds_labels}, "spec": {
                    "containers": [{"name": "c", "image": "registry.example/pause:1"}]}}}}),
            ("namespace", "/api/v1/namespaces", {"metadata": {"name": t.name("ns")}})):
        created = t.ok("POST", path, body)
        url = "%s/%s" % (path, created["metadata"]["name"])
        t.later("DELETE", url + ("?gracePeriodSeconds=0" if kind == "pod" else ""))
        code, patched, _headers = t.req("PATCH", url + "/status", {
            "metadata": {"labels": {"touched": "yes"}, "annotations": {"an": "x"}}, "spec": {"unschedulable": True}},
            MERGE_PATCH)
        meta = patched.get("metadata") or {}
        out[kind] = {"code": code, "labels": {"touched": (meta.get("labels") or {}).get("touched")},
                     "annotations": {"an": (meta.get("annotations") or {}).get("an")},
                     # taints aside: the node lifecycle controller changes a new node's taints on its own time
                     "spec_kept": _without_taints(patched.get("spec")) == _without_taints(created.get("spec")),
                     "rv_bumped": int(meta.get("resourceVersion", 0)) > int(created["metadata"]["resourceVersion"])}
    return out


# -- Creating nodes

NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
ZERO_NODE_STATUS = {"daemonEndpoints": {"kubeletEndpoint": {"Port": 0}},
                    "nodeInfo": dict.fromkeys(["architecture", "bootID", "containerRuntimeVersion", "kernelVersion",
                                               "kubeProxyVersion", "kubeletVersion", "machineID", "operatingSystem",
                                               "osImage", "systemUUID"], "")}


@row("node-create-without-status-stores-zero-values", {
    "code": 201, "spec": {"taints": [NOT_READY_TAINT]}, "status": ZERO_NODE_STATUS,
    "stored_spec": {"taints": [NOT_READY_TAINT]}, "stored_status": ZERO_NODE_STATUS})
def probe_node_create_without_status_stores_zero_values(t):
    name = t.name("node")
    code, body, _headers = t.req("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
    t.later("DELETE", "/api/v1/nodes/" + name)
    stored = t.get("/api/v1/nodes/" + name)
    return {"code": code, "spec": body.get("spec"), "status": body.get("status"), "stored_spec": stored.get("spec"),
            "stored_status": stored.get("status")}


# -- Pod validation of extended resources

def _pod(name, resources=None, **spec):
    """A pod; one that names neither a node nor a node selector gets a selector no node matches, so a real
    scheduler leaves it unbound even where other probes' Ready nodes exist."""
    container = {"name": "c", "image": "registry.example/pause:1"}
    if resources is not None:
        container["resources"] = resources
    if "nodeName" not in spec and "nodeSelector" not in spec:
        spec["nodeSelector"] = {"kubehw-facts.example.com/never": "scheduled"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": dict({"containers": [container]}, **spec)}


def _create_pod(t, body, query=""):
    code, answer_body, _headers = t.req("POST", "/api/v1/namespaces/%s/pods%s" % (t.namespace, query), body)
    if code in (200, 201):
        t.later("DELETE", "/api/v1/namespaces/%s/pods/%s?gracePeriodSeconds=0" % (t.namespace, answer_body["metadata"]["name"]))
    return code, answer_body


def _pod_invalid(*causes):
    return {"code": 422, "kind": "Status", "reason": "Invalid", "causes": list(causes),
            "message": 'Pod "<pod>" is invalid: ' + (
                "%s: %s" % causes[0][1:] if len(causes) == 1 else "[%s]" % ", ".join("%s: %s" % c[1:] for c in causes))}


def _pod_refused(t, resources):
    name = t.name("pod")
    code, body = _create_pod(t, _pod(name, resources))
    out = answer(code, body)
    out["message"] = (out["message"] or "").replace(name, "<pod>")
    details = (body.get("details") or {}) if isinstance(body, dict) else {}
    out["causes"] = [(c.get("reason"), c.get("field"), c.get("message")) for c in details.get("causes") or []]
    return out


@row("pod-requests-must-equal-limits", _pod_invalid(
    ("FieldValueInvalid", "spec.containers[0].resources.requests", 'Invalid value: "1": must be equal to example.com/dongle limit of 2')))
def probe_pod_requests_must_equal_limits(t):
    return _pod_refused(t, {"limits": {"example.com/dongle": "2"}, "requests": {"example.com/dongle": "1"}})


@row("pod-requests-without-limits", _pod_invalid(
    ("FieldValueRequired", "spec.containers[0].resources.limits", "Required value: Limit must be set for non overcommitable resources")))
def probe_pod_requests_without_limits(t):
    return _pod_refused(t, {"requests": {"example.com/dongle": "1"}})


@row("pod-fractional-extended-resource", _pod_invalid(
    ("FieldValueInvalid", "spec.containers[0].resources.limits[example.com/dongle]", 'Invalid value: "1500m": must be an integer'),
    ("FieldValueInvalid", "spec.containers[0].resources.requests[example.com/dongle]", 'Invalid value: "1500m": must be an integer')))
def probe_pod_fractional_extended_resource(t):
    return _pod_refused(t, {"limits": {"example.com/dongle": "1.5"}})


@row("pod-resource-without-domain", _pod_invalid(*[
    ("FieldValueInvalid", "spec.containers[0].resources.%s[dongle]" % kind, 'Invalid value: "dongle": ' + detail)
    for kind in ("limits", "requests")
    for detail in ("must be a standard resource type or fully qualified", "must be a standard resource for containers")]))
def probe_pod_resource_without_domain(t):
    return _pod_refused(t, {"limits": {"dongle": "1"}})


@row("pod-limits-copied-to-requests", {"code": 201, "resources": {"limits": {"example.com/dongle": "2"},
                                                                  "requests": {"example.com/dongle": "2"}}})
def probe_pod_limits_copied_to_requests(t):
    code, body = _create_pod(t, _pod(t.name("pod"), {"limits": {"example.com/dongle": "2"}}))
    return {"code": code, "resources": body["spec"]["containers"][0].get("resources")}


QOS_CASES = {
    # only cpu and memory count: a pod that asks for devices alone is BestEffort
    "extended-resource-only": ({"limits": {"example.com/dongle": "1"}}, None),
    "cpu-memory-limits-and-a-device": ({"limits": {"cpu": "1", "memory": "1Gi", "example.com/dongle": "1"}}, None),
    # compared as amounts, after requests default to limits
    "same-memory-other-spelling": ({"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"memory": "1073741824"}},
                                   None),
    "cpu-request-below-limit": ({"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m"}}, None),
    "zero-request-only": ({"requests": {"cpu": "0"}}, None),
    # init containers count too
    "init-container-request": (None, {"requests": {"cpu": "100m"}}),
}


@row("pod-qos-class", {"extended-resource-only": "BestEffort", "cpu-memory-limits-and-a-device": "Guaranteed",
                       "same-memory-other-spelling": "Guaranteed", "cpu-request-below-limit": "Burstable",
                       "zero-request-only": "BestEffort", "init-container-request": "Burstable"})
def probe_pod_qos_class(t):
    out = {}
    for case, (resources, init_resources) in sorted(QOS_CASES.items()):
        body = _pod(t.name("pod"), resources)
        if init_resources is not None:
            body["spec"]["initContainers"] = [{"name": "init", "image": "registry.example/pause:1",
                                               "resources": init_resources}]
        code, answer_body = _create_pod(t, body)
        assert code == 201, (case, code, answer_body)
        out[case] = (answer_body.get("status") or {}).get("qosClass")
    return out


@row("pod-missing-runtime-class-403", {
    label: {"code": 403, "kind": "Status", "reason": "Forbidden", "details": {"name": "<pod>" + suffix, "kind": "pods"},
            "message": 'pods "<pod>%s" is forbidden: pod rejected: RuntimeClass "kf-absent-handler" not found' % suffix}
    for label, suffix in (("create", ""), ("dry-run", ""), ("generateName", "-"))})
def probe_pod_missing_runtime_class_403(t):
    name = t.name("pod")
    out = {}
    for label, query in (("create", ""), ("dry-run", "?dryRun=All")):
        code, body = _create_pod(t, _pod(name, runtimeClassName="kf-absent-handler"), query)
        out[label] = json.loads(json.dumps(answer(code, body, "details")).replace(name, "<pod>"))
    code, body = _create_pod(t, dict(_pod(None, runtimeClassName="kf-absent-handler"),
                                     metadata={"generateName": name + "-"}))
    out["generateName"] = json.loads(json.dumps(answer(code, body, "details")).replace(name, "<pod>"))
    return out


@row("pod-missing-service-account-403", {
    "code": 403, "kind": "Status", "reason": "Forbidden", "details": {"name": "<pod>", "kind": "pods"},
    "message": 'pods "<pod>" is forbidden: error looking up service account <ns>/kf-absent-account: '
               'serviceaccount "kf-absent-account" not found'})
def probe_pod_missing_service_account_403(t):
    name = t.name("pod")
    code, body = _create_pod(t, _pod(name, serviceAccountName="kf-absent-account"))
    return json.loads(json.dumps(answer(code, body, "details")).replace(name, "<pod>").replace(t.namespace, "<ns>"))


# -- Lists and watches

def _digits(text, *keep):
    """Numbers in a message are resourceVersions of the cluster at hand: <n>, except those kept."""
    return re.sub(r"\d+", lambda m: m.group(0) if m.group(0) in keep else "<n>", text or "")


@row("watch-from-future-rv-sends-nothing", {"code": 200, "events": []})
def probe_watch_from_future_rv_sends_nothing(t):
    code, events = t.watch("/api/v1/namespaces/%s/configmaps?watch=1&resourceVersion=99999999&timeoutSeconds=2"
                           % t.namespace, seconds=3)
    return {"code": code, "events": events}


@row("list-from-future-rv-504", {
    "code": 504, "kind": "Status", "reason": "Timeout", "message": "Timeout: Too large resource version: 99999999, current: <n>",
    "details": {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                "retryAfterSeconds": 1}})
def probe_list_from_future_rv_504(t):
    out = answer(*t.req("GET", "/api/v1/namespaces/%s/configmaps?resourceVersion=99999999" % t.namespace)[:2], "details")
    out["message"] = _digits(out["message"], "99999999")
    return out


@row("list-limit-pages-with-continue", {"first": {"items": 2, "remainingItemCount": 1, "continue": True},
                                        "second": {"items": 1, "remainingItemCount": None, "continue": False},
                                        "names": ["s-0", "s-1", "s-2"]})
def probe_list_limit_pages_with_continue(t):
    namespace = _make_namespace(t)
    t.later("DELETE", "/api/v1/namespaces/" + namespace)
    for index in range(3):
        t.ok("POST", "/api/v1/namespaces/%s/secrets" % namespace, {"metadata": {"name": "s-%d" % index}})
    first = t.get("/api/v1/namespaces/%s/secrets?limit=2" % namespace)
    second = t.get("/api/v1/namespaces/%s/secrets?limit=2&continue=%s" % (namespace, first["metadata"].get("continue")))

    def page(body):
        return {"items": len(body["items"]), "remainingItemCount": body["metadata"].get("remainingItemCount"),
                "continue": bool(body["metadata"].get("continue"))}
    return {"first": page(first), "second": page(second),
            "names": [i["metadata"]["name"] for i in first["items"] + second["items"]]}


# -- Service account tokens (TokenRequest)

def _service_account(t, name=None):
    name = name or t.name("sa")
    t.ok("POST", "/api/v1/namespaces/%s/serviceaccounts" % t.namespace, {"metadata": {"name": name}})
    t.later("DELETE", "/api/v1/namespaces/%s/serviceaccounts/%s" % (t.namespace, name))
    return name


def _token_request(t, account, spec=None):
    return t.req("POST", "/api/v1/namespaces/%s/serviceaccounts/%s/token" % (t.namespace, account),
                 {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec or {}})[:2]


@row("tokenrequest-201-defaulted", {"code": 201, "kind": "TokenRequest", "expirationSeconds": 3600, "audiences": 1,
                                    "token": True, "expires_in": 3600})
def probe_tokenrequest_201_defaulted(t):
    code, body = _token_request(t, _service_account(t))
    expires = time.mktime(time.strptime(body["status"]["expirationTimestamp"], "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
    return {"code": code, "kind": body.get("kind"), "expirationSeconds": body["spec"].get("expirationSeconds"),
            "audiences": len(body["spec"].get("audiences") or []), "token": bool(body["status"].get("token")),
            "expires_in": int(round((expires - time.time()) / 60.0)) * 60}


@row("tokenrequest-missing-account-404", {"code": 404, "kind": "Status", "reason": "NotFound",
                                          "message": 'serviceaccounts "<sa>" not found'})
def probe_tokenrequest_missing_account_404(t):
    account = t.name("absent")
    out = answer(*_token_request(t, account))
    out["message"] = out["message"].replace(account, "<sa>")
    return out


@row("tokenrequest-under-ten-minutes-422", {"code": 422, "kind": "Status", "reason": "Invalid", "causes": [
    ("FieldValueInvalid", "spec.expirationSeconds")], "details": ["causes", "group", "kind"],
    "message": 'TokenRequest.authentication.k8s.io "" is invalid: '
    'spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 10 minutes'})
def probe_tokenrequest_under_ten_minutes_422(t):
    account = _service_account(t)
    code, body = _token_request(t, account, {"expirationSeconds": 599})
    out = answer(code, body)
    out["message"] = out["message"].replace(account, "<sa>")
    out["causes"] = [(c.get("reason"), c.get("field")) for c in (body.get("details") or {}).get("causes") or []]
    out["details"] = sorted(body.get("details") or {})
    return out


@row("tokenrequest-token-authenticates-until-account-deleted", {
    "forbidden": {"code": 403, "kind": "Status", "reason": "Forbidden",
                  "message": 'nodes is forbidden: User "system:serviceaccount:<ns>:<sa>" cannot list resource "nodes" '
                             'in API group "" at the cluster scope'},
    "after_delete": {"code": 401, "kind": "Status", "reason": "Unauthorized", "message": "Unauthorized"}})
def probe_tokenrequest_token_authenticates_until_account_deleted(t):
    account = _service_account(t)
    token = _token_request(t, account)[1]["status"]["token"]
    code, body, _headers = t.req("GET", "/api/v1/nodes", token=token)
    forbidden = answer(code, body)
    forbidden["message"] = forbidden["message"].replace(account, "<sa>").replace(t.namespace, "<ns>")
    t.ok("DELETE", "/api/v1/namespaces/%s/serviceaccounts/%s" % (t.namespace, account))
    deadline = time.time() + 10
    while True:   # a real apiserver caches a verified token for a few seconds
        code, body, _headers = t.req("GET", "/api/v1/nodes", token=token)
        if code == 401 or time.time() > deadline:
            break
        time.sleep(0.3)
    return {"forbidden": forbidden, "after_delete": answer(code, body)}


# -- Field validation

def _configmap_with_unknown_fields(t, directive):
    name = t.name("cm")
    query = "?fieldValidation=" + directive if directive else ""
    code, body, headers = t.req("POST", "/api/v1/namespaces/%s/configmaps%s" % (t.namespace, query), {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "colour": "red"}, "data": {"a": "b"},
        "spec": {"foo": 1}})
    if code == 201:
        t.later("DELETE", "/api/v1/namespaces/%s/configmaps/%s" % (t.namespace, name))
    warnings = headers.getlist("Warning") if hasattr(headers, "getlist") else [headers.get("Warning")]
    return {"code": code, "reason": body.get("reason"), "message": body.get("message"),
            "warnings": sorted(w for w in warnings if w),
            "stored": sorted(body) if code == 201 else None}


@row("field-validation-strict-400", {
    "code": 400, "reason": "BadRequest", "warnings": [], "stored": None,
    "message": 'ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: '
               'unknown field "metadata.colour", unknown field "spec"'})
def probe_field_validation_strict_400(t):
    return _configmap_with_unknown_fields(t, "Strict")


@row("field-validation-warn-by-default", {
    "code": 201, "reason": None, "message": None, "stored": ["apiVersion", "data", "kind", "metadata"],
    "warnings": ['299 - "unknown field \\"metadata.colour\\""', '299 - "unknown field \\"spec\\""']})
def probe_field_validation_warn_by_default(t):
    return _configmap_with_unknown_fields(t, None)


@row("field-validation-ignore-silent", {"code": 201, "reason": None, "message": None, "warnings": [],
                                        "stored": ["apiVersion", "data", "kind", "metadata"]})
def probe_field_validation_ignore_silent(t):
    return _configmap_with_unknown_fields(t, "Ignore")


@row("openapi-v3-patch-operation-has-fieldValidation", {"listed": True, "gvk": {"group": "", "version": "v1",
                                                                                "kind": "Pod"}, "fieldValidation": True})
def probe_openapi_v3_patch_operation_has_fieldvalidation(t):
    index = t.get("/openapi/v3")
    url = index["paths"]["api/v1"]["serverRelativeURL"]
    doc = t.get(url)
    patch = doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"]
    params = [p.get("name") for p in patch.get("parameters") or []]
    params += [p.get("name") for p in doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"].get("parameters") or []]
    return {"listed": url.startswith("/openapi/v3/api/v1"), "gvk": patch.get("x-kubernetes-group-version-kind"),
            "fieldValidation": "fieldValidation" in params}


# -- Eviction and pod deletion

def _bound_pod(t, node, ready=True, labels=None, grace=None):
    """A pod bound to node by spec.nodeName, Running (and Ready) as a kubelet would report it."""
    name = t.name("pod")
    body = _pod(name, nodeName=node)
    body["metadata"]["labels"] = labels or {"app": name}
    if grace is not None:
        body["spec"]["terminationGracePeriodSeconds"] = grace
    code, created = _create_pod(t, body)
    assert code == 201, created
    t.ok("PATCH", "/api/v1/namespaces/%s/pods/%s/status" % (t.namespace, name), {"status": {
        "phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}, MERGE_PATCH)
    return name


def _evict(t, pod, name=None):
    code, body, _headers = t.req("POST", "/api/v1/namespaces/%s/pods/%s/eviction" % (t.namespace, pod), {
        "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name or pod, "namespace": t.namespace}})
    return code, body


def _pod_state(t, pod):
    code, body, _headers = t.req("GET", "/api/v1/namespaces/%s/pods/%s" % (t.namespace, pod))
    if code == 404:
        return "gone"
    return "terminating" if body["metadata"].get("deletionTimestamp") else "present"


def _budget(t, selector, **spec):
    name = t.name("pdb")
    t.ok("POST", "/apis/policy/v1/namespaces/%s/poddisruptionbudgets" % t.namespace, {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name},
        "spec": dict(spec, selector={"matchLabels": selector})})
    t.later("DELETE", "/apis/policy/v1/namespaces/%s/poddisruptionbudgets/%s" % (t.namespace, name))
    deadline = time.time() + 20
    while True:   # the disruption controller of a real cluster computes the budget's status a moment later
        budget = t.get("/apis/policy/v1/namespaces/%s/poddisruptionbudgets/%s" % (t.namespace, name))
        status = budget.get("status") or {}
        if status.get("observedGeneration", 0) >= budget["metadata"].get("generation", 1) or t.sim is not None:
            return name
        assert time.time() < deadline, "%s: budget %s has no status after 20 s" % (t.kind, name)
        time.sleep(0.2)


@row("eviction-name-mismatch-400", {"code": 400, "kind": "Status", "reason": "BadRequest",
                                    "message": "name in URL does not match name in Eviction object", "pod": "present"})
def probe_eviction_name_mismatch_400(t):
    pod = _bound_pod(t, t.node())
    out = answer(*_evict(t, pod, name=pod + "-other"))
    out["pod"] = _pod_state(t, pod)
    return out


@row("eviction-pending-pod-deleted-without-budget", {"code": 201, "kind": "Status", "status": "Success", "pod": "gone"})
def probe_eviction_pending_pod_deleted_without_budget(t):
    name = t.name("pod")
    body = _pod(name)
    body["metadata"]["labels"] = {"app": name}
    _create_pod(t, body)
    _budget(t, {"app": name}, minAvailable=1)
    code, body = _evict(t, name)
    return {"code": code, "kind": body.get("kind"), "status": body.get("status"), "pod": _pod_state(t, name)}


@row("eviction-budget-exhausted-429", {
    "code": 429, "kind": "Status", "reason": "TooManyRequests", "pod": "present",
    "message": "Cannot evict pod as it would violate the pod's disruption budget.",
    "causes": [{"reason": "DisruptionBudget", "message": "The disruption budget <pdb> needs 1 healthy pods and has 1 currently"}]})
def probe_eviction_budget_exhausted_429(t):
    node = t.node()
    pod = _bound_pod(t, node, grace=0)
    budget = _budget(t, {"app": pod}, minAvailable=1)
    code, body = _evict(t, pod)
    out = answer(code, body)
    out["causes"] = json.loads(json.dumps((body.get("details") or {}).get("causes")).replace(budget, "<pdb>"))
    out["pod"] = _pod_state(t, pod)
    return out


@row("eviction-two-budgets-500", {
    "code": 500, "kind": "Status", "reason": None, "pod": "present",
    "message": "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."})
def probe_eviction_two_budgets_500(t):
    pod = _bound_pod(t, t.node(), grace=0)
    _budget(t, {"app": pod}, maxUnavailable=1)
    _budget(t, {"app": pod}, maxUnavailable=1)
    out = answer(*_evict(t, pod))
    out["pod"] = _pod_state(t, pod)
    return out


@row("eviction-unmanaged-pod-max-unavailable-429", {
    "code": 429, "kind": "Status", "reason": "TooManyRequests", "pod": "present",
    "message": "Cannot evict pod as it would violate the pod's disruption budget.",
    "causes": [{"reason": "DisruptionBudget", "message": "The disruption budget <pdb> does not allow evicting pods currently"}]})
def probe_eviction_unmanaged_pod_max_unavailable_429(t):
    pod = _bound_pod(t, t.node(), grace=0)
    budget = _budget(t, {"app": pod}, maxUnavailable=1)
    code, body = _evict(t, pod)
    out = answer(code, body)
    out["causes"] = json.loads(json.dumps((body.get("details") or {}).get("causes")).replace(budget, "<pdb>"))
    out["pod"] = _pod_state(t, pod)
    return out


@row("eviction-allowed-201-pod-deleted-gracefully", {"code": 201, "kind": "Status", "status": "Success",
                                                     "pod": "terminating", "grace": 30})
def probe_eviction_allowed_201_pod_deleted_gracefully(t):
    pod = _bound_pod(t, t.node())
    _budget(t, {"app": pod}, minAvailable=0)
    code, body = _evict(t, pod)
    state = _pod_state(t, pod)
    grace = t.get("/api/v1/namespaces/%s/pods/%s" % (t.namespace, pod))["metadata"].get("deletionGracePeriodSeconds")
    return {"code": code, "kind": body.get("kind"), "status": body.get("status"), "pod": state, "grace": grace}


def _delete_pod(t, pod, query=""):
    code, body, _headers = t.req("DELETE", "/api/v1/namespaces/%s/pods/%s%s" % (t.namespace, pod, query))
    meta = body.get("metadata") or {}
    return {"code": code, "kind": body.get("kind"), "deletionTimestamp": bool(meta.get("deletionTimestamp")),
            "deletionGracePeriodSeconds": meta.get("deletionGracePeriodSeconds"), "pod": _pod_state(t, pod)}


@row("pod-delete-grace-periods", {
    "unbound": {"code": 200, "kind": "Pod", "deletionTimestamp": True, "deletionGracePeriodSeconds": 0, "pod": "gone"},
    "bound": {"code": 200, "kind": "Pod", "deletionTimestamp": True, "deletionGracePeriodSeconds": 30, "pod": "terminating"},
    "bound-spec-0": {"code": 200, "kind": "Pod", "deletionTimestamp": True, "deletionGracePeriodSeconds": 0, "pod": "gone"},
    "bound-request-0": {"code": 200, "kind": "Pod", "deletionTimestamp": True, "deletionGracePeriodSeconds": 0,
                        "pod": "gone"},
    "bound-negative": {"code": 200, "kind": "Pod", "deletionTimestamp": True, "deletionGracePeriodSeconds": 1,
                       "pod": "terminating"},
    "succeeded": {"code": 200, "kind": "Pod", "deletionTimestamp": True, "deletionGracePeriodSeconds": 0, "pod": "gone"},
    "watch": ["MODIFIED", "DELETED"]})
def probe_pod_delete_grace_periods(t):
    node = t.node()
    out = {}
    name = t.name("pod")
    _create_pod(t, _pod(name))
    out["unbound"] = _delete_pod(t, name)
    out["bound"] = _delete_pod(t, _bound_pod(t, node))
    spec0 = _bound_pod(t, node, grace=0)
    rv = t.get("/api/v1/namespaces/%s/pods/%s" % (t.namespace, spec0))["metadata"]["resourceVersion"]
    out["bound-spec-0"] = _delete_pod(t, spec0)
    out["bound-request-0"] = _delete_pod(t, _bound_pod(t, node), "?gracePeriodSeconds=0")
    out["bound-negative"] = _delete_pod(t, _bound_pod(t, node), "?gracePeriodSeconds=-5")
    done = _bound_pod(t, node)
    t.ok("PATCH", "/api/v1/namespaces/%s/pods/%s/status" % (t.namespace, done), {"status": {"phase": "Succeeded"}},
         MERGE_PATCH)
    out["succeeded"] = _delete_pod(t, done)
    _code, events = t.watch("/api/v1/namespaces/%s/pods?watch=1&resourceVersion=%s&timeoutSeconds=1&fieldSelector="
                            "metadata.name=%s" % (t.namespace, rv, spec0), seconds=3)
    out["watch"] = [e["type"] for e in events]
    return out


# -- Dynamic Resource Allocation: the resource.k8s.io API

DRA = "/apis/resource.k8s.io/v1"


@row("dra-discovery-serves-v1-only", {
    "versions": ["resource.k8s.io/v1"], "preferred": "resource.k8s.io/v1",
    "resources": [("deviceclasses", False, "DeviceClass"), ("resourceclaims", True, "ResourceClaim"),
                  ("resourceclaims/status", True, "ResourceClaim"),
                  ("resourceclaimtemplates", True, "ResourceClaimTemplate"), ("resourceslices", False, "ResourceSlice")],
    "v1beta1": 404})
def probe_dra_discovery_serves_v1_only(t):
    group = t.get("/apis/resource.k8s.io")
    resources = t.get(DRA)["resources"]
    return {"versions": [v["groupVersion"] for v in group["versions"]], "preferred": group["preferredVersion"]["groupVersion"],
            "resources": sorted((r["name"], r["namespaced"], r["kind"]) for r in resources),
            "v1beta1": t.req("GET", "/apis/resource.k8s.io/v1beta1/deviceclasses")[0]}


@row("discovery-any-authenticated-identity", {"get": 200, "get-group": 200, "post": {
    "code": 403, "kind": "Status", "reason": "Forbidden",
    "message": 'forbidden: User "system:serviceaccount:<ns>:<sa>" cannot post path "/apis/"'}})
def probe_discovery_any_authenticated_identity(t):
    account = _service_account(t)
    token = _token_request(t, account)[1]["status"]["token"]
    post = answer(*t.req("POST", "/apis/", {}, token=token)[:2])
    post["message"] = post["message"].replace(account, "<sa>").replace(t.namespace, "<ns>")
    return {"get": t.req("GET", "/apis/", token=token)[0], "get-group": t.req("GET", DRA, token=token)[0], "post": post}


def _device_class(t, spec, query="", name=None):
    name = name or t.name("class")
    code, body, _headers = t.req("POST", "%s/deviceclasses%s" % (DRA, query), {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec})
    if code == 201 and not query:
        t.later("DELETE", "%s/deviceclasses/%s" % (DRA, name))
    return name, code, body


def _class_refused(t, spec, name=None, first_line=False):
    name, code, body = _device_class(t, spec, name=name)
    out = answer(code, body)
    out["message"] = (out["message"] or "").replace(name, "<class>")
    if first_line:
        out["message"] = out["message"].split("\n")[0]
    out["causes"] = [(c.get("reason"), c.get("field")) for c in ((body.get("details") or {}).get("causes") or [])]
    return out


DNS1123_SUBDOMAIN = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
                     "must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation "
                     "is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")


def _class_invalid(field, reason, detail):
    return {"code": 422, "kind": "Status", "reason": "Invalid", "causes": [(reason, field)],
            "message": 'DeviceClass.resource.k8s.io "<class>" is invalid: %s: %s' % (field, detail)}


def _cel(expression):
    return {"selectors": [{"cel": {"expression": expression}}]}


@row("dra-cel-syntax-error-422", {
    "code": 422, "kind": "Status", "reason": "Invalid", "causes": [("FieldValueInvalid", "spec.selectors[0].cel.expression")],
    "message": 'DeviceClass.resource.k8s.io "<class>" is invalid: spec.selectors[0].cel.expression: Invalid value: '
               '"device.driver == ": compilation failed: ERROR: <input>:1:18: Syntax error: mismatched input \'<EOF>\' '
               "expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, "
               "BYTES, IDENTIFIER}"})
def probe_dra_cel_syntax_error_422(t):
    return _class_refused(t, _cel("device.driver == "), first_line=True)


@row("dra-cel-type-error-422", {
    "code": 422, "kind": "Status", "reason": "Invalid", "causes": [("FieldValueInvalid", "spec.selectors[0].cel.expression")],
    "message": 'DeviceClass.resource.k8s.io "<class>" is invalid: spec.selectors[0].cel.expression: Invalid value: '
               '"device.driver + 1": compilation failed: ERROR: <input>:1:15: found no matching overload for \'_+_\' '
               "applied to '(string, int)'"})
def probe_dra_cel_type_error_422(t):
    return _class_refused(t, _cel("device.driver + 1"), first_line=True)


OPERANDS = "'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER"
CEL_OTHER = {
    "x == 1": "ERROR: <input>:1:1: undeclared reference to 'x' (in container '')",
    "device.foo == 1": "ERROR: <input>:1:7: undefined field 'foo'",
    "device.driver == 'a' &&": "ERROR: <input>:1:24: Syntax error: mismatched input '<EOF>' expecting {%s}" % OPERANDS,
    "device.driver(": "ERROR: <input>:1:15: Syntax error: mismatched input '<EOF>' expecting {%s}" % OPERANDS.replace(
        "'(', '.'", "'(', ')', '.'"),
    "device.driver == 1": "ERROR: <input>:1:15: found no matching overload for '_==_' applied to '(string, int)'",
    "device.driver < 1": "ERROR: <input>:1:15: found no matching overload for '_<_' applied to '(string, int)'",
    "!device.driver": "ERROR: <input>:1:1: found no matching overload for '!_' applied to '(string)'",
    "1 - 'a'": "ERROR: <input>:1:3: found no matching overload for '_-_' applied to '(int, string)'",
    "device.attributes": 'DeviceClass.resource.k8s.io "<class>" is invalid: spec.selectors[0].cel.expression: Invalid value: '
                         '"device.attributes": must evaluate to bool or the unknown type, not map(string, map(string, '
                         'google.protobuf.Any))',
}


@row("dra-cel-other-errors", CEL_OTHER)
def probe_dra_cel_other_errors(t):
    return dict((e, _class_refused(t, _cel(e), first_line=True)["message"].split("compilation failed: ")[-1]) for e in CEL_OTHER)


@row("dra-extended-resource-name-422", {
    name: {"code": 422, "kind": "Status", "reason": "Invalid", "causes": [("FieldValueInvalid", "spec.extendedResourceName")],
           "message": 'DeviceClass.resource.k8s.io "<class>" is invalid: spec.extendedResourceName: Invalid value: "%s": '
                      "must be a valid extended resource name" % name}
    for name in ("gpu", "kubernetes.io/gpu")})
def probe_dra_extended_resource_name_422(t):
    return {name: _class_refused(t, {"extendedResourceName": name}) for name in ("gpu", "kubernetes.io/gpu")}


@row("dra-device-class-dry-run-stores-nothing", {"code": 201, "generation": 1, "uid": True, "stored": 404})
def probe_dra_device_class_dry_run_stores_nothing(t):
    name, code, body = _device_class(t, _cel('device.driver == "gpu.example.com"'), query="?dryRun=All")
    return {"code": code, "generation": body["metadata"].get("generation"), "uid": bool(body["metadata"].get("uid")),
            "stored": t.req("GET", "%s/deviceclasses/%s" % (DRA, name))[0]}


@row("dra-device-class-name-dns-subdomain", _class_invalid("metadata.name", "FieldValueInvalid",
                                                           'Invalid value: "<class>": ' + DNS1123_SUBDOMAIN))
def probe_dra_device_class_name_dns_subdomain(t):
    return _class_refused(t, {}, name="Bad_Class")


@row("dra-device-class-limits", {
    "selectors": _class_invalid("spec.selectors", "FieldValueTooMany", "Too many: 33: must have at most 32 items"),
    "long": _class_invalid("spec.selectors[0].cel.expression", "FieldValueTooLong", "Too long: may not be more than 10240 bytes"),
    "no-cel": _class_invalid("spec.selectors[0].cel", "FieldValueRequired", "Required value")})
def probe_dra_device_class_limits(t):
    many = {"selectors": [{"cel": {"expression": "true"}}] * 33}
    long_expression = _cel("device.driver == '%s'" % ("x" * 10240))
    return {"selectors": _class_refused(t, many), "long": _class_refused(t, long_expression),
            "no-cel": _class_refused(t, {"selectors": [{}]})}


@row("dra-device-class-config", {
    "no-opaque": _class_invalid("spec.config[0].opaque", "FieldValueRequired", "Required value"),
    "bad-driver": _class_invalid("spec.config[0].opaque.driver", "FieldValueInvalid", 'Invalid value: "Bad_Driver": ' + DNS1123_SUBDOMAIN),
    "no-parameters": _class_invalid("spec.config[0].opaque.parameters", "FieldValueRequired", "Required value")})
def probe_dra_device_class_config(t):
    return {"no-opaque": _class_refused(t, {"config": [{}]}),
            "bad-driver": _class_refused(t, {"config": [{"opaque": {"driver": "Bad_Driver", "parameters": {}}}]}),
            "no-parameters": _class_refused(t, {"config": [{"opaque": {"driver": "gpu.example.com"}}]})}


@row("dra-device-class-generation-grows-with-spec", {"created": 1, "relabelled": 1, "spec-changed": 2})
def probe_dra_device_class_generation_grows_with_spec(t):
    name, _code, body = _device_class(t, _cel("true"))
    path = "%s/deviceclasses/%s" % (DRA, name)
    relabelled = t.ok("PATCH", path, {"metadata": {"labels": {"a": "b"}}}, MERGE_PATCH)
    changed = t.ok("PATCH", path, {"spec": _cel('device.driver == "x"')}, MERGE_PATCH)
    return {"created": body["metadata"].get("generation"), "relabelled": relabelled["metadata"].get("generation"),
            "spec-changed": changed["metadata"].get("generation")}


def _slice(t, driver, node):
    name = t.name("slice")
    body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name}, "spec": {
        "driver": driver, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": "gpu-0", "attributes": {"model": {"string": "a100"}, "index": {"int": 0}},
                     "capacity": {"memory": {"value": "40Gi"}}}]}}
    code, created, _headers = t.req("POST", DRA + "/resourceslices", body)
    if code == 201:
        t.later("DELETE", "%s/resourceslices/%s" % (DRA, name))
    return name, code, created


@row("dra-resource-slice-v1-shape", {"code": 201, "spec": {
    "driver": "gpu.example.com", "nodeName": "<node>", "pool": {"name": "<node>", "generation": 1, "resourceSliceCount": 1},
    "devices": [{"name": "gpu-0", "attributes": {"model": {"string": "a100"}, "index": {"int": 0}},
                 "capacity": {"memory": {"value": "40Gi"}}}]}})
def probe_dra_resource_slice_v1_shape(t):
    node = t.node()
    name, code, _created = _slice(t, "gpu.example.com", node)
    stored = t.get("%s/resourceslices/%s" % (DRA, name))
    return {"code": code, "spec": json.loads(json.dumps(stored["spec"]).replace(node, "<node>"))}


@row("dra-resource-slice-field-selectors", {"driver": ["a"], "node": ["a"], "both": ["b"]})
def probe_dra_resource_slice_field_selectors(t):
    node, other = t.node(), t.node()
    driver_a, driver_b = t.name("a") + ".example.com", t.name("b") + ".example.com"
    names = {_slice(t, driver_a, node)[0]: "a", _slice(t, driver_b, other)[0]: "b"}

    def listed(selector):
        items = t.get("%s/resourceslices?fieldSelector=%s" % (DRA, selector))["items"]
        return sorted(names[i["metadata"]["name"]] for i in items if i["metadata"]["name"] in names)
    return {"driver": listed("spec.driver=" + driver_a), "node": listed("spec.nodeName=" + node),
            "both": listed("spec.driver=%s,spec.nodeName=%s" % (driver_b, other))}


@row("dra-claim-and-template-v1-shape-class-not-checked", {
    "claim": 201, "template": 201,
    "requests": [{"name": "gpu", "exactly": {"deviceClassName": "kf-absent-class", "count": 1, "allocationMode": "ExactCount"}}],
    "template_requests": [{"name": "gpu", "exactly": {"deviceClassName": "kf-absent-class", "count": 1,
                                                      "allocationMode": "ExactCount"}}]})
def probe_dra_claim_and_template_v1_shape_class_not_checked(t):
    requests = [{"name": "gpu", "exactly": {"deviceClassName": "kf-absent-class", "count": 1}}]
    claim, template = t.name("claim"), t.name("template")
    base = "%s/namespaces/%s" % (DRA, t.namespace)
    code, body, _headers = t.req("POST", base + "/resourceclaims", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": claim},
        "spec": {"devices": {"requests": requests}}})
    t.later("DELETE", "%s/resourceclaims/%s" % (base, claim))
    code2, body2, _headers = t.req("POST", base + "/resourceclaimtemplates", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": template},
        "spec": {"spec": {"devices": {"requests": requests}}}})
    t.later("DELETE", "%s/resourceclaimtemplates/%s" % (base, template))
    return {"claim": code, "template": code2, "requests": body["spec"]["devices"]["requests"],
            "template_requests": body2["spec"]["spec"]["devices"]["requests"]}


# -- Scheduling extended resources (the scheduler of each cluster)

def _now():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _ready_node(t, capacity):
    """A node reporting Ready with capacity (as a kubelet would), once nothing taints it."""
    stamp = _now()
    name = t.node(status={"capacity": capacity, "conditions": [
        {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
         "lastHeartbeatTime": stamp, "lastTransitionTime": stamp}]})
    deadline = time.time() + 20
    while t.get("/api/v1/nodes/" + name)["spec"].get("taints"):   # the node lifecycle controller lifts not-ready
        assert time.time() < deadline, "%s: node %s still tainted after 20 s" % (t.kind, name)
        time.sleep(0.1)
    return name


def _wait_scheduled(t, pod, seconds=20):
    """('bound', node) or ('unschedulable', message) as the pod's PodScheduled condition says."""
    deadline = time.time() + seconds
    while True:
        body = t.get("/api/v1/namespaces/%s/pods/%s" % (t.namespace, pod))
        if body["spec"].get("nodeName"):
            return "bound", body["spec"]["nodeName"]
        for cond in (body.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "PodScheduled" and cond.get("status") == "False" and cond.get("message"):
                return cond.get("reason"), cond["message"]
        assert time.time() < deadline, "%s: pod %s neither bound nor unschedulable after %d s" % (t.kind, pod, seconds)
        time.sleep(0.1)


# reasons other nodes of a shared cluster give (they do not match the probe's node selector, or are tainted)
_OTHER_NODES = re.compile(r"node\(s\) didn't match Pod's node affinity/selector|had untolerated taint|"
                          r"Preemption is not helpful for scheduling|node\(s\) were unschedulable")


def _histogram(text, keep_all=False):
    """'1 A, 2 B' -> {A: 1, B: 2}, without the reasons of nodes that are not the probe's."""
    out = {}
    for part in text.split(", "):
        count, _sep, reason = part.partition(" ")
        if keep_all or not _OTHER_NODES.search(reason):
            out[reason] = int(count)
    return out


def _schedule_message(message):
    """FitError text -> {filter: histogram, post_filter: what PostFilter plugins added, preemption: histogram},
    keeping only what the probe's node says (the preemption verdict of the probe's node is the one that is not
    'not helpful' unless the row is about that verdict: see keep_all)."""
    found = re.match(r"^0/\d+ nodes are available: (.*?)\. (?:(.*), )?preemption: 0/\d+ nodes are available: (.*)\.$",
                     message.strip())
    if not found:
        return message
    preemption = _histogram(found.group(3), keep_all=True)
    others = int(re.match(r"^0/(\d+)", message).group(1)) - 1   # every other node: its filter was unresolvable
    unhelpful = preemption.pop("Preemption is not helpful for scheduling", 0) - others
    if unhelpful:
        preemption["Preemption is not helpful for scheduling"] = unhelpful
    reasons = found.group(1)   # a PreFilter refusal stands instead of the nodes' histogram
    return {"filter": _histogram(reasons) if reasons[:1].isdigit() else reasons, "post_filter": found.group(2),
            "preemption": preemption}


# the scheduler may still see the node's not-ready taint a moment after the node lifecycle controller lifted it
NOT_READY_TOLERATION = [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"}]


def _schedule(t, node, limits):
    pod = t.name("pod")
    body = _pod(pod, {"limits": limits}, nodeSelector={"kubernetes.io/hostname": node}, tolerations=NOT_READY_TOLERATION)
    code, created = _create_pod(t, body)
    assert code == 201, created
    return _wait_scheduled(t, pod)


def _scheduled(result, node):
    state, detail = result
    if state == "bound":
        return "bound to the node" if detail == node else "bound elsewhere"
    return {state: _schedule_message(detail)}


def _unschedulable(reason, verdict="No preemption victims found for incoming pod"):
    return {"Unschedulable": {"filter": {reason: 1}, "post_filter": "no new claims to deallocate",
                              "preemption": {verdict: 1}}}


def _dongle_node(t, capacity=None):
    node = _ready_node(t, capacity or {"cpu": "4", "memory": "8Gi", "pods": "110", "example.com/dongle": "4"})
    t.ok("PATCH", "/api/v1/nodes/" + node, {"metadata": {"labels": {"kubernetes.io/hostname": node}}}, MERGE_PATCH)
    return node


@row("scheduler-extended-resource-fit-and-usage", {"3 of 4": "bound to the node", "2 more of 4": _unschedulable(
    "Insufficient example.com/dongle")}, controllers=True)
def probe_scheduler_extended_resource_fit_and_usage(t):
    node = _dongle_node(t)
    return {"3 of 4": _scheduled(_schedule(t, node, {"example.com/dongle": "3"}), node),
            "2 more of 4": _scheduled(_schedule(t, node, {"example.com/dongle": "2"}), node)}


@row("scheduler-request-above-allocatable-unresolvable", {
    "5 of 4": _unschedulable("Insufficient example.com/dongle", "Preemption is not helpful for scheduling"),
    "cpu 5 of 4": _unschedulable("Insufficient cpu", "Preemption is not helpful for scheduling"),
    "absent resource": _unschedulable("Insufficient example.com/other", "Preemption is not helpful for scheduling")},
    controllers=True)
def probe_scheduler_request_above_allocatable_unresolvable(t):
    node = _dongle_node(t)
    return {"5 of 4": _scheduled(_schedule(t, node, {"example.com/dongle": "5"}), node),
            "cpu 5 of 4": _scheduled(_schedule(t, node, {"cpu": "5"}), node),
            "absent resource": _scheduled(_schedule(t, node, {"example.com/other": "1"}), node)}


@row("scheduler-node-without-pods-allocatable", _unschedulable("Too many pods"), controllers=True)
def probe_scheduler_node_without_pods_allocatable(t):
    node = _dongle_node(t, {"cpu": "4", "memory": "8Gi", "example.com/dongle": "4"})
    return _scheduled(_schedule(t, node, {"example.com/dongle": "1"}), node)


# -- DRA: claims from templates, allocation by the scheduler

def _dra_setup(t, devices=2):
    """A Ready node, a ResourceSlice of a driver of the probe's own with `devices` devices there, a DeviceClass
    selecting that driver, and a one-device ResourceClaimTemplate: (node, driver, class, template)."""
    node = _dongle_node(t)
    driver = t.name("drv") + ".example.com"
    slice_name = t.name("slice")
    spec = {"driver": driver, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-%d" % i, "attributes": {"index": {"int": i}}} for i in range(devices)]}
    t.ok("POST", DRA + "/resourceslices", {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                                           "metadata": {"name": slice_name}, "spec": spec})
    t.later("DELETE", "%s/resourceslices/%s" % (DRA, slice_name))
    device_class, _code, _body = _device_class(t, _cel('device.driver == "%s"' % driver))
    template = t.name("tmpl")
    t.ok("POST", "%s/namespaces/%s/resourceclaimtemplates" % (DRA, t.namespace), {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": template},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class}}]}}}})
    t.later("DELETE", "%s/namespaces/%s/resourceclaimtemplates/%s" % (DRA, t.namespace, template))
    return node, driver, device_class, template


def _claim_pod(t, node, template):
    pod = t.name("pod")
    body = _pod(pod, nodeSelector={"kubernetes.io/hostname": node}, tolerations=NOT_READY_TOLERATION,
                resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": template}])
    body["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    code, created = _create_pod(t, body)
    assert code == 201, created
    return pod


def _pod_claim(t, pod, seconds=20):
    deadline = time.time() + seconds
    while True:
        statuses = (t.get("/api/v1/namespaces/%s/pods/%s" % (t.namespace, pod)).get("status") or {}).get(
            "resourceClaimStatuses") or []
        if statuses and statuses[0].get("resourceClaimName"):
            return statuses[0]
        assert time.time() < deadline, "%s: pod %s has no claim after %d s" % (t.kind, pod, seconds)
        time.sleep(0.1)


@row("dra-template-claim-allocated-by-the-scheduler", {
    "scheduled": ("bound", "<node>"), "status_entry": {"name": "gpu", "resourceClaimName": "<pod>-gpu-<5>"},
    "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
    "owner": {"apiVersion": "v1", "kind": "Pod", "name": "<pod>", "controller": True},
    "finalizers": ["resource.kubernetes.io/delete-protection"],
    "results": [{"request": "gpu", "driver": "<driver>", "pool": "<node>", "device": "gpu-0"}],
    "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                                             "values": ["<node>"]}]}]},
    "reservedFor": [{"resource": "pods", "name": "<pod>", "uid": True}],
    "claim_after_pod_deleted": 404}, controllers=True)
def probe_dra_template_claim_allocated_by_the_scheduler(t):
    node, driver, _device_class_name, template = _dra_setup(t)
    pod = _claim_pod(t, node, template)
    scheduled = _wait_scheduled(t, pod)
    entry = _pod_claim(t, pod)
    path = "%s/namespaces/%s/resourceclaims/%s" % (DRA, t.namespace, entry["resourceClaimName"])
    deadline = time.time() + 20
    while not (t.get(path).get("status") or {}).get("reservedFor"):
        assert time.time() < deadline, "%s: claim of %s not reserved" % (t.kind, pod)
        time.sleep(0.1)
    claim = t.get(path)
    allocation = claim["status"]["allocation"]
    owner = dict(claim["metadata"]["ownerReferences"][0])
    owner.pop("uid")
    reserved = [dict(r, uid=bool(r.get("uid"))) for r in claim["status"]["reservedFor"]]
    out = {"scheduled": scheduled, "status_entry": entry, "annotations": claim["metadata"].get("annotations"),
           "owner": owner, "finalizers": claim["metadata"].get("finalizers"),
           "results": allocation["devices"]["results"], "nodeSelector": allocation.get("nodeSelector"),
           "reservedFor": reserved}
    t.ok("DELETE", "/api/v1/namespaces/%s/pods/%s?gracePeriodSeconds=0" % (t.namespace, pod))
    deadline = time.time() + 30
    while t.req("GET", path)[0] != 404 and time.time() < deadline:   # the resource claim controller and the GC
        time.sleep(0.2)
    out["claim_after_pod_deleted"] = t.req("GET", path)[0]
    text = json.dumps(out).replace(driver, "<driver>").replace(node, "<node>").replace(pod, "<pod>")
    return json.loads(re.sub(r'<pod>-gpu-[a-z0-9]{5}"', '<pod>-gpu-<5>"', text), object_hook=_tuples)


def _tuples(obj):
    if "scheduled" in obj:
        obj["scheduled"] = tuple(obj["scheduled"])
    return obj


@row("dra-no-free-device-unschedulable", {"Unschedulable": {
    "filter": {"cannot allocate all claims": 1}, "post_filter": "still not schedulable",
    "preemption": {"Preemption is not helpful for scheduling": 1}}}, controllers=True)
def probe_dra_no_free_device_unschedulable(t):
    node, _driver, _device_class_name, template = _dra_setup(t, devices=1)
    first = _claim_pod(t, node, template)
    assert _wait_scheduled(t, first)[0] == "bound"
    second = _claim_pod(t, node, template)
    return _scheduled(_wait_scheduled(t, second), node)


@row("dra-pod-without-its-claim-is-held-back", {"conditions_while_missing": [], "after_template_created": "bound to the node"},
     controllers=True)
def probe_dra_pod_without_its_claim_is_held_back(t):
    node, _driver, device_class, _template = _dra_setup(t)
    missing = t.name("tmpl")
    pod = _claim_pod(t, node, missing)
    time.sleep(3)
    conditions = [c.get("type") for c in (t.get("/api/v1/namespaces/%s/pods/%s" % (t.namespace, pod)).get("status") or {}).get(
        "conditions") or []]
    t.ok("POST", "%s/namespaces/%s/resourceclaimtemplates" % (DRA, t.namespace), {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": missing},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class}}]}}}})
    t.later("DELETE", "%s/namespaces/%s/resourceclaimtemplates/%s" % (DRA, t.namespace, missing))
    return {"conditions_while_missing": conditions, "after_template_created": _scheduled(_wait_scheduled(t, pod, 30), node)}


@row("dra-extended-resource-claim", {
    "scheduled": ("bound", "<node>"), "generateName": "<pod>-extended-resources-",
    "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"},
    "owner": {"apiVersion": "v1", "kind": "Pod", "name": "<pod>", "controller": True},
    "requests": [{"name": "container-0-request-0",
                  "exactly": {"deviceClassName": "<class>", "allocationMode": "ExactCount", "count": 1}}],
    "results": [{"request": "container-0-request-0", "driver": "<driver>", "pool": "<node>", "device": "gpu-0"}],
    "pod_status": {"requestMappings": [{"containerName": "c", "resourceName": "<resource>", "requestName": "container-0-request-0"}],
                   "resourceClaimName": "<claim>"}}, controllers=True)
def probe_dra_extended_resource_claim(t):
    node, driver, device_class, _template = _dra_setup(t)
    resource = "example.com/" + t.name("res")
    t.ok("PATCH", "%s/deviceclasses/%s" % (DRA, device_class), {"spec": {"extendedResourceName": resource}}, MERGE_PATCH)
    pod = t.name("pod")
    code, created = _create_pod(t, _pod(pod, {"limits": {resource: "1"}}, nodeSelector={"kubernetes.io/hostname": node},
                                        tolerations=NOT_READY_TOLERATION))
    assert code == 201, created
    scheduled = _wait_scheduled(t, pod)
    deadline = time.time() + 20
    while True:
        status = (t.get("/api/v1/namespaces/%s/pods/%s" % (t.namespace, pod)).get("status") or {}).get(
            "extendedResourceClaimStatus")
        if status or time.time() > deadline:
            break
        time.sleep(0.1)
    claim = t.get("%s/namespaces/%s/resourceclaims/%s" % (DRA, t.namespace, status["resourceClaimName"]))
    owner = dict(claim["metadata"]["ownerReferences"][0])
    owner.pop("uid")
    out = {"scheduled": scheduled, "generateName": claim["metadata"].get("generateName"),
           "annotations": claim["metadata"].get("annotations"), "owner": owner,
           "requests": claim["spec"]["devices"]["requests"],
           "results": claim["status"]["allocation"]["devices"]["results"], "pod_status": status}
    text = json.dumps(out).replace(status["resourceClaimName"], "<claim>").replace(driver, "<driver>").replace(
        device_class, "<class>").replace(resource, "<resource>").replace(node, "<node>").replace(pod, "<pod>")
    return json.loads(text, object_hook=_tuples)


@row("dra-freed-device-wakes-pending-pod", {"second_before": "unschedulable", "second_after_first_deleted": "bound to the node"},
     controllers=True)
def probe_dra_freed_device_wakes_pending_pod(t):
    node, _driver, _device_class_name, template = _dra_setup(t, devices=1)
    first = _claim_pod(t, node, template)
    assert _wait_scheduled(t, first)[0] == "bound"
    second = _claim_pod(t, node, template)
    before = _wait_scheduled(t, second)[0].lower()
    t.ok("DELETE", "/api/v1/namespaces/%s/pods/%s?gracePeriodSeconds=0" % (t.namespace, first))
    deadline = time.time() + 10   # the scheduler's backoff alone would wait longer: a claim event wakes the pod
    while not t.get("/api/v1/namespaces/%s/pods/%s" % (t.namespace, second))["spec"].get("nodeName"):
        if time.time() > deadline:
            return {"second_before": before, "second_after_first_deleted": "not bound within 10 s"}
        time.sleep(0.2)
    return {"second_before": before, "second_after_first_deleted": "bound to the node"}


@row("dra-two-classes-one-extended-resource-later-serves", {"driver": "<second driver>"}, controllers=True)
def probe_dra_two_classes_one_extended_resource_later_serves(t):
    node = _dongle_node(t)
    resource = "example.com/" + t.name("res")
    drivers = []
    for index in range(2):
        driver = t.name("drv%d" % index) + ".example.com"
        slice_name = t.name("slice")
        spec = {"driver": driver, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "gpu-0"}]}
        t.ok("POST", DRA + "/resourceslices", {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                                               "metadata": {"name": slice_name}, "spec": spec})
        t.later("DELETE", "%s/resourceslices/%s" % (DRA, slice_name))
        if index:
            time.sleep(1.1)   # creationTimestamp has whole seconds
        _device_class(t, dict(_cel('device.driver == "%s"' % driver), extendedResourceName=resource))
        drivers.append(driver)
    pod = t.name("pod")
    code, created = _create_pod(t, _pod(pod, {"limits": {resource: "1"}}, nodeSelector={"kubernetes.io/hostname": node},
                                        tolerations=NOT_READY_TOLERATION))
    assert code == 201, created
    _wait_scheduled(t, pod)
    deadline = time.time() + 20
    while True:
        status = (t.get("/api/v1/namespaces/%s/pods/%s" % (t.namespace, pod)).get("status") or {}).get(
            "extendedResourceClaimStatus")
        if status or time.time() > deadline:
            break
        time.sleep(0.1)
    if not status:
        return {"driver": None}
    claim = t.get("%s/namespaces/%s/resourceclaims/%s" % (DRA, t.namespace, status["resourceClaimName"]))
    driver = claim["status"]["allocation"]["devices"]["results"][0]["driver"]
    return {"driver": {drivers[0]: "<first driver>", drivers[1]: "<second driver>"}.get(driver, driver)}


@row("dra-missing-device-class-refused-by-prefilter", {
    "before": {"Unschedulable": {"filter": "request gpu: device class <class> does not exist",
                                 "post_filter": "no new claims to deallocate",
                                 "preemption": {"Preemption is not helpful for scheduling": 1}}},
    "claim": "stored", "after_class_created": "bound to the node"}, controllers=True)
def probe_dra_missing_device_class_refused_by_prefilter(t):
    node, driver, _class_name, _template = _dra_setup(t)
    missing = t.name("class")
    template = t.name("tmpl")
    t.ok("POST", "%s/namespaces/%s/resourceclaimtemplates" % (DRA, t.namespace), {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": template},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": missing}}]}}}})
    t.later("DELETE", "%s/namespaces/%s/resourceclaimtemplates/%s" % (DRA, t.namespace, template))
    pod = _claim_pod(t, node, template)
    before = _scheduled(_wait_scheduled(t, pod), node)
    claim = "stored" if t.req("GET", "%s/namespaces/%s/resourceclaims/%s" % (
        DRA, t.namespace, _pod_claim(t, pod)["resourceClaimName"]))[0] == 200 else "absent"
    _device_class(t, _cel('device.driver == "%s"' % driver), name=missing)
    deadline = time.time() + 30
    while not t.get("/api/v1/namespaces/%s/pods/%s" % (t.namespace, pod))["spec"].get("nodeName"):
        if time.time() > deadline:
            break
        time.sleep(0.2)
    after = _scheduled(("bound", t.get("/api/v1/namespaces/%s/pods/%s" % (t.namespace, pod))["spec"].get("nodeName"))
                       if time.time() <= deadline else ("pending", "not bound after 30 s"), node)
    return json.loads(json.dumps({"before": before, "claim": claim, "after_class_created": after}).replace(missing, "<class>"))


# -- Nodes and DaemonSets (the controllers of each cluster)

def _taints(t, node):
    return sorted((x.get("key"), x.get("effect")) for x in t.get("/api/v1/nodes/" + node)["spec"].get("taints") or [])


def _taints_become(t, node, wanted, seconds=15):
    deadline = time.time() + seconds
    while _taints(t, node) != wanted and time.time() < deadline:
        time.sleep(0.1)
    return _taints(t, node)


@row("node-not-ready-taint-until-ready", {"created": [("node.kubernetes.io/not-ready", "NoSchedule")],
                                          "after_ready": []}, controllers=True)
def probe_node_not_ready_taint_until_ready(t):
    node = t.name("node")
    # the taints the create stored, from its answer: a read after it races the node lifecycle controller, which takes
    # the taint off a node that reports no conditions at all (node-without-conditions-loses-not-ready-taint)
    answer = t.ok("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
    t.later("DELETE", "/api/v1/nodes/" + node)
    created = sorted((x.get("key"), x.get("effect")) for x in answer["spec"].get("taints") or [])
    stamp = _now()
    t.ok("PATCH", "/api/v1/nodes/%s/status" % node, {"status": {"conditions": [
        {"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": stamp,
         "lastTransitionTime": stamp}]}}, MERGE_PATCH)
    return {"created": created, "after_ready": _taints_become(t, node, [], seconds=5)}


@row("node-without-conditions-loses-not-ready-taint", {"created": [("node.kubernetes.io/not-ready", "NoSchedule")],
                                                       "later": []}, controllers=True)
def probe_node_without_conditions_loses_not_ready_taint(t):
    # the node lifecycle controller's NoSchedule tainting pass derives the condition taints from the conditions a node
    # reports: none at all, no condition taint (the unreachable verdict comes only after the 60 s startup grace)
    node = t.name("node")
    answer = t.ok("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
    t.later("DELETE", "/api/v1/nodes/" + node)
    created = sorted((x.get("key"), x.get("effect")) for x in answer["spec"].get("taints") or [])
    return {"created": created, "later": _taints_become(t, node, [], seconds=10)}


@row("node-ready-false-taints", {"not_ready": [("node.kubernetes.io/not-ready", "NoSchedule")], "ready_again": []},
     controllers=True)
def probe_node_ready_false_taints(t):
    # a kubelet that reports Ready=False: not-ready for scheduling (the NoSchedule pass), gone once it reports Ready
    # again. Only NoSchedule is compared: the NoExecute pass (taint-based eviction) stops in a zone whose nodes are all
    # not ready, as a probe's node often is alone, and adds not-ready:NoExecute otherwise
    node = _ready_node(t, {"cpu": "1", "memory": "1Gi", "pods": "10"})

    def report(ready):
        stamp = _now()
        t.ok("PATCH", "/api/v1/nodes/%s/status" % node, {"status": {"conditions": [
            {"type": "Ready", "status": ready, "reason": "KubeletReady" if ready == "True" else "KubeletNotReady",
             "lastHeartbeatTime": stamp, "lastTransitionTime": stamp}]}}, MERGE_PATCH)

    def no_schedule_taints_become(wanted):
        deadline = time.time() + 15
        while True:
            taints = [x for x in _taints(t, node) if x[1] == "NoSchedule"]
            if taints == wanted or time.time() > deadline:
                return taints
            time.sleep(0.1)
    report("False")
    not_ready = no_schedule_taints_become([("node.kubernetes.io/not-ready", "NoSchedule")])
    report("True")
    return {"not_ready": not_ready, "ready_again": _taints_become(t, node, [])}


@row("node-cordon-taint", {"cordoned": [("node.kubernetes.io/unschedulable", "NoSchedule")], "uncordoned": []},
     controllers=True)
def probe_node_cordon_taint(t):
    node = _ready_node(t, {"cpu": "1", "memory": "1Gi", "pods": "10"})
    t.ok("PATCH", "/api/v1/nodes/" + node, {"spec": {"unschedulable": True}}, MERGE_PATCH)
    cordoned = _taints_become(t, node, [("node.kubernetes.io/unschedulable", "NoSchedule")])
    t.ok("PATCH", "/api/v1/nodes/" + node, {"spec": {"unschedulable": None}}, MERGE_PATCH)
    return {"cordoned": cordoned, "uncordoned": _taints_become(t, node, [])}


def _daemonset(t, node, **pod_spec):
    name = t.name("ds")
    labels = {"app": name}
    t.ok("POST", "/apis/apps/v1/namespaces/%s/daemonsets" % t.namespace, {
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name}, "spec": {
            "selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": dict({
                "nodeSelector": {"kubernetes.io/hostname": node}, "terminationGracePeriodSeconds": 0,
                "containers": [{"name": "c", "image": "registry.example/pause:1"}]}, **pod_spec)}}})
    t.later("DELETE", "/apis/apps/v1/namespaces/%s/daemonsets/%s" % (t.namespace, name))
    return name


def _ds_pods(t, name):
    return [p for p in t.get("/api/v1/namespaces/%s/pods?labelSelector=app%%3D%s" % (t.namespace, name))["items"]
            if not p["metadata"].get("deletionTimestamp")]


_DS_COUNTS = ("desiredNumberScheduled", "currentNumberScheduled", "numberReady", "numberAvailable",
              "numberUnavailable", "updatedNumberScheduled", "numberMisscheduled", "observedGeneration")


@row("daemonset-status-pod-never-starts", {"pods": 1, "bound": True, "phase": "Pending", "status": {
    "desiredNumberScheduled": 1, "currentNumberScheduled": 1, "numberReady": 0, "numberUnavailable": 1,
    "updatedNumberScheduled": 1, "numberMisscheduled": 0, "observedGeneration": 1}}, controllers=True)
def probe_daemonset_status_pod_never_starts(t):
    node = _dongle_node(t)
    name = _daemonset(t, node)
    deadline = time.time() + 30
    while True:
        status = t.get("/apis/apps/v1/namespaces/%s/daemonsets/%s" % (t.namespace, name)).get("status") or {}
        pods = _ds_pods(t, name)
        if (status.get("updatedNumberScheduled") == 1 and pods and pods[0]["spec"].get("nodeName")) \
                or time.time() > deadline:
            break
        time.sleep(0.2)
    for pod in pods:
        t.later("DELETE", "/api/v1/namespaces/%s/pods/%s?gracePeriodSeconds=0" % (t.namespace, pod["metadata"]["name"]))
    return {"pods": len(pods), "bound": bool(pods and pods[0]["spec"].get("nodeName") == node),
            "phase": pods[0]["status"].get("phase") if pods else None,
            "status": dict((k, status[k]) for k in _DS_COUNTS if k in status)}


def _pods_appear_once(t, name, create_missing, seconds=30):
    time.sleep(2)
    before = len(_ds_pods(t, name))
    create_missing()
    deadline = time.time() + seconds
    while not _ds_pods(t, name) and time.time() < deadline:
        time.sleep(0.2)
    pods = _ds_pods(t, name)
    for pod in pods:
        t.later("DELETE", "/api/v1/namespaces/%s/pods/%s?gracePeriodSeconds=0" % (t.namespace, pod["metadata"]["name"]))
    return {"pods_before": before, "pods_after": len(pods)}


@row("daemonset-waits-for-its-service-account", {"pods_before": 0, "pods_after": 1}, controllers=True)
def probe_daemonset_waits_for_its_service_account(t):
    node = _dongle_node(t)
    account = t.name("sa")
    name = _daemonset(t, node, serviceAccountName=account)
    return _pods_appear_once(t, name, lambda: _service_account(t, account))


@row("daemonset-waits-for-its-runtime-class", {"pods_before": 0, "pods_after": 1}, controllers=True)
def probe_daemonset_waits_for_its_runtime_class(t):
    node = _dongle_node(t)
    handler = t.name("rc")
    name = _daemonset(t, node, runtimeClassName=handler)

    def create():
        t.ok("POST", "/apis/node.k8s.io/v1/runtimeclasses", {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
                                                             "metadata": {"name": handler}, "handler": "runc"})
        t.later("DELETE", "/apis/node.k8s.io/v1/runtimeclasses/" + handler)
    return _pods_appear_once(t, name, create)


# ------------------------------------------------------------------------------------------------- the test

_SIM_SEEN = {}


def _observe(target, probe):
    try:
        return probe(target)
    finally:
        target.cleanup()


def _check(expect, observed, who):
    if callable(expect):
        expect(observed)
    else:
        assert observed == expect, "%s answered differently from the row" % who


@pytest.mark.parametrize("side", ["sim", "real"])
@pytest.mark.parametrize("probe, expect", ROWS)
def test_fact(request, side, probe, expect):
    if probe.known_difference:
        request.applymarker(pytest.mark.xfail(reason=probe.known_difference, strict=True))
    real = request.getfixturevalue("real_target") if side == "real" else None
    if isinstance(real, str):
        pytest.skip("real half not run: " + real)
    sim = request.getfixturevalue("sim_controllers_target" if probe.controllers else "sim_target")
    # the real half compares with what the sim half saw when it ran in this process (the sim half runs first)
    sim_seen = _SIM_SEEN.pop(probe.row_id) if side == "real" and probe.row_id in _SIM_SEEN else _observe(sim, probe)
    if side == "sim":
        _SIM_SEEN[probe.row_id] = sim_seen
        _check(expect, sim_seen, "the simulated cluster")
        return
    real_seen = _observe(real, probe)
    _check(expect, real_seen, "kube-apiserver v1.36.2")
    assert sim_seen == real_seen, "the simulated cluster and kube-apiserver answer differently"
