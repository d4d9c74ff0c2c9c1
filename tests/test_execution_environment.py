# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The AWX execution environment definition is one ansible-builder accepts, and the Python and
system requirements it gets from the collection's meta/ files are ours."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil
import subprocess

import yaml

from tests.support.playbook_runner import tool

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EE_DIR = os.path.join(ROOT, "playbooks", "awx")


def _run(args, cwd=None, env=None):
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, "%s failed\n%s\n%s" % (" ".join(args), proc.stdout, proc.stderr)
    return proc


def test_ansible_builder_creates_a_build_context(tmp_path):
    work = tmp_path / "ee"
    work.mkdir()
    shutil.copy(os.path.join(EE_DIR, "execution-environment.yml"), str(work))
    env = dict(os.environ, ANSIBLE_CONFIG=str(tmp_path / "none.cfg"))
    _run([tool("ansible-galaxy"), "collection", "build", ROOT, "--output-path", str(work)], env=env)
    assert (work / "kubehw-devices-0.1.0.tar.gz").exists()
    _run([tool("ansible-builder"), "create", "-f", "execution-environment.yml", "--context", "context"],
         cwd=str(work))
    names = [n for n in ("Containerfile", "Dockerfile") if (work / "context" / n).exists()]
    assert names, "ansible-builder wrote no Containerfile or Dockerfile"
    containerfile = (work / "context" / names[0]).read_text()
    assert "ansible-galaxy collection install" in containerfile and "introspect" in containerfile
    copied = work / "context" / "_build" / "collections" / "kubehw-devices-0.1.0.tar.gz"
    assert copied.exists()
    requirements = yaml.safe_load((work / "context" / "_build" / "requirements.yml").read_text())
    assert requirements["collections"][0]["type"] == "file"


def test_builder_introspection_reads_our_requirements(tmp_path):
    install = tmp_path / "collections"
    env = dict(os.environ, ANSIBLE_CONFIG=str(tmp_path / "none.cfg"))
    _run([tool("ansible-galaxy"), "collection", "build", ROOT, "--output-path", str(tmp_path)], env=env)
    _run([tool("ansible-galaxy"), "collection", "install", "--force", "-p", str(install),
          str(tmp_path / "kubehw-devices-0.1.0.tar.gz")], env=env)
    out = _run([tool("ansible-builder"), "introspect", "--sanitize", str(install)]).stdout
    data = yaml.safe_load(out)
    assert data, out
    python_reqs = " ".join(data["python"])
    assert "kubernetes" in python_reqs and "jsonpatch" in python_reqs, out
    assert any("ca-certificates" in line for line in data["system"])
