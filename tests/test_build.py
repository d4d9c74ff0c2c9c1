# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection builds into a tarball that installs, and every module's documentation renders
from the installed copy (what a user gets from Galaxy or Automation Hub)."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import glob
import json
import os
import subprocess
import tarfile

import pytest
import yaml

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


@pytest.fixture(scope='module')
def installed(tmp_path_factory):
    """Build the tarball from this checkout and install it into an empty collections path."""
    base = tmp_path_factory.mktemp('build')
    dist = base / 'dist'
    collections = base / 'collections'
    # an empty config, so the checkout's ansible.cfg (collections_path) cannot leak into the check
    config = base / 'ansible.cfg'
    config.write_text(u'[defaults]\n')
    env = dict(os.environ)
    env.update(
        ANSIBLE_COLLECTIONS_PATH=str(collections),
        ANSIBLE_COLLECTIONS_SCAN_SYS_PATH='false',
        ANSIBLE_CONFIG=str(config),
        ANSIBLE_NOCOLOR='1',
    )
    _run([tool('ansible-galaxy'), 'collection', 'build', ROOT, '--output-path', str(dist)], env=env)
    with open(os.path.join(ROOT, 'galaxy.yml')) as handle:
        galaxy = yaml.safe_load(handle)
    tarball = dist / ('%s-%s-%s.tar.gz' % (galaxy['namespace'], galaxy['name'], galaxy['version']))
    assert tarball.is_file(), 'build produced %s' % sorted(p.name for p in dist.iterdir())
    _run([tool('ansible-galaxy'), 'collection', 'install', '--offline', '-p', str(collections), str(tarball)], env=env)
    return {'tarball': tarball, 'galaxy': galaxy, 'env': env,
            'path': collections / 'ansible_collections' / galaxy['namespace'] / galaxy['name']}


def test_tarball_holds_the_collection_and_no_local_state(installed):
    with tarfile.open(str(installed['tarball'])) as archive:
        names = archive.getnames()
    assert 'MANIFEST.json' in names
    assert 'meta/runtime.yml' in names
    assert 'COPYING' in names
    leaked = [n for n in names if n.split('/')[0] in ('.venv', '.cache', '.git', '.ci') or n.startswith('tests/output/')]
    assert leaked == []
    for module in MODULES:
        assert 'plugins/modules/%s.py' % module in names


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
