# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The AWX execution environment definition is one ansible-builder accepts, and the Python and
system requirements it gets from the collection's meta/ files are ours."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shlex
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


def build_commands():
    """The build lines of the definition's header comment, as a user copies them."""
    with open(os.path.join(EE_DIR, "execution-environment.yml")) as handle:
        return [line.lstrip("#").strip() for line in handle
                if line.startswith("#   ansible-galaxy ") or line.startswith("#   ansible-builder ")]


def test_the_build_commands_of_the_header_work_from_the_collection_root(tmp_path):
    """The header's commands, run as written from a copy of the collection root: the tarball lands where the
    definition copies it from, and ansible-builder makes a build context holding it (`create` writes what `build`
    would hand to a container engine, which this machine lacks)."""
    galaxy_build, builder_build = build_commands()
    root = tmp_path / "devices"
    shutil.copytree(ROOT, str(root), ignore=shutil.ignore_patterns(".venv", ".cache", ".git", "__pycache__"))
    env = dict(os.environ, ANSIBLE_CONFIG=str(tmp_path / "none.cfg"))
    _run([tool(word) if i == 0 else word for i, word in enumerate(shlex.split(galaxy_build))], cwd=str(root), env=env)
    with open(os.path.join(ROOT, "galaxy.yml")) as handle:
        version = yaml.safe_load(handle)["version"]
    tarball = "kubehw-devices-%s.tar.gz" % version
    assert (root / "playbooks" / "awx" / tarball).exists()
    args = shlex.split(builder_build)
    assert args[:2] == ["ansible-builder", "build"] and args[-1].endswith(":" + version)
    definition = args[args.index("-f") + 1]
    _run([tool("ansible-builder"), "create", "-f", definition, "--context", str(tmp_path / "context")],
         cwd=str(root))
    context = tmp_path / "context"
    names = [n for n in ("Containerfile", "Dockerfile") if (context / n).exists()]
    assert names, "ansible-builder wrote no Containerfile or Dockerfile"
    containerfile = (context / names[0]).read_text()
    assert "ansible-galaxy collection install" in containerfile and "introspect" in containerfile
    assert (context / "_build" / "collections" / tarball).exists()
    requirements = yaml.safe_load((context / "_build" / "requirements.yml").read_text())
    assert requirements["collections"] == [{"name": "/build/collections/" + tarball, "type": "file"}]


def test_builder_introspection_reads_our_requirements(tmp_path):
    install = tmp_path / "collections"
    env = dict(os.environ, ANSIBLE_CONFIG=str(tmp_path / "none.cfg"))
    _run([tool("ansible-galaxy"), "collection", "build", ROOT, "--output-path", str(tmp_path)], env=env)
    tarball = [p for p in os.listdir(str(tmp_path)) if p.endswith(".tar.gz")]
    _run([tool("ansible-galaxy"), "collection", "install", "--offline", "--no-deps", "--force", "-p", str(install),
          str(tmp_path / tarball[0])], env=env)
    out = _run([tool("ansible-builder"), "introspect", "--sanitize", str(install)]).stdout
    data = yaml.safe_load(out)
    assert data, out
    python_reqs = " ".join(data["python"])
    assert "kubernetes" in python_reqs and "jsonpatch" in python_reqs, out
    assert any("ca-certificates" in line for line in data["system"])
