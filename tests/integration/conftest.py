# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Integration harness: a cluster (simulated by default, real when KUBECONFIG is set) and a
runner that plays tasks on localhost with the collection from this checkout.

Fixtures:
  cluster   .simulated, .sim (SimCluster or None), .kubeconfig, .core, .apps, .mark(),
            .writes(since=None), .require_simulated(reason), .node_names()
            Mark a test with @pytest.mark.simcluster_config({...}) to start the simulated
            cluster with that configuration instead of the default one.
  ansible   ansible(tasks, check=False, diff=False, extra_vars=None, env=None, module_defaults=None)
            -> PlaybookRun with .rc, .results, .result(name), .stdout, .stderr
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import json
import os
import subprocess
import sys
import tempfile

import pytest
import yaml

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CALLBACK_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "callback_plugins")
CACHED_COLLECTIONS = os.path.join(REPO_ROOT, ".cache", "collections")
WRITE_METHODS = frozenset(["POST", "PUT", "PATCH", "DELETE"])
PLAYBOOK_TIMEOUT = 300


def _use_real_cluster():
    return bool(os.environ.get("KUBECONFIG")) and os.environ.get("KUBEHW_SIMCLUSTER") != "1"


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "simcluster_config(config): configuration (dict or YAML path) for the simulated cluster")


def pytest_report_header(config):
    if _use_real_cluster():
        return "kubehw integration: REAL cluster from KUBECONFIG=%s" % os.environ["KUBECONFIG"]
    return "kubehw integration: simulated cluster (set KUBECONFIG to use a real one)"


class Cluster:
    """What a test sees of the cluster, the same shape for simulated and real clusters."""

    def __init__(self, kubeconfig, sim=None):
        from kubernetes import client, config

        self.sim = sim
        self.simulated = sim is not None
        self.kubeconfig = kubeconfig
        # KUBECONFIG may list several files; the official client reads the first one
        self.api_client = config.new_client_from_config(config_file=kubeconfig.split(os.pathsep)[0])
        self.core = client.CoreV1Api(self.api_client)
        self.apps = client.AppsV1Api(self.api_client)
        self._mark = 0

    def require_simulated(self, reason):
        if not self.simulated:
            pytest.skip("needs the simulated cluster: %s" % reason)

    def mark(self):
        """Remember the current end of the request log; writes() counts from here."""
        self._mark = len(self.sim.requests) if self.simulated else 0
        return self._mark

    def requests(self, since=None):
        self.require_simulated("reads the request log")
        start = self._mark if since is None else since
        return [r for r in list(self.sim.requests)[start:] if not r["path"].startswith("/simcluster")]

    def writes(self, since=None):
        """Logged POST/PUT/PATCH/DELETE requests since the mark (or since the given index)."""
        return [r for r in self.requests(since) if r["method"].upper() in WRITE_METHODS]

    def node_names(self):
        # raw JSON: the generated models would also judge the node's unrelated fields
        resp = self.core.list_node(_preload_content=False)
        return sorted(n["metadata"]["name"] for n in json.loads(resp.data)["items"])

    def close(self):
        self.api_client.close()


@contextlib.contextmanager
def open_cluster(config=None):
    """Yield a Cluster: the real one from KUBECONFIG, or a freshly started SimCluster."""
    if _use_real_cluster():
        cluster = Cluster(os.environ["KUBECONFIG"])
        try:
            yield cluster
        finally:
            cluster.close()
        return
    from tests.simcluster import SimCluster

    sim = SimCluster(config)
    sim.start()
    try:
        cluster = Cluster(sim.kubeconfig_path, sim)
        try:
            yield cluster
        finally:
            cluster.close()
    finally:
        sim.stop()


@pytest.fixture
def cluster(request):
    marker = request.node.get_closest_marker("simcluster_config")
    config = marker.args[0] if marker and marker.args else None
    with open_cluster(config) as c:
        yield c


# ---------------------------------------------------------------- ansible-playbook

class PlaybookRun:
    def __init__(self, rc, results, stdout, stderr, playbook):
        self.rc = rc
        self.results = results
        self.stdout = stdout
        self.stderr = stderr
        self.playbook = playbook

    def result(self, name):
        """The result of the task with this name (the last one if it ran more than once)."""
        for res in reversed(self.results):
            if res.get("task") == name:
                return res
        ran = [r.get("task") for r in self.results]
        raise KeyError("no task named %r ran; tasks: %r\n%s" % (name, ran, self.output()))

    def output(self):
        return "--- playbook\n%s\n--- stdout\n%s\n--- stderr\n%s" % (self.playbook, self.stdout, self.stderr)

    def __repr__(self):
        return "<PlaybookRun rc=%d tasks=%r>" % (self.rc, [(r.get("task"), r.get("_outcome")) for r in self.results])


@pytest.fixture(scope="session")
def collections_path(tmp_path_factory):
    """ansible_collections/kubehw/devices pointing at this checkout (plus the cached test deps)."""
    root = tmp_path_factory.mktemp("collections")
    ns = root / "ansible_collections" / "kubehw"
    ns.mkdir(parents=True)
    os.symlink(REPO_ROOT, str(ns / "devices"))
    paths = [str(root)]
    if os.path.isdir(CACHED_COLLECTIONS):
        paths.append(CACHED_COLLECTIONS)
    return os.pathsep.join(paths)


class AnsibleRunner:
    def __init__(self, workdir, collections, kubeconfig):
        self.workdir = workdir
        self.collections = collections
        self.kubeconfig = kubeconfig
        self.runs = 0

    def env(self, extra=None):
        env = dict(os.environ)
        # nothing from the developer's shell may point the modules at another cluster
        for key in list(env):
            if key.startswith("K8S_AUTH_") or key in ("KUBECONFIG",) or key.startswith("ANSIBLE_"):
                del env[key]
        env.update({
            "ANSIBLE_COLLECTIONS_PATH": self.collections,
            "ANSIBLE_CALLBACK_PLUGINS": CALLBACK_DIR,
            "ANSIBLE_CALLBACKS_ENABLED": "kubehw_results",
            "ANSIBLE_NOCOLOR": "1",
            # local connection: pipelining skips writing each module to a temp file first
            "ANSIBLE_PIPELINING": "1",
            "ANSIBLE_RETRY_FILES_ENABLED": "0",
            "ANSIBLE_LOCALHOST_WARNING": "0",
            "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0",
            "ANSIBLE_LOCAL_TEMP": os.path.join(self.workdir, "ansible-tmp"),
            "PYTHONDONTWRITEBYTECODE": "1",
        })
        if self.kubeconfig:
            env["K8S_AUTH_KUBECONFIG"] = self.kubeconfig
        for key, value in (extra or {}).items():
            # None removes a variable, e.g. {"K8S_AUTH_KUBECONFIG": None}
            if value is None:
                env.pop(key, None)
            else:
                env[key] = str(value)
        return env

    def __call__(self, tasks, check=False, diff=False, extra_vars=None, env=None, module_defaults=None,
                 verbosity=0):
        self.runs += 1
        rundir = tempfile.mkdtemp(prefix="run%d-" % self.runs, dir=self.workdir)
        play = {
            "name": "Integration test play",
            "hosts": "localhost",
            "connection": "local",
            "gather_facts": False,
            "vars": {"ansible_python_interpreter": sys.executable},
            "tasks": tasks,
        }
        if module_defaults:
            play["module_defaults"] = module_defaults
        playbook_text = yaml.safe_dump([play], default_flow_style=False, sort_keys=False)
        playbook = os.path.join(rundir, "playbook.yml")
        with open(playbook, "w") as f:
            f.write(playbook_text)
        results_file = os.path.join(rundir, "results.jsonl")
        cmd = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,", playbook]
        if not os.path.exists(cmd[0]):
            cmd[0] = "ansible-playbook"
        if check:
            cmd.append("--check")
        if diff:
            cmd.append("--diff")
        if verbosity:
            cmd.append("-" + "v" * verbosity)
        if extra_vars:
            vars_file = os.path.join(rundir, "extra_vars.json")
            with open(vars_file, "w") as f:
                json.dump(extra_vars, f)
            cmd += ["-e", "@" + vars_file]
        run_env = self.env(env)
        run_env["KUBEHW_RESULTS_FILE"] = results_file
        proc = subprocess.run(cmd, env=run_env, cwd=rundir, capture_output=True, text=True, check=False,
                              timeout=PLAYBOOK_TIMEOUT)
        results = []
        if os.path.exists(results_file):
            with open(results_file) as f:
                results = [json.loads(line) for line in f if line.strip()]
        return PlaybookRun(proc.returncode, results, proc.stdout, proc.stderr, playbook_text)


# KUBEHW_IDENTITY=least-privilege: the modules run as the automation identity of
# playbooks/templates/rbac.yaml.j2 and nothing more (`make integration-least-privilege`).
# On a real cluster, give KUBECONFIG a token bound to those roles instead.
LEAST_PRIVILEGE_TOKEN = "kubehw-least-privilege-suite"
RBAC_TEMPLATE = os.path.join(REPO_ROOT, "playbooks", "templates", "rbac.yaml.j2")
RBAC_VARS = {"kubehw_rbac_namespace": "kubehw", "kubehw_rbac_service_account": "automation",
             "kubehw_rbac_plugin_namespace": "kube-system", "kubehw_rbac_smoke_test_namespace": "default"}


def least_privilege():
    return os.environ.get("KUBEHW_IDENTITY") == "least-privilege"


def rbac_objects(**overrides):
    import jinja2

    with open(RBAC_TEMPLATE) as f:
        return list(yaml.safe_load_all(jinja2.Template(f.read()).render(**dict(RBAC_VARS, **overrides))))


def grant_plugin_namespace(cluster, namespace):
    """In least-privilege runs, the shipped plugin Role and its binding, in another plugin namespace."""
    from kubernetes import utils

    if not (least_privilege() and cluster.simulated):
        return
    for doc in rbac_objects(kubehw_rbac_plugin_namespace=namespace):
        if doc["metadata"]["name"] == "kubehw-devices-plugins":
            utils.create_from_dict(cluster.api_client, doc)


def least_privilege_kubeconfig(cluster, directory):
    """Create the shipped RBAC objects as the admin; return a kubeconfig of a token bound only to them."""
    from kubernetes import utils

    from tests.simcluster.kubeconfig import write_kubeconfig

    existing = set(ns.metadata.name for ns in cluster.core.list_namespace().items)
    for doc in rbac_objects():
        if doc["kind"] == "Namespace" and doc["metadata"]["name"] in existing:
            continue
        utils.create_from_dict(cluster.api_client, doc)
    user = "system:serviceaccount:%s:%s" % (RBAC_VARS["kubehw_rbac_namespace"], RBAC_VARS["kubehw_rbac_service_account"])
    cluster.sim.add_token(LEAST_PRIVILEGE_TOKEN, user, ["system:serviceaccounts", "system:authenticated"])
    path = os.path.join(directory, "least-privilege.kubeconfig")
    write_kubeconfig(path, cluster.sim.url, cluster.sim.ca_cert_path, LEAST_PRIVILEGE_TOKEN)
    return path


@pytest.fixture
def ansible(cluster, collections_path, tmp_path):
    kubeconfig = cluster.kubeconfig
    if least_privilege() and cluster.simulated:
        kubeconfig = least_privilege_kubeconfig(cluster, str(tmp_path))
    return AnsibleRunner(str(tmp_path), collections_path, kubeconfig)
