# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection builds into a tarball that installs, and every module's documentation renders
from the installed copy (what a user gets from Galaxy or Automation Hub)."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import glob
import json
import os
import shutil
import subprocess
import tarfile

import pytest
import yaml

from tests.support.collection_install import build_tarball, dependency_sources, galaxy_info, run, user_env
from tests.support.playbook_runner import tool

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULES = sorted(
    os.path.splitext(os.path.basename(path))[0]
    for path in glob.glob(os.path.join(ROOT, 'plugins', 'modules', '*.py'))
    if not os.path.basename(path).startswith('__')
)


def _run(args, env=None, cwd=None):
    proc = subprocess.run(args, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False,
                          universal_newlines=True, timeout=300)
    assert proc.returncode == 0, '%s failed (rc=%d)\nstdout:\n%s\nstderr:\n%s' % (
        ' '.join(args), proc.returncode, proc.stdout, proc.stderr)
    return proc


# What a working checkout may hold besides the collection: tool environments, caches, test and benchmark output, a
# collections tree made for a test run, built tarballs. None of it may ship.
CHECKOUT_STATE = ('.venv/bin/python', '.cache/collections/x', '.ansible/tmp/x', '.molecule/default/state.yml',
                  '.benchmarks/run.json', 'collections/ansible_collections/x', 'ansible_collections/kubehw/x',
                  '.pytest_cache/v', '.hypothesis/examples/x', 'tests/output/junit.xml', 'plugins/modules/__pycache__/x.pyc',
                  'changelogs/.plugin-cache.yaml', 'benchmarks/results/x.tmp', 'kubehw-devices-0.0.1.tar.gz')
# The top of the tarball: what users run and read, and the two files ansible-galaxy writes.
SHIPPED = {'MANIFEST.json', 'FILES.json', 'README.md', 'COPYING', 'CHANGELOG.rst', 'changelogs', 'docs', 'meta',
           'playbooks', 'plugins', 'roles'}


@pytest.fixture(scope='module')
def installed(tmp_path_factory):
    """Build the tarball from a copy of this checkout that holds every kind of state a working checkout may hold,
    and install it, with its declared dependency from the local copy make setup keeps, into an empty path."""
    base = tmp_path_factory.mktemp('build')
    checkout = base / 'devices'
    shutil.copytree(ROOT, str(checkout), ignore=shutil.ignore_patterns('.venv', '.cache', '.git'))
    for path in CHECKOUT_STATE:
        target = checkout / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(u'state\n')
    collections = base / 'collections'
    env = user_env(base / 'home', {'ANSIBLE_COLLECTIONS_PATH': str(collections), 'ANSIBLE_COLLECTIONS_SCAN_SYS_PATH': 'false'})
    tarball = build_tarball(checkout, base / 'dist', env)
    install = [tool('ansible-galaxy'), 'collection', 'install', '--offline', '-p', str(collections), tarball]
    # without its declared dependency at hand, the offline install refuses, naming it
    alone = run(install, env, base)
    _run(install + dependency_sources(), env=env)
    galaxy = galaxy_info()
    return {'tarball': tarball, 'galaxy': galaxy, 'env': env, 'alone': alone, 'collections': collections,
            'path': collections / 'ansible_collections' / galaxy['namespace'] / galaxy['name']}


def test_tarball_holds_what_users_run_and_no_checkout_state(installed):
    with tarfile.open(str(installed['tarball'])) as archive:
        names = archive.getnames()
    assert set(name.split('/')[0] for name in names) == SHIPPED
    assert 'meta/runtime.yml' in names and 'CHANGELOG.rst' in names and 'changelogs/changelog.yaml' in names
    assert [n for n in names if '__pycache__' in n or n.endswith(('.pyc', '.tar.gz', '.plugin-cache.yaml'))] == []
    for module in MODULES:
        assert 'plugins/modules/%s.py' % module in names


def test_dependencies_are_declared_and_installed(installed):
    assert installed['galaxy']['dependencies'] == {'kubernetes.core': '>=3.0.0'}
    alone = installed['alone']
    assert alone.returncode != 0 and 'kubernetes.core' in alone.stderr, alone.stderr
    with open(str(installed['collections'] / 'ansible_collections' / 'kubernetes' / 'core' / 'MANIFEST.json')) as handle:
        assert json.load(handle)['collection_info']['name'] == 'core'


def test_installed_manifest_names_the_collection(installed):
    with open(str(installed['path'] / 'MANIFEST.json')) as handle:
        info = json.load(handle)['collection_info']
    assert (info['namespace'], info['name'], info['version']) == (
        installed['galaxy']['namespace'], installed['galaxy']['name'], installed['galaxy']['version'])
    assert info['license'] == ['GPL-3.0-or-later']


def test_collection_has_modules():
    # the collection exists to ship these; an empty plugins/modules means a broken checkout
    assert MODULES, 'no modules found in plugins/modules'


@pytest.mark.parametrize('module', MODULES)
def test_module_doc_renders_from_installed_copy(installed, module):
    fqcn = 'kubehw.devices.%s' % module
    data = json.loads(_run([tool('ansible-doc'), '-t', 'module', '--json', fqcn], env=installed['env']).stdout)
    doc = data[fqcn]['doc']
    # rendered from the installed tarball, not from the checkout
    assert doc['filename'].startswith(str(installed['path']))
    assert doc['module'] == module
    assert doc.get('short_description')
    assert data[fqcn].get('examples')

    text = _run([tool('ansible-doc'), '-t', 'module', fqcn], env=installed['env'])
    assert fqcn in text.stdout
    assert 'OPTIONS' in text.stdout
    assert 'ERROR' not in text.stderr


def readme_requirements():
    """The requirements.yml the README's install section shows (as comments of its shell block)."""
    with open(os.path.join(ROOT, 'README.md')) as handle:
        section = handle.read().split('\n## Install\n', 1)[1].split('\n## ', 1)[0]
    lines = section.split('# or, in a requirements.yml', 1)[1].splitlines()[1:]
    return yaml.safe_load('\n'.join(line[4:] for line in lines if line.startswith('#   ')))


def test_the_readmes_requirements_file_installs_from_git(tmp_path):
    """The README's requirements.yml, pointed at this repository's HEAD (a git URL of the same kind, on this machine)
    with the dependency's local copy beside it, installs the collection built from the commit into an empty path."""
    (entry,) = readme_requirements()['collections']
    assert entry['type'] == 'git' and entry['name'].endswith('/devices.git')
    assert str(entry['version']) == galaxy_info()['version']
    local = dict(entry, name='git+file://' + ROOT, version='HEAD')
    requirements = {'collections': [local] + [{'name': path, 'type': 'dir'} for path in dependency_sources()]}
    (tmp_path / 'requirements.yml').write_text(yaml.safe_dump(requirements))
    collections = tmp_path / 'collections'
    env = user_env(tmp_path / 'home', {'ANSIBLE_COLLECTIONS_SCAN_SYS_PATH': 'false'})
    _run([tool('ansible-galaxy'), 'collection', 'install', '-r', 'requirements.yml', '--offline', '-p',
          str(collections)], env=env, cwd=str(tmp_path))
    with open(str(collections / 'ansible_collections' / 'kubehw' / 'devices' / 'MANIFEST.json')) as handle:
        assert json.load(handle)['collection_info']['version'] == galaxy_info()['version']
    assert not (collections / 'ansible_collections' / 'kubehw' / 'devices' / 'tests').exists()
