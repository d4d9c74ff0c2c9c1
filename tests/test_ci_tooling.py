# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tests of the CI helpers in scripts/: how `make test` counts, and the offline setup helpers."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import importlib.util
import json
import os
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load(name):
    spec = importlib.util.spec_from_file_location('ci_' + name, os.path.join(ROOT, 'scripts', name + '.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


run_tests = _load('run_tests')
run_molecule = _load('run_molecule')
unpack_collections = _load('unpack_collections')
get_pip_offline = _load('get_pip_offline')


def fake_make(reports, pytest_rc=None, make_rc=None, xml=None, roles=None):
    """Stand-in for `make <stage>` that leaves the files the real targets leave."""
    def call(args):
        stage = args[-1]
        if pytest_rc is not None:
            with open(os.path.join(reports, stage + '.rc'), 'w') as handle:
                handle.write('%d\n' % pytest_rc)
        if xml is not None:
            with open(os.path.join(reports, stage + '.xml'), 'w') as handle:
                handle.write(xml)
        if roles is not None:
            with open(os.path.join(reports, 'roles.json'), 'w') as handle:
                json.dump({'scenarios': roles}, handle)
        if make_rc is not None:
            return make_rc
        return 0 if not pytest_rc else 2
    return call


def junit(tests, failures=0, errors=0, skipped=0):
    return ('<testsuites><testsuite name="pytest" tests="%d" failures="%d" errors="%d" skipped="%d"/></testsuites>'
            % (tests, failures, errors, skipped))


def test_junit_counts_errors_as_failures_and_keeps_skips_apart(tmp_path):
    report = tmp_path / 'r.xml'
    report.write_text(junit(10, failures=2, errors=1, skipped=3))
    assert run_tests.junit_counts(str(report)) == (4, 3, 3)
    assert run_tests.junit_counts(str(tmp_path / 'missing.xml')) is None


def test_no_tests_collected_is_a_failure_not_a_pass(tmp_path, monkeypatch):
    monkeypatch.setattr(run_tests.subprocess, 'call', fake_make(str(tmp_path), pytest_rc=5))
    stage = run_tests.run_stage('units', str(tmp_path))
    assert (stage.ok, stage.passed, stage.failed) == (False, 0, 1)
    assert stage.note == 'no tests collected'


def test_failing_tests_are_counted_from_junit(tmp_path, monkeypatch):
    monkeypatch.setattr(run_tests.subprocess, 'call', fake_make(str(tmp_path), pytest_rc=1, xml=junit(7, failures=2)))
    stage = run_tests.run_stage('integration', str(tmp_path))
    assert (stage.ok, stage.passed, stage.failed, stage.note) == (False, 5, 2, 'tests failed')


def test_stale_reports_from_an_earlier_run_are_not_reused(tmp_path, monkeypatch):
    (tmp_path / 'units.xml').write_text(junit(50))
    (tmp_path / 'units.rc').write_text('0\n')
    # this run crashes before pytest writes anything: make answers 2
    monkeypatch.setattr(run_tests.subprocess, 'call', lambda args: 2)
    stage = run_tests.run_stage('units', str(tmp_path))
    assert (stage.ok, stage.passed, stage.failed) == (False, 0, 1)


def test_each_molecule_scenario_counts_once(tmp_path, monkeypatch):
    roles = [{'name': 'a', 'passed': True}, {'name': 'b', 'passed': False}, {'name': 'c', 'passed': True}]
    monkeypatch.setattr(run_tests.subprocess, 'call', fake_make(str(tmp_path), make_rc=2, roles=roles))
    stage = run_tests.run_stage('roles', str(tmp_path))
    assert (stage.ok, stage.passed, stage.failed) == (False, 2, 1)
    assert 'b FAILED' in stage.note


@pytest.mark.parametrize('make_rc, expected', [(0, (True, 1, 0)), (1, (False, 0, 1))])
def test_sanity_and_lint_count_one_each(tmp_path, monkeypatch, make_rc, expected):
    monkeypatch.setattr(run_tests.subprocess, 'call', fake_make(str(tmp_path), make_rc=make_rc))
    for name in ('sanity', 'lint'):
        stage = run_tests.run_stage(name, str(tmp_path))
        assert (stage.ok, stage.passed, stage.failed) == expected


def test_setup_counts_only_when_it_breaks(tmp_path, monkeypatch):
    monkeypatch.setattr(run_tests.subprocess, 'call', fake_make(str(tmp_path), make_rc=0))
    assert run_tests.run_stage('setup', str(tmp_path)).failed == 0
    monkeypatch.setattr(run_tests.subprocess, 'call', fake_make(str(tmp_path), make_rc=2))
    assert run_tests.run_stage('setup', str(tmp_path)).failed == 1


def test_summary_ends_with_the_count_line(tmp_path, monkeypatch):
    monkeypatch.setattr(run_tests.subprocess, 'call', fake_make(str(tmp_path), pytest_rc=0, xml=junit(3, skipped=1)))
    good = run_tests.run_stage('units', str(tmp_path))
    monkeypatch.setattr(run_tests.subprocess, 'call', fake_make(str(tmp_path), make_rc=1))
    bad = run_tests.run_stage('lint', str(tmp_path))
    lines, ok = run_tests.summary([good, bad])
    assert lines[-1] == '2 passed, 1 failed, 1 skipped'
    assert ok is False
    lines, ok = run_tests.summary([good])
    assert lines[-1] == '2 passed, 0 failed, 1 skipped'
    assert ok is True


def test_unpack_takes_only_the_named_collections(tmp_path):
    wheel = tmp_path / 'ansible.whl'
    with zipfile.ZipFile(str(wheel), 'w') as archive:
        archive.writestr('ansible_collections/kubernetes/core/MANIFEST.json', '{}')
        archive.writestr('ansible_collections/kubernetes/core/plugins/modules/k8s.py', '')
        archive.writestr('ansible_collections/kubernetes/corex/other.py', '')
        archive.writestr('ansible_collections/community/general/MANIFEST.json', '{}')
        archive.writestr('ansible-12.3.0.dist-info/METADATA', '')
    dest = tmp_path / 'out'
    stale = dest / 'ansible_collections' / 'kubernetes' / 'core' / 'stale.py'
    stale.parent.mkdir(parents=True)
    stale.write_text(u'')
    unpack_collections.unpack(str(wheel), str(dest), ['kubernetes.core'])
    found = sorted(str(p.relative_to(dest)) for p in dest.rglob('*') if p.is_file())
    assert found == ['ansible_collections/kubernetes/core/MANIFEST.json',
                     'ansible_collections/kubernetes/core/plugins/modules/k8s.py']
    with pytest.raises(SystemExit, match='no collection named ansible.posix'):
        unpack_collections.unpack(str(wheel), str(dest), ['ansible.posix'])


def test_offline_get_pip_bootstraps_with_ensurepip_then_installs(monkeypatch):
    calls = []
    monkeypatch.setattr(get_pip_offline.subprocess, 'check_call', calls.append)
    monkeypatch.setattr(get_pip_offline.sys, 'argv',
                        ['get_pip', '--disable-pip-version-check', 'pip==24.2', '--no-setuptools', '--no-wheel'])
    get_pip_offline.main()
    executable = get_pip_offline.sys.executable
    assert calls == [
        [executable, '-m', 'ensurepip', '--default-pip'],
        [executable, '-m', 'pip', 'install', '--disable-pip-version-check', 'pip==24.2'],
    ]


def test_molecule_scenarios_found_at_root_and_in_roles(tmp_path):
    for path in ('extensions/molecule/_shared/create.yml', 'extensions/molecule/runtime/molecule.yml',
                 'molecule/old/molecule.yml',
                 'roles/driver/molecule/default/molecule.yml', 'roles/driver/tasks/main.yml'):
        target = tmp_path / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(u'---\n')
    found = run_molecule.find_scenarios(str(tmp_path))
    assert found == [('runtime', str(tmp_path), 'runtime'),
                     ('driver/default', str(tmp_path / 'roles' / 'driver'), 'default')]


def test_molecule_layout_is_the_collection_one_with_a_default_that_imports_every_scenario():
    # molecule in a collection reads extensions/molecule/ and its `default` scenario on every run;
    # with scenarios left in molecule/ it warns "should migrate", without `default` it logs CRITICAL.
    assert not os.path.exists(os.path.join(ROOT, 'molecule'))
    base = os.path.join(ROOT, 'extensions', 'molecule')
    names = sorted(name for label, workdir, name in run_molecule.find_scenarios(ROOT) if workdir == ROOT)
    assert 'default' in names
    with open(os.path.join(base, 'default', 'converge.yml')) as handle:
        imported = handle.read()
    for name in names:
        if name == 'default':
            continue
        for playbook in ('prepare', 'converge', 'verify'):
            if os.path.exists(os.path.join(base, name, playbook + '.yml')):
                assert 'import_playbook: ../%s/%s.yml\n' % (name, playbook) in imported, (name, playbook)
