# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The integration suite's playbook runner: plays tasks on localhost with the collection of this checkout and reads
every task's result through the kubehw_results callback."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import sys
import tempfile

import yaml

CALLBACK_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "integration", "callback_plugins")
PLAYBOOK_TIMEOUT = 300


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
