# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The docs name what is on disk, and the molecule scenarios name only files that exist.

docs/architecture.md must give every module, role, playbook, filter and inventory plugin a table row
(its name in backquotes in the first cell, what it does in the next), so a newcomer finds each one
there. The molecule scenarios' files (molecule.yml, prepare, converge, verify and the shared
playbooks) must name only repository files that exist, comments included. Every filter has the
documentation ansible-doc shows, and the changelog fragments are valid for antsibull-changelog.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import importlib
import os
import re
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARCHITECTURE = os.path.join(ROOT, 'docs', 'architecture.md')
MOLECULE = os.path.join(ROOT, 'extensions', 'molecule')


def _stems(pattern):
    return sorted(os.path.splitext(os.path.basename(path))[0] for path in glob.glob(os.path.join(ROOT, pattern))
                  if not os.path.basename(path).startswith('_'))


def filters_on_disk():
    """Every filter name the collection's filter plugin files register."""
    names = []
    for stem in _stems('plugins/filter/*.py'):
        module = importlib.import_module('ansible_collections.kubehw.devices.plugins.filter.' + stem)
        names.extend(module.FilterModule().filters())
    return sorted(names)


def on_disk():
    """(kind, name, how the docs write it) of every module, role, playbook, filter, inventory plugin, private helper
    and doc fragment."""
    found = [('module', name, name) for name in _stems('plugins/modules/*.py')]
    roles = sorted(path.split(os.sep)[-3] for path in glob.glob(os.path.join(ROOT, 'roles', '*', 'tasks', 'main.yml')))
    found += [('role', name, name) for name in roles]
    found += [('playbook', name, name + '.yml') for name in _stems('playbooks/*.yml')]
    found += [('filter', name, name) for name in filters_on_disk()]
    found += [('inventory plugin', name, name) for name in _stems('plugins/inventory/*.py')]
    found += [('module_utils', name, name) for name in sorted(
        os.path.basename(path) for path in glob.glob(os.path.join(ROOT, 'plugins', 'module_utils', '_*.py')))]
    found += [('doc fragment', name, 'doc_fragments/' + name + '.py') for name in _stems('plugins/doc_fragments/*.py')]
    return found


def support_files():
    """Every Python file of the test equipment (tests/support/*.py), as the docs write it."""
    return sorted(os.path.basename(path) for path in glob.glob(os.path.join(ROOT, 'tests', 'support', '*.py'))
                  if not os.path.basename(path).startswith('_'))


def support_missing_from(text):
    """The test equipment's files the architecture's tests/support row does not name."""
    row = next((line for line in text.splitlines() if line.startswith('| `tests/support/`')), '')
    return [name for name in support_files() if '`%s`' % name not in row]


def described(text, written):
    """True when a table row has `written` in its first cell and a description in its second."""
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip('|').split('|')] if line.startswith('|') else []
        if len(cells) >= 2 and re.search(r'`%s`' % re.escape(written), cells[0]) and cells[1].strip('- '):
            return True
    return False


def missing_from(text):
    return ['%s %s' % (kind, name) for kind, name, written in on_disk() if not described(text, written)]


def test_the_disk_has_what_the_check_looks_for():
    kinds = {}
    for kind, name, _written in on_disk():
        kinds.setdefault(kind, []).append(name)
    assert 'k8s_node_extended_resource' in kinds['module'] and 'device_facts' in kinds['module']
    assert 'accelerator_node' in kinds['role'] and 'site' in kinds['playbook']
    assert {'containerd_nvidia_dropin', 'crio_nvidia_dropin'} <= set(kinds['filter'])
    assert 'k8s_nodes' in kinds['inventory plugin']
    assert {'_client.py', '_errors.py', '_waiting.py'} <= set(kinds['module_utils'])
    assert 'k8s_auth_options' in kinds['doc fragment']
    assert {'control_plane.py', 'fault_proxy.py', 'real_node.py'} <= set(support_files())


def test_architecture_names_every_module_role_playbook_filter_and_inventory_plugin():
    with open(ARCHITECTURE, encoding='utf-8') as handle:
        assert missing_from(handle.read()) == []


def test_architecture_names_every_file_of_the_test_equipment():
    with open(ARCHITECTURE, encoding='utf-8') as handle:
        assert support_missing_from(handle.read()) == []


def test_the_architecture_check_finds_a_missing_or_undescribed_name():
    with open(ARCHITECTURE, encoding='utf-8') as handle:
        text = handle.read()
    without = '\n'.join(line for line in text.splitlines() if not line.startswith('| `dra_driver_deploy`'))
    assert missing_from(without) == ['module dra_driver_deploy']
    undescribed = re.sub(r'^(\| `site\.yml` \|)[^\n]*$', r'\1 |', text, flags=re.M)
    assert missing_from(undescribed) == ['playbook site']
    without_helper = '\n'.join(line for line in text.splitlines() if not line.startswith('| `_waiting.py`'))
    assert missing_from(without_helper) == ['module_utils _waiting.py']
    assert support_missing_from(text.replace('`real_node.py`', 'real_node.py')) == ['real_node.py']


def filter_docs(name):
    """The documentation ansible-doc shows for a filter: the YAML file of its name in plugins/filter, or DOCUMENTATION
    (EXAMPLES, RETURN) of the Python file of its name."""
    base = os.path.join(ROOT, 'plugins', 'filter', name)
    for extension in ('.yml', '.yaml'):
        if os.path.exists(base + extension):
            with open(base + extension, encoding='utf-8') as handle:
                return yaml.safe_load(handle)
    if os.path.exists(base + '.py'):
        module = importlib.import_module('ansible_collections.kubehw.devices.plugins.filter.' + name)
        return dict((key, yaml.safe_load(getattr(module, key, '') or 'null')) for key in ('DOCUMENTATION', 'EXAMPLES', 'RETURN'))
    return {}


@pytest.mark.parametrize('name', filters_on_disk())
def test_every_filter_is_documented_for_ansible_doc(name):
    """ansible-test's ansible-doc check skips a filter without documentation; this one does not."""
    docs = filter_docs(name)
    assert (docs.get('DOCUMENTATION') or {}).get('name') == name
    assert docs['DOCUMENTATION'].get('short_description') and docs['DOCUMENTATION']['options'].get('_input')
    assert 'kubehw.devices.%s' % name in str(docs.get('EXAMPLES'))
    assert (docs.get('RETURN') or {}).get('_value')


# Molecule scenarios ------------------------------------------------------------------------------

# A file of the repository named in a scenario file: a relative path ending in one of these, or one under
# {{ playbook_dir }} or {{ molecule_scenario_directory }}. Paths on the target (/etc/..., file:///srv/...) and
# under run-time directories ({{ molecule_ephemeral_directory }}, ...) are not the repository's.
PATH = re.compile(r'(?<![\w/.:$-])(?:\{\{\s*(?P<var>\w+)\s*\}\}/)?(?P<path>(?:[\w.-]+/)*[\w.-]+\.(?:sh|ya?ml|py|md|j2))(?![\w/-])')
RESOLVED_VARIABLES = ('playbook_dir', 'molecule_scenario_directory')


def scenario_dirs(molecule=MOLECULE):
    return sorted(os.path.dirname(path) for path in glob.glob(os.path.join(molecule, '*', 'molecule.yml')))


def scenario_files(molecule=MOLECULE):
    files = []
    for directory in scenario_dirs(molecule):
        files += [os.path.join(directory, name + '.yml') for name in ('molecule', 'prepare', 'converge', 'verify')
                  if os.path.exists(os.path.join(directory, name + '.yml'))]
    return files + sorted(glob.glob(os.path.join(molecule, '_shared', '*.yml')))


def dangling(molecule=MOLECULE, root=ROOT):
    """'file: path' for every repository path a scenario file names that exists in none of the places it may mean."""
    scenarios = scenario_dirs(molecule)
    bad = []
    for name in scenario_files(molecule):
        here = os.path.dirname(name)
        # a shared playbook runs from the scenarios: its scenario directory is any of them
        scenario_bases = scenarios if os.path.basename(here) == '_shared' else [here]
        with open(name, encoding='utf-8') as handle:
            text = handle.read()
        for match in PATH.finditer(text):
            variable, path = match.group('var'), match.group('path')
            if variable == 'playbook_dir':
                bases = [here]
            elif variable == 'molecule_scenario_directory':
                bases = scenario_bases
            elif variable:
                continue
            else:
                bases = [here, molecule, root] + scenario_bases
            if not any(os.path.exists(os.path.normpath(os.path.join(base, path))) for base in bases):
                bad.append('%s: %s' % (os.path.relpath(name, root), path))
    return bad


def test_molecule_scenarios_name_only_files_that_exist():
    assert len(scenario_dirs()) >= 5
    assert dangling() == []


def test_molecule_playbooks_of_each_scenario_exist():
    for directory in scenario_dirs():
        with open(os.path.join(directory, 'molecule.yml'), encoding='utf-8') as handle:
            config = yaml.safe_load(handle)
        for step, playbook in (config.get('ansible') or {}).get('playbooks', {}).items():
            assert os.path.exists(os.path.join(directory, playbook)), (directory, step, playbook)


def test_the_molecule_path_check_finds_what_it_should(tmp_path):
    molecule = tmp_path / 'extensions' / 'molecule'
    (molecule / '_shared').mkdir(parents=True)
    (molecule / '_shared' / 'target.sh').write_text(u'')
    (molecule / '_shared' / 'run.yml').write_text(u'# runs {{ molecule_scenario_directory }}/converge.yml\n'
                                                  u'- import_playbook: gone.yml\n')
    (molecule / 'one').mkdir()
    (molecule / 'one' / 'converge.yml').write_text(u'')
    (molecule / 'one' / 'molecule.yml').write_text(u'\n'.join([
        '# see driver-fixture-repo.sh and ../_shared/target.sh, tests/x.py',
        'create: ../_shared/create.yml',
        'script: "{{ playbook_dir }}/../_shared/target.sh"',
        'other: "{{ playbook_dir }}/missing.py"',
        'state: "{{ molecule_ephemeral_directory }}/inventory/hosts.yml"',
        'on_target: /etc/containerd/config.toml /etc/cdi/nvidia.yaml file:///srv/repo/key.yml', '']))
    (tmp_path / 'tests').mkdir()
    (tmp_path / 'tests' / 'x.py').write_text(u'')
    assert dangling(str(molecule), str(tmp_path)) == [
        'extensions/molecule/one/molecule.yml: driver-fixture-repo.sh',
        'extensions/molecule/one/molecule.yml: ../_shared/create.yml',
        'extensions/molecule/one/molecule.yml: missing.py',
        'extensions/molecule/_shared/run.yml: gone.yml',
    ]


@pytest.mark.parametrize('page', ['README.md', 'docs/architecture.md', 'docs/development.md', 'docs/test-run-history.md'])
def test_pages_name_files_that_exist(page):
    """Paths in backquotes that look like repository files (a folder and a known extension) exist."""
    with open(os.path.join(ROOT, page), encoding='utf-8') as handle:
        text = handle.read()
    # .cache/ is made by make setup; it is not in a fresh checkout
    named = [path for path in re.findall(r'`((?:[\w.-]+/)+[\w.-]+\.(?:py|yml|yaml|md|j2|txt|sh))`', text)
             if not path.startswith('.cache/')]
    assert named, page
    bases = (ROOT, os.path.join(ROOT, 'playbooks'), os.path.join(ROOT, 'plugins'))
    missing = [path for path in named if not any(os.path.exists(os.path.join(base, path)) for base in bases)]
    assert missing == []


def test_changelog_fragments_are_valid_for_antsibull_changelog():
    """A fragment that is not valid YAML, or has an unknown section, would stop the release's changelog."""
    command = os.path.join(os.path.dirname(sys.executable), 'antsibull-changelog')
    if not os.path.exists(command):
        pytest.skip('antsibull-changelog is not installed beside this Python (make setup installs it in .venv)')
    proc = subprocess.run([command, 'lint'], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          check=False)
    assert (proc.returncode, proc.stdout) == (0, '')


# Users never see the project's tracker: what they read (and what a newcomer reads in the tests) names the rule or the
# design choice itself, never a tracker number or a remark that the tracker said nothing on a point.
TRACKER_HISTORY = re.compile(r"issue [0-9]+|issues? (was|were|is) silent|\(issue", re.IGNORECASE)
READ_BY_PEOPLE = ("README.md", "docs", "changelogs", "plugins", "roles", "playbooks", "extensions", "meta", "benchmarks",
                  "tests")


def tracker_history(root):
    """(path, line number, line) of every line under root's READ_BY_PEOPLE that names the tracker."""
    found = []
    for top in READ_BY_PEOPLE:
        start = os.path.join(root, top)
        paths = [start] if os.path.isfile(start) else [
            os.path.join(d, f) for d, dirs, files in os.walk(start) for f in files
            if not any(part in ("output", "__pycache__", "recorded") for part in os.path.relpath(d, root).split(os.sep))]
        for path in paths:
            if path == os.path.abspath(__file__) or not path.endswith((".py", ".md", ".yml", ".yaml", ".j2", ".sh", ".txt")):
                continue
            with open(path, errors="replace") as f:
                for number, line in enumerate(f, 1):
                    if TRACKER_HISTORY.search(line):
                        found.append((os.path.relpath(path, root), number, line.strip()))
    return found


def test_nothing_a_person_reads_names_the_tracker():
    assert tracker_history(ROOT) == []


def test_the_tracker_check_finds_a_number(tmp_path):
    (tmp_path / "docs").mkdir()
    # written in pieces, so this file passes the same search run over the tree by hand
    (tmp_path / "docs" / "page.md").write_text("Fixed as " + "issue" + " 12 asked.\n")
    (tmp_path / "README.md").write_text("Choices made where the " + "issues" + " were silent\n")
    assert [(p, n) for p, n, _line in tracker_history(str(tmp_path))] == [("README.md", 1), ("docs/page.md", 1)]
