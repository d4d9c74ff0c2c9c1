# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The two clusters the fidelity probes compare, and the probe context `t` (a Target) each probe gets.

The simulated cluster is started per test module, with or without its controllers. The real control plane is the
cluster of KUBECONFIG when set, else one started from ../shared/k8s (up.sh, state under .cache/, free ports) and
shared by the pytest-xdist workers of one run; the last one done stops it (down.sh)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import fcntl
import itertools
import json
import os
import time
import uuid

from tests.simcluster import SimCluster
from tests.support import control_plane

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
RUN_ID = uuid.uuid4().hex[:6]
_SERIAL = itertools.count(1)
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
SIM_CONFIG = {"nodes": []}


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


@contextlib.contextmanager
def simulated(controllers):
    """A Target on a simulated cluster of its own (with its controllers when asked) and a namespace there."""
    sim = SimCluster(SIM_CONFIG, controllers=controllers).start()
    try:
        target = Target("sim", sim.url, ca_file=sim.ca_cert_path, token=sim.admin_token, sim=sim)
        target.namespace = make_namespace(target)
        yield target
        target.req("DELETE", "/api/v1/namespaces/" + target.namespace)
    finally:
        sim.stop()


def make_namespace(target):
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
def started_control_plane():
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
                open(os.path.join(plane.state_dir, "facts-ready"), "w", encoding="utf-8").close()
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
    with open(os.path.join(folder, ".lock"), "w", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
