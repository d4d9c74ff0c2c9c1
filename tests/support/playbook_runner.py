# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one way the integration tests, the unit tests of the roles, the benchmarks and `make demo` run
ansible-playbook and ansible-inventory: with the collection of this checkout, this checkout's ansible.cfg, an
environment nothing of the caller's shell leaks into, a temporary directory of the run's own, a timeout, and every
task's result (with when the task started and returned) read through the kubehw_results callback
(tests/support/callback_plugins/).

  collections_path(root)                 ansible_collections/kubehw/devices -> this checkout, plus .cache/collections
  has_test_collection(name)              whether make setup unpacked that collection into .cache/collections
  ansible_env(collections, workdir, ...) the environment of a run
  run_playbook(playbook, workdir, ...)   -> PlaybookRun: .returncode (.rc), .stdout, .stderr, .seconds, .results,
                                            .result(task name), .printed_messages(prefix), .recap(), .output()
  run_inventory(source, args, workdir, ...)  -> ToolRun: .returncode, .stdout, .stderr, .seconds
  AnsibleRunner(workdir, collections, kubeconfig)   the integration suite's `ansible` fixture: tasks on localhost
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import yaml

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ANSIBLE_CONFIG = os.path.join(REPO_ROOT, "ansible.cfg")
TEST_COLLECTIONS = os.path.join(REPO_ROOT, ".cache", "collections")
CALLBACK_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "callback_plugins")
RESULTS_CALLBACK = "kubehw_results"
PLAYBOOK_TIMEOUT = 300
RECAP = re.compile(r"^(\S+)\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


def tool(name):
    """The command installed beside this Python (ansible-playbook of the same ansible-core), else the one on PATH."""
    path = os.path.join(os.path.dirname(sys.executable), name)
    return path if os.path.exists(path) else (shutil.which(name) or name)


def has_test_collection(name):
    """Whether make setup unpacked this collection ("kubernetes.core") into .cache/collections."""
    return os.path.isdir(os.path.join(TEST_COLLECTIONS, "ansible_collections", *name.split(".")))


def collections_path(root, test_collections=True, checkout=REPO_ROOT):
    """A collections path in which kubehw.devices is this checkout (or ``checkout``, another commit's tree, for a
    benchmark's before and after): root/ansible_collections/kubehw/devices (a link), then the test collections
    `make setup` unpacked (kubernetes.core, ansible.posix...) unless test_collections is False. Returns it as
    ANSIBLE_COLLECTIONS_PATH wants it."""
    namespace = os.path.join(root, "ansible_collections", "kubehw")
    os.makedirs(namespace, exist_ok=True)
    link = os.path.join(namespace, "devices")
    if not os.path.islink(link):
        os.symlink(os.path.abspath(checkout), link)
    paths = [str(root)]
    if test_collections and os.path.isdir(TEST_COLLECTIONS):
        paths.append(TEST_COLLECTIONS)
    return os.pathsep.join(paths)


def ansible_env(collections, workdir, kubeconfig=None, extra=None):
    """The environment of an Ansible run. Nothing from the caller's shell may point the run at another cluster or
    change how Ansible behaves (K8S_AUTH_*, KUBECONFIG and ANSIBLE_* are dropped); this checkout's ansible.cfg, the
    given collections path and temporary directories under workdir are used. kubeconfig becomes
    K8S_AUTH_KUBECONFIG, which the modules and the k8s_nodes inventory plugin read. extra is set last; a value of
    None removes a variable, e.g. {"K8S_AUTH_KUBECONFIG": None}."""
    env = dict((key, value) for key, value in os.environ.items()
               if not (key.startswith("K8S_AUTH_") or key.startswith("ANSIBLE_") or key == "KUBECONFIG"))
    env.update({
        "ANSIBLE_CONFIG": ANSIBLE_CONFIG,
        "ANSIBLE_COLLECTIONS_PATH": collections,
        "ANSIBLE_CALLBACK_PLUGINS": CALLBACK_DIR,
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_RETRY_FILES_ENABLED": "0",
        "ANSIBLE_LOCALHOST_WARNING": "0",
        "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0",
        # an inventory source no plugin can read fails the run instead of leaving an empty inventory
        "ANSIBLE_INVENTORY_UNPARSED_FAILED": "1",
        "ANSIBLE_LOCAL_TEMP": os.path.join(workdir, "ansible-local"),
        "ANSIBLE_REMOTE_TEMP": os.path.join(workdir, "ansible-remote"),
        "PYTHONDONTWRITEBYTECODE": "1",
    })
    if kubeconfig:
        env["K8S_AUTH_KUBECONFIG"] = kubeconfig
    for key, value in (extra or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = str(value)
    return env


class ToolRun:
    """A finished ansible-playbook or ansible-inventory: its command, exit code, output and wall time."""

    def __init__(self, cmd, returncode, stdout, stderr, seconds):
        self.cmd = cmd
        self.returncode = self.rc = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.seconds = seconds


class PlaybookRun(ToolRun):
    """A finished ansible-playbook, with every task's result as the kubehw_results callback wrote it."""

    def __init__(self, cmd, returncode, stdout, stderr, seconds, results, playbook):
        super(PlaybookRun, self).__init__(cmd, returncode, stdout, stderr, seconds)
        self.results = results
        self.playbook = playbook

    def result(self, name):
        """The result of the task with this name (the last one if it ran more than once)."""
        for res in reversed(self.results):
            if res.get("task") == name:
                return res
        ran = [r.get("task") for r in self.results]
        raise KeyError("no task named %r ran; tasks: %r\n%s" % (name, ran, self.output()))

    def printed_messages(self, prefix=""):
        """The "msg" values the default callback printed (of debug, assert and fail tasks), in order, those that
        start with prefix."""
        found = []
        for line in self.stdout.splitlines():
            text = line.strip()
            if text.startswith('"msg": "'):
                message = json.loads("{%s}" % text.rstrip(","))["msg"]
                if message.startswith(prefix):
                    found.append(message)
        return found

    def recap(self):
        """The PLAY RECAP: {host: {"ok": n, "changed": n, "unreachable": n, "failed": n}}."""
        return dict((m.group(1), dict(ok=int(m.group(2)), changed=int(m.group(3)), unreachable=int(m.group(4)),
                                      failed=int(m.group(5))))
                    for m in RECAP.finditer(self.stdout))

    def output(self):
        return "--- playbook\n%s\n--- stdout\n%s\n--- stderr\n%s" % (self.playbook, self.stdout, self.stderr)

    def __repr__(self):
        return "<PlaybookRun rc=%d tasks=%r>" % (self.returncode, [(r.get("task"), r.get("_outcome")) for r in self.results])


def _execute(cmd, env, cwd, timeout):
    started = time.monotonic()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, check=False, timeout=timeout)
    return proc, time.monotonic() - started


def run_playbook(playbook, workdir, inventory="localhost,", collections=None, kubeconfig=None, env=None,
                 extra_vars=None, args=(), check=False, diff=False, verbosity=0, timeout=PLAYBOOK_TIMEOUT,
                 results=True):
    """Run ansible-playbook in a directory of its own under workdir and return a PlaybookRun.

    playbook: a path, a playbook of a collection ("kubehw.devices.site"), or the plays themselves (a list, written
    to the run's directory). collections: ANSIBLE_COLLECTIONS_PATH (default: collections_path() in workdir).
    env: ansible_env()'s extra. extra_vars: a dict passed as one vars file. args: more command-line arguments.
    results=False leaves the results callback off, for a benchmark that times the whole process.
    """
    rundir = tempfile.mkdtemp(prefix="run-", dir=workdir)
    if isinstance(playbook, list):
        text = yaml.safe_dump(playbook, default_flow_style=False, sort_keys=False)
        playbook = os.path.join(rundir, "playbook.yml")
        with open(playbook, "w") as f:
            f.write(text)
    else:
        text = playbook
    if collections is None:
        collections = collections_path(os.path.join(workdir, "collections"))
    cmd = [tool("ansible-playbook"), "-i", inventory, playbook]
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
    cmd += list(args)
    run_env = ansible_env(collections, workdir, kubeconfig, env)
    results_file = os.path.join(rundir, "results.jsonl")
    if results:
        run_env.update(ANSIBLE_CALLBACKS_ENABLED=RESULTS_CALLBACK, KUBEHW_RESULTS_FILE=results_file)
    proc, seconds = _execute(cmd, run_env, rundir, timeout)
    recorded = []
    if os.path.exists(results_file):
        with open(results_file) as f:
            recorded = [json.loads(line) for line in f if line.strip()]
    return PlaybookRun(cmd, proc.returncode, proc.stdout, proc.stderr, seconds, recorded, text)


def run_inventory(source, args, workdir, collections=None, kubeconfig=None, env=None, timeout=PLAYBOOK_TIMEOUT):
    """ansible-inventory -i source *args (e.g. ["--graph"] or ["--list"]) in workdir; returns a ToolRun."""
    if collections is None:
        collections = collections_path(os.path.join(workdir, "collections"))
    cmd = [tool("ansible-inventory"), "-i", source] + list(args)
    proc, seconds = _execute(cmd, ansible_env(collections, workdir, kubeconfig, env), workdir, timeout)
    return ToolRun(cmd, proc.returncode, proc.stdout, proc.stderr, seconds)


class AnsibleRunner:
    """The integration suite's `ansible` fixture: plays tasks on localhost (local connection, this Python) against
    the test's cluster; ansible(tasks, check=False, diff=False, extra_vars=None, env=None, module_defaults=None,
    verbosity=0) -> PlaybookRun. .run(plays, inventory) runs plays of the test's own the same way."""

    def __init__(self, workdir, collections, kubeconfig):
        self.workdir = workdir
        self.collections = collections
        self.kubeconfig = kubeconfig

    def run(self, plays, inventory="localhost,", env=None, **options):
        # local connection: pipelining skips writing each module to a temp file first
        return run_playbook(plays, self.workdir, inventory=inventory, collections=self.collections,
                            kubeconfig=self.kubeconfig, env=dict({"ANSIBLE_PIPELINING": "1"}, **(env or {})), **options)

    def __call__(self, tasks, check=False, diff=False, extra_vars=None, env=None, module_defaults=None,
                 verbosity=0):
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
        return self.run([play], env=env, check=check, diff=diff, extra_vars=extra_vars, verbosity=verbosity)
