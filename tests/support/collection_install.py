# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection as users get it: the tarball `ansible-galaxy collection build` makes of a checkout, installed with
its declared dependencies into a collections path nothing else is in, and the environment of a user's shell with no
trace of this checkout (no ansible.cfg, no ANSIBLE_* or K8S_AUTH_* variables, a home of its own).

  user_env(home, extra=None)                  the environment of such a shell
  build_tarball(checkout, dist, env)           -> path of the tarball
  dependency_sources()                         local copies (make setup's .cache/collections) of galaxy.yml's
                                               dependencies, which an offline install takes in place of Galaxy
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import subprocess

import yaml

from tests.support.playbook_runner import REPO_ROOT, TEST_COLLECTIONS, tool


def galaxy_info(checkout=REPO_ROOT):
    with open(os.path.join(checkout, "galaxy.yml")) as handle:
        return yaml.safe_load(handle)


def user_env(home, extra=None):
    """A user's shell: HOME is ``home`` (so ~/.ansible/collections is empty until something is installed there), no
    Ansible configuration or variable of this checkout's, no cluster named but what ``extra`` adds; the tools of the
    Python running the tests come first on PATH."""
    os.makedirs(str(home), exist_ok=True)
    env = dict((key, value) for key, value in os.environ.items()
               if not (key.startswith(("ANSIBLE_", "K8S_AUTH_")) or key in ("KUBECONFIG", "HOME")))
    env.update(HOME=str(home), ANSIBLE_NOCOLOR="1",
               PATH=os.pathsep.join([os.path.dirname(tool("ansible-playbook")), env.get("PATH", "")]))
    env.update(extra or {})
    return env


def run(args, env, cwd, timeout=600):
    return subprocess.run(args, env=env, cwd=str(cwd), capture_output=True, text=True, check=False, timeout=timeout)


def build_tarball(checkout, dist, env):
    """Build the collection of ``checkout`` into ``dist``; returns the tarball's path."""
    os.makedirs(str(dist), exist_ok=True)
    proc = run([tool("ansible-galaxy"), "collection", "build", str(checkout), "--output-path", str(dist)], env, dist)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    info = galaxy_info(str(checkout))
    tarball = os.path.join(str(dist), "%s-%s-%s.tar.gz" % (info["namespace"], info["name"], info["version"]))
    assert os.path.isfile(tarball), proc.stdout
    return tarball


def dependency_sources():
    """The folders of galaxy.yml's dependencies in make setup's test collections, in name order."""
    names = sorted(galaxy_info().get("dependencies") or {})
    return [os.path.join(TEST_COLLECTIONS, "ansible_collections", *name.split(".")) for name in names]
