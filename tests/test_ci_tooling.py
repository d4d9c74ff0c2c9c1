# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tests of the CI helpers in scripts/: how `make test` counts, and the offline setup helpers."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import importlib.util
import io
import json
import os
import re
import subprocess
import sys
import time
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
    """Stand-in for stage_command: leaves the files the real `make <stage>` leaves, and returns a command
    that exits as make would."""
    def command(stage):
        if pytest_rc is not None:
            with open(os.path.join(reports, stage + '.rc'), 'w') as handle:
                handle.write('%d\n' % pytest_rc)
        if xml is not None:
            with open(os.path.join(reports, stage + '.xml'), 'w') as handle:
                handle.write(xml)
        if roles is not None:
            with open(os.path.join(reports, 'roles.json'), 'w') as handle:
                json.dump({'scenarios': roles}, handle)
        rc = make_rc if make_rc is not None else (0 if not pytest_rc else 2)
        return [sys.executable, '-c', 'import sys; sys.exit(%d)' % rc]
    return command


def run_stage(name, reports, monkeypatch, command):
    """One stage through the runner, with `command` standing in for `make <stage>`."""
    monkeypatch.setattr(run_tests, 'stage_command', command)
    stages = run_tests.run_stages([name], reports, out=io.BytesIO(), interval=0.01)
    assert [s.name for s in stages] == [name]
    return stages[0]


def junit(tests, failures=0, errors=0, skipped=0):
    return ('<testsuites><testsuite name="pytest" tests="%d" failures="%d" errors="%d" skipped="%d"/></testsuites>'
            % (tests, failures, errors, skipped))


def test_junit_counts_errors_as_failures_and_keeps_skips_apart(tmp_path):
    report = tmp_path / 'r.xml'
    report.write_text(junit(10, failures=2, errors=1, skipped=3))
    assert run_tests.junit_counts(str(report)) == (4, 3, 3)
    assert run_tests.junit_counts(str(tmp_path / 'missing.xml')) is None


def test_no_tests_collected_is_a_failure_not_a_pass(tmp_path, monkeypatch):
    stage = run_stage('units', str(tmp_path), monkeypatch, fake_make(str(tmp_path), pytest_rc=5))
    assert (stage.ok, stage.passed, stage.failed) == (False, 0, 1)
    assert stage.note == 'no tests collected'


def test_failing_tests_are_counted_from_junit(tmp_path, monkeypatch):
    stage = run_stage('integration', str(tmp_path), monkeypatch,
                      fake_make(str(tmp_path), pytest_rc=1, xml=junit(7, failures=2)))
    assert (stage.ok, stage.passed, stage.failed, stage.note) == (False, 5, 2, 'tests failed')


def test_stale_reports_from_an_earlier_run_are_not_reused(tmp_path, monkeypatch):
    (tmp_path / 'units.xml').write_text(junit(50))
    (tmp_path / 'units.rc').write_text('0\n')
    # this run crashes before pytest writes anything: make answers 2
    stage = run_stage('units', str(tmp_path), monkeypatch, fake_make(str(tmp_path), make_rc=2))
    assert (stage.ok, stage.passed, stage.failed) == (False, 0, 1)


def test_each_molecule_scenario_counts_once(tmp_path, monkeypatch):
    roles = [{'name': 'a', 'passed': True}, {'name': 'b', 'passed': False}, {'name': 'c', 'passed': True}]
    stage = run_stage('roles', str(tmp_path), monkeypatch, fake_make(str(tmp_path), make_rc=2, roles=roles))
    assert (stage.ok, stage.passed, stage.failed) == (False, 2, 1)
    assert 'b FAILED' in stage.note


@pytest.mark.parametrize('make_rc, expected', [(0, (True, 1, 0)), (1, (False, 0, 1))])
def test_sanity_and_lint_count_one_each(tmp_path, monkeypatch, make_rc, expected):
    for name in ('sanity', 'lint'):
        stage = run_stage(name, str(tmp_path), monkeypatch, fake_make(str(tmp_path), make_rc=make_rc))
        assert (stage.ok, stage.passed, stage.failed) == expected


def test_setup_counts_only_when_it_breaks(tmp_path, monkeypatch):
    assert run_stage('setup', str(tmp_path), monkeypatch, fake_make(str(tmp_path), make_rc=0)).failed == 0
    assert run_stage('setup', str(tmp_path), monkeypatch, fake_make(str(tmp_path), make_rc=2)).failed == 1


def test_summary_ends_with_the_count_line(tmp_path, monkeypatch):
    good = run_stage('units', str(tmp_path), monkeypatch, fake_make(str(tmp_path), pytest_rc=0, xml=junit(3, skipped=1)))
    bad = run_stage('lint', str(tmp_path), monkeypatch, fake_make(str(tmp_path), make_rc=1))
    lines, ok = run_tests.summary([good, bad])
    assert lines[-1] == '2 passed, 1 failed, 1 skipped'
    assert ok is False
    lines, ok = run_tests.summary([good])
    assert lines[-1] == '2 passed, 0 failed, 1 skipped'
    assert ok is True


# A stand-in stage: prints `lines` lines with `pause` seconds before each, then exits with `rc`.
STAGE_SCRIPT = """
import sys, time
for i in range(%(lines)d):
    time.sleep(%(pause)s)
    print('%(name)s line %%d of %%d, terminal %%s' %% (i + 1, %(lines)d, sys.stdout.isatty()), flush=True)
sys.exit(%(rc)d)
"""


def scripted(**pauses):
    """stage_command for stages that print 3 lines, each after pauses[name] seconds."""
    def command(name):
        script = STAGE_SCRIPT % {'name': name, 'lines': 3, 'pause': pauses.get(name, 0), 'rc': 0}
        return [sys.executable, '-c', script]
    return command


def test_roles_run_beside_the_other_stages_and_each_log_prints_whole_in_stage_order(tmp_path, monkeypatch):
    # roles is the slowest stage and mostly waits: it starts right after setup, beside sanity and units
    monkeypatch.setattr(run_tests, 'stage_command', scripted(setup=0, sanity=0.3, units=0.3, roles=0.6))
    out = io.BytesIO()
    started = time.time()
    stages = run_tests.run_stages(['setup', 'sanity', 'units', 'roles'], str(tmp_path), out=out, interval=0.02)
    wall = time.time() - started
    assert [s.name for s in stages] == ['setup', 'sanity', 'units', 'roles']
    seconds = dict((s.name, s.seconds) for s in stages)
    assert seconds['roles'] >= 1.8 and seconds['sanity'] + seconds['units'] >= 1.8
    # one after another this takes 3.6 s and more; side by side about as long as roles alone
    assert wall < seconds['roles'] + seconds['sanity'] + seconds['units'] - 1.0, (wall, seconds)
    # the output reads as if the stages had run one after another: each log whole, in STAGES order
    expected = ''.join('\n##### make %s\n' % name + ''.join(
        '%s line %d of 3, terminal False\n' % (name, i) for i in (1, 2, 3)) for name in ('setup', 'sanity', 'units', 'roles'))
    assert out.getvalue().decode() == expected
    # and each stage's log stays apart in the reports
    assert (tmp_path / 'roles.log').read_text().splitlines()[-1] == 'roles line 3 of 3, terminal False'
    lines, ok = run_tests.summary(stages, wall=wall)
    assert ok and lines[-1] == '1 passed, 0 failed'  # sanity
    # the total row is the run's own time, not the sum of overlapping stages
    assert lines[-2].split()[:6] == ['total', 'ok', '1', '0', '0', '%.1f' % wall]


def test_serial_runs_one_stage_at_a_time(tmp_path, monkeypatch):
    monkeypatch.setattr(run_tests, 'stage_command', scripted(sanity=0.2, roles=0.2))
    started = time.time()
    stages = run_tests.run_stages(['sanity', 'roles'], str(tmp_path), serial=True, out=io.BytesIO(), interval=0.02)
    assert time.time() - started >= sum(s.seconds for s in stages) >= 1.2
    assert run_tests.plan(['setup', 'lint', 'roles', 'units'], serial=True) == [['units', 'lint', 'roles']]
    assert run_tests.plan(['setup', 'lint', 'roles', 'units']) == [['roles'], ['units', 'lint']]


def test_stages_see_a_terminal_only_when_make_test_writes_to_one(tmp_path, monkeypatch):
    # colour only on a terminal: on one, each stage gets a pseudo-terminal of its own (tools colour as
    # when run by hand); otherwise a plain file, and the Makefile turns colour off in every tool
    monkeypatch.setattr(run_tests, 'stage_command', scripted())
    for terminal in (True, False):
        out = io.BytesIO()
        run_tests.run_stages(['lint'], str(tmp_path), out=out, terminal=terminal, interval=0.02)
        text = out.getvalue().decode().replace('\r\n', '\n')
        assert text.endswith('lint line 3 of 3, terminal %s\n' % terminal), text


def test_cpu_seconds_are_those_of_the_stage_processes(tmp_path, monkeypatch):
    busy = 'import time\nend = time.process_time() + 0.5\nwhile time.process_time() < end: pass\n'
    monkeypatch.setattr(run_tests, 'stage_command', lambda name: [sys.executable, '-c', busy])
    stage = run_tests.run_stages(['lint'], str(tmp_path), out=io.BytesIO(), interval=0.02)[0]
    assert 0.5 <= stage.cpu < 0.5 + 2.0 and stage.ok


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


# ------------------------------------------------------------------ first impressions

def _markdown_files():
    """Every Markdown file of the repository (tracked or new), not the tool caches."""
    out = subprocess.check_output(['git', 'ls-files', '-z', '--cached', '--others', '--exclude-standard', '*.md'],
                                  cwd=ROOT)
    return sorted(p for p in set(out.decode('utf-8').split('\0')) if p and os.path.exists(os.path.join(ROOT, p)))


def _slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r'[`*_]', '', heading.strip().lower())
    return re.sub(r'[^\w\- ]', '', text).replace(' ', '-')


def _anchors(path):
    with open(path) as handle:
        text = re.sub(r'^```.*?^```', '', handle.read(), flags=re.M | re.S)
    return set(_slug(h) for h in re.findall(r'^#{1,6}\s+(.*?)\s*#*\s*$', text, re.M))


LINK = re.compile(r'(?<!!)\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)|!\[[^\]]*\]\(\s*([^)\s]+)\s*\)')
# A document named by a relative (./, ../) or absolute path in running text or a code span, outside a
# link: it must be in the repository too. (`docs/customizing.md` after a link to another project names
# that project's file, so bare names are not checked.)
MARKDOWN_NAME = re.compile(r'(?<![\w/.~-])((?:\.{1,2}|~)?/(?:[\w.-]+/)*[\w.-]+\.md)\b')


def _dangling(md):
    base = os.path.dirname(os.path.join(ROOT, md))
    with open(os.path.join(ROOT, md)) as handle:
        text = handle.read()
    bad = []
    for match in LINK.finditer(text):
        target = match.group(1) or match.group(2)
        if re.match(r'^[a-z][a-z0-9+.-]*:', target):
            if not target.startswith(('https://', 'http://', 'mailto:')):
                bad.append('%s: %s is not a public URL' % (md, target))
            elif re.match(r'^https?://(localhost|127\.|10\.|192\.168\.|[^/]*\.(local|internal))', target):
                bad.append('%s: %s is not a public URL' % (md, target))
            continue
        path, _sep, anchor = target.partition('#')
        resolved = os.path.normpath(os.path.join(base, path)) if path else os.path.join(ROOT, md)
        if not (resolved + os.sep).startswith(ROOT + os.sep) and resolved != ROOT:
            bad.append('%s: %s leaves the repository' % (md, target))
        elif not os.path.exists(resolved):
            bad.append('%s: %s does not exist' % (md, target))
        elif anchor and resolved.endswith('.md') and anchor not in _anchors(resolved):
            bad.append('%s: %s has no heading #%s' % (md, target, anchor))
    for match in MARKDOWN_NAME.finditer(LINK.sub('', text)):
        name = match.group(1)
        resolved = os.path.normpath(os.path.join(base, name))
        if not (resolved + os.sep).startswith(ROOT + os.sep) or not os.path.exists(resolved):
            bad.append('%s: names %s, which is not in the repository' % (md, name))
    return bad


def test_every_markdown_link_resolves_inside_the_repository_or_is_a_public_url():
    files = _markdown_files()
    assert 'README.md' in files and len(files) > 5
    bad = [problem for md in files for problem in _dangling(md)]
    assert bad == []


def test_the_link_check_finds_what_it_should(tmp_path, monkeypatch):
    # the checker itself: a dangling link, an escaping link, a missing anchor, a private URL, a named document
    monkeypatch.setattr(sys.modules[__name__], 'ROOT', str(tmp_path))
    (tmp_path / 'docs').mkdir()
    (tmp_path / 'docs' / 'ok.md').write_text(u'# Title\n## A `code` section\n')
    (tmp_path / 'README.md').write_text(u'\n'.join([
        '[fine](docs/ok.md#a-code-section) [self](#top) [web](https://example.org/x)',
        '[gone](docs/missing.md) [out](../outside.md) [anchor](docs/ok.md#nope) [lan](http://localhost:8080/)',
        'see `../shared/docs/facts.md`, /srv/notes.md, `./docs/ok.md` and other/project/docs/x.md', '# Top', '']))
    assert _dangling('README.md') == [
        'README.md: docs/missing.md does not exist',
        'README.md: ../outside.md leaves the repository',
        'README.md: docs/ok.md#nope has no heading #nope',
        'README.md: http://localhost:8080/ is not a public URL',
        'README.md: names ../shared/docs/facts.md, which is not in the repository',
        'README.md: names /srv/notes.md, which is not in the repository',
    ]


def _make(*args, **kwargs):
    env = dict(os.environ, TERM='xterm-256color')
    for key in ('CI', 'NO_COLOR', 'PY_COLORS', 'ANSIBLE_NOCOLOR', 'ANSIBLE_FORCE_COLOR', 'FORCE_COLOR', 'MAKEFLAGS',
                'MAKELEVEL'):
        env.pop(key, None)
    env.update(kwargs.pop('env', {}))
    return subprocess.run(['make', '--no-print-directory', '-C', ROOT] + list(args), env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False, **kwargs)


def test_make_help_and_the_development_docs_name_the_same_targets():
    proc = _make('help')
    assert proc.returncode == 0, proc.stdout
    helped = set(re.findall(r'^make ([a-z][a-z0-9.-]*)', proc.stdout, re.M))
    with open(os.path.join(ROOT, 'Makefile')) as handle:
        makefile = handle.read()
    phony = set(re.search(r'^\.PHONY:(.*)$', makefile, re.M).group(1).split())
    assert helped == phony, 'make help and .PHONY differ: %s' % sorted(helped ^ phony)
    with open(os.path.join(ROOT, 'docs', 'development.md')) as handle:
        development = handle.read()
    named = set(re.findall(r'\bmake ([a-z][a-z0-9.-]*[a-z0-9])', development))
    assert named - helped == set(), 'docs/development.md names targets make help does not list'
    assert helped - named == set(), 'make help lists targets docs/development.md does not name'
    with open(os.path.join(ROOT, 'README.md')) as handle:
        readme = handle.read()
    assert set(re.findall(r'\bmake ([a-z][a-z0-9.-]*[a-z0-9])', readme)) - helped == set(), \
        'the README names targets make help does not list'
    # the first screen's description of `make test` names every stage make test runs
    first_screen = readme.split('\n## ', 1)[0]
    test_line = re.search(r'^make test .*$', first_screen, re.M).group(0)
    for stage in run_tests.STAGES:
        if stage != 'setup':
            assert stage in test_line, (stage, test_line)


def test_roles_stage_log_has_no_colour_codes_when_not_on_a_terminal(tmp_path):
    # TERM names an xterm, as in a developer's shell; stdout is a pipe, as in `make test > log`
    # its own molecule state: make test runs the roles stage (the same scenario) beside the units stage
    proc = _make('roles', 'SCENARIOS=default', 'REPORTS=%s' % tmp_path,
                 env={'MOLECULE_EPHEMERAL_DIRECTORY': str(tmp_path / 'molecule-default')})
    assert proc.returncode == 0, proc.stdout[-3000:]
    with open(str(tmp_path / 'roles.json')) as handle:
        assert [s['name'] for s in json.load(handle)['scenarios'] if s['passed']] == ['default']
    assert 'default > syntax' in proc.stdout and 'Executed: Successful' in proc.stdout
    assert '\x1b[' not in proc.stdout, [line for line in proc.stdout.splitlines() if '\x1b[' in line][:5]


def test_summary_columns_are_as_wide_as_their_content(tmp_path, monkeypatch):
    stages = []
    for name in ('units', 'integration', 'min-versions'):
        stages.append(run_stage(name, str(tmp_path), monkeypatch, fake_make(str(tmp_path), pytest_rc=0, xml=junit(1234))))
    lines, _ok = run_tests.summary(stages)
    table = lines[2:-1]
    assert [line.split()[0] for line in table] == ['stage', 'units', 'integration', 'min-versions', 'total']
    # text columns start, number columns end, where their heading does, on every row
    header = table[0]
    for line in table[1:]:
        cells = line.split()
        result_at = header.index('result')
        assert line[result_at:].split()[0] == cells[1] and line[result_at - 1] == ' ', line
        for column, value in zip(('passed', 'failed', 'skipped', 'seconds', 'cpu'), cells[2:7]):
            end = header.index(column) + len(column)
            assert line[end - len(value):end] == value and line[end - len(value) - 1] == ' ', (column, line)


def test_min_versions_pins_the_declared_floors_exactly(tmp_path):
    min_versions = _load('min_versions')
    ee = tmp_path / 'ee.txt'
    ee.write_text(u'# libraries\nkubernetes>=30.1.0\nurllib3>=2.0.2\njsonpatch>=1.32\nPyYAML>=5.4\n')
    dev = tmp_path / 'dev.txt'
    dev.write_text(u'ansible-core==2.19.14\nkubernetes==37.0.2\njsonpatch==1.33\nPyYAML==6.0.3\n'
                   u'pytest==9.0.3\nansible-lint==26.10.1\nmolecule==26.10.0\n')
    lines, floors = min_versions.requirement_lines(str(ee), str(dev))
    assert lines == ['kubernetes==30.1.0', 'urllib3==2.0.2', 'jsonpatch==1.32',
                     'ansible-core==2.19.14', 'PyYAML==6.0.3', 'pytest==9.0.3']
    ee.write_text(u'jsonpatch>=1.32\n')
    with pytest.raises(SystemExit, match='declares no floor for kubernetes'):
        min_versions.requirement_lines(str(ee), str(dev))
    ee.write_text(u'kubernetes\njsonpatch>=1.32\n')
    with pytest.raises(SystemExit, match="'kubernetes' is not of the form name>=version"):
        min_versions.requirement_lines(str(ee), str(dev))


def test_min_versions_installs_the_lowest_ansible_core_runtime_yml_declares(tmp_path):
    min_versions = _load('min_versions')
    runtime = tmp_path / 'runtime.yml'
    runtime.write_text(u"---\nrequires_ansible: '>=2.17.0'\naction_groups: {}\n")
    assert min_versions.ansible_core_floor(str(runtime)) == '2.17.0'
    assert min_versions.ansible_core_floor(os.path.join(ROOT, 'meta', 'runtime.yml')) == '2.17.0'
    assert min_versions.with_ansible_core(['kubernetes==24.2.0', 'ansible-core==2.19.14', 'pytest==9.0.3'],
                                          '2.17.0') == ['kubernetes==24.2.0', 'ansible-core==2.17.0', 'pytest==9.0.3']
    runtime.write_text(u"---\nrequires_ansible: '>=2.17'\n")
    with pytest.raises(SystemExit, match='declares no requires_ansible floor'):
        min_versions.ansible_core_floor(str(runtime))


def test_core_218_is_a_counted_pytest_stage_running_the_inventory_suite_and_every_module_on_ansible_core_2_18():
    assert 'core-2.18' in run_tests.PYTEST_STAGES and 'core-2.18' in run_tests.STAGES
    proc = _make('-n', 'core-2.18')
    assert '--ansible-core 2.18.19 --libraries pinned' in proc.stdout, proc.stdout
    assert 'cluster_stage.sh core-2.18 ' in proc.stdout and '.cache/core-2.18/venv/bin/python -p no:cacheprovider' in proc.stdout
    command = proc.stdout.splitlines()[-1]
    assert "-m 'floor or not integration' " in command, command
    paths = re.findall(r'(tests/\S+)', command)
    # the same module suites as min-versions, so every module runs on 2.18 against the real control plane
    floor_suites = [p for p in re.findall(r'(tests/\S+)', _make('-n', 'min-versions').stdout.splitlines()[-1])
                    if p.startswith('tests/integration/')]
    assert floor_suites and set(floor_suites) <= set(paths), (floor_suites, paths)
    # and not the modules' unit tests, which run in-process on 2.17 and 2.19
    assert 'tests/unit/plugins' not in paths and 'tests/unit/plugins/modules' not in paths, paths


def test_min_versions_is_a_counted_pytest_stage_of_make_test():
    assert 'min-versions' in run_tests.PYTEST_STAGES
    assert run_tests.STAGES.index('min-versions') < run_tests.STAGES.index('roles')
    proc = _make('-n', 'min-versions')
    assert proc.returncode == 0, proc.stdout
    assert 'min_versions.py' in proc.stdout and 'cluster_stage.sh min-versions ' in proc.stdout
    assert '.cache/min-versions/venv/bin/python -p no:cacheprovider' in proc.stdout
    for suite in ('tests/unit/plugins ', 'test_k8s_node_extended_resource.py', 'test_device_plugin_deploy.py',
                  'test_info_and_smoke_test.py', 'test_dra.py', 'test_dra_driver_deploy.py'):
        assert suite in proc.stdout


def test_pytest_stages_group_slow_fixtures():
    # --dist loadgroup: each file whose module-scoped fixture is a long ansible-playbook run goes to one worker
    units = _make('-n', 'units')
    assert units.returncode == 0 and '--dist loadgroup' in units.stdout, units.stdout
    for path in ('tests/unit/roles/test_nvidia_driver.py', 'tests/unit/roles/test_runtime_config_tasks.py'):
        with open(os.path.join(ROOT, path)) as handle:
            assert re.search(r"^pytestmark = \[pytest\.mark\.xdist_group\('[a-z_]+'\), ", handle.read(), re.M), path


def _collect(*args, env=None):
    """pytest --collect-only -q with .venv's Python: (node IDs collected, the number deselected)."""
    proc = subprocess.run(
        [os.path.join(ROOT, '.venv', 'bin', 'python'), '-m', 'pytest', '-p', 'no:cacheprovider', '--collect-only', '-q']
        + list(args), cwd=ROOT, capture_output=True, text=True, check=False, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    deselected = re.search(r'\((\d+) deselected\)', proc.stdout)
    return [line for line in proc.stdout.splitlines() if '::' in line], int(deselected.group(1)) if deselected else 0


def test_min_versions_runs_the_unit_tests_and_the_floor_tests_of_its_integration_suites():
    proc = _make('-n', 'min-versions')
    assert proc.returncode == 0, proc.stdout
    command = proc.stdout.splitlines()[-1]
    assert "-m 'floor or not integration' " in command, command
    paths = re.findall(r'(tests/\S+)', command)
    selected, deselected = _collect('-m', 'floor or not integration', *paths)
    by_file = dict((path, [t for t in selected if t.startswith(path + '::')]) for path in paths if path.endswith('.py'))
    # the unit tests of the plugins, every test of the inventory suite, and some of each module suite
    assert any(t.startswith('tests/unit/plugins/') for t in selected)
    assert len(by_file['tests/integration/test_inventory.py']) >= 10, by_file
    assert all(by_file.values()), by_file
    # and not the rest of the module suites (which make integration runs): only integration tests can be deselected
    assert deselected > 0, selected
    # a floor marker in an integration file min-versions does not collect would run nowhere but make integration
    integration = os.path.join(ROOT, 'tests', 'integration')
    for name in os.listdir(integration):
        with open(os.path.join(integration, name)) as handle:
            if name.endswith('.py') and 'pytest.mark.floor' in handle.read():
                assert 'tests/integration/' + name in paths, name


def test_module_suites_run_as_the_least_privilege_identity_in_make_integration():
    # No separate least-privilege stage: in `make integration` (and min-versions) every test of the module
    # suites carries the marker that makes its modules run as the identity of rbac.yaml.j2, and no other test does.
    assert 'least-privilege' not in run_tests.STAGES
    collected, _deselected = _collect('-m', 'least_privilege_identity', 'tests/integration', 'tests/unit/plugins/modules',
                                      env=dict(os.environ, KUBEHW_IDENTITY=''))
    files = set(line.split('::')[0] for line in collected)
    spec = importlib.util.spec_from_file_location('integration_conftest', os.path.join(ROOT, 'tests/integration/conftest.py'))
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)
    listed = set('tests/integration/' + name for name in conftest.LEAST_PRIVILEGE_SUITES)
    assert listed <= files, (listed, files)
    # any other file marked is one that marks itself (pytestmark); no unit test is marked
    for path in files - listed:
        with open(os.path.join(ROOT, path)) as handle:
            assert 'pytest.mark.least_privilege_identity' in handle.read(), path
    # among them every module suite the Makefile names (those min-versions runs again)
    with open(os.path.join(ROOT, 'Makefile')) as handle:
        suites = re.search(r'^MODULE_SUITES := (.*?[^\\])$', handle.read(), re.M | re.S).group(1)
    module_suites = set(re.findall(r'tests/integration/test_\w+\.py', suites))
    assert len(module_suites) == 5 and module_suites <= files, (module_suites, files)
    make = _make('-n', 'integration')
    assert make.returncode == 0 and 'KUBEHW_IDENTITY' not in make.stdout, make.stdout


def _demo_results(changed):
    """Results of site.yml as the kubehw_results callback writes them: a first run (changed) or a re-run."""
    gpu = {'nvidia.com/gpu': '4'}
    return [
        {'_host': 'gpu-1', '_outcome': 'ok', 'task': 'Roll out the device plugin and wait for its resource',
         'changed': changed, 'daemonset': {'metadata': {'namespace': 'kubehw-device-plugins', 'name': 'nvidia'}},
         'generation': {'before': None if changed else 1, 'after': 1},
         'nodes': {'gpu-1': {'pod': 'nvidia-a', 'pod_ready': True, 'allocatable': {'nvidia.com/gpu': None}},
                   'gpu-2': {'pod': 'nvidia-b', 'pod_ready': True, 'allocatable': {'nvidia.com/gpu': 8}}}},
        {'_host': 'gpu-1', '_outcome': 'ok', 'task': 'Wait until the resource is allocatable on every node of the play',
         'changed': False, 'nodes': [{'name': 'gpu-1', 'ready': 'True', 'allocatable': dict(gpu, cpu='8')}]},
        {'_host': 'gpu-1', '_outcome': 'skipped', 'task': 'Install the NVIDIA driver'},
        {'_host': 'dongle-1', '_outcome': 'ok', 'task': 'Advertise the extended resources of each group of nodes',
         'changed': changed, 'results': [{
             'changed': changed, 'changed_nodes': ['dongle-1'] if changed else [], 'failed_nodes': [],
             'invocation': {'module_args': {'resources': {'example.com/dongle': 2}}},
             'nodes': [{'name': 'dongle-1', 'changed': changed, 'capacity': {'cpu': '4', 'example.com/dongle': '2'},
                        'patch': [{'op': 'test', 'path': '/status/capacity', 'value': {}},
                                  {'op': 'add', 'path': '/status/capacity/example.com~1dongle', 'value': '2'}]
                        if changed else []}]}]},
    ]


def test_demo_says_per_node_what_the_run_did():
    demo = _load('demo')
    hosts = ['gpu-1', 'gpu-2', 'dongle-1', 'spare-1']
    lines, once = demo.node_report(_demo_results(True), hosts)
    assert lines == [
        'gpu-1     device plugin kubehw-device-plugins/nvidia rolled out (DaemonSet created); its pod nvidia-a is '
        'ready here; nvidia.com/gpu=4 allocatable',
        'gpu-2     device plugin kubehw-device-plugins/nvidia rolled out (DaemonSet created); its pod nvidia-b is '
        'ready here; nvidia.com/gpu=8 allocatable',
        'dongle-1  advertised example.com/dongle=2 (node status patched)',
        'spare-1   no change: no task acted on this node',
    ]
    # the rollout ran once, for gpu-1, and served gpu-2 too: the recap's changed=0 for gpu-2 needs that note
    assert once == ['gpu-1']
    lines, once = demo.node_report(_demo_results(False), hosts)
    assert lines[0].endswith('device plugin kubehw-device-plugins/nvidia already as wanted: nothing to do; its pod '
                             'nvidia-a is ready here; nvidia.com/gpu=4 allocatable')
    assert lines[2] == 'dongle-1  nothing to do: the node already advertised example.com/dongle=2'
    assert once == []


FAKE_MOLECULE = """#!/bin/sh
# molecule test -s NAME: two lines half a second apart; scenario "b" fails
echo "$3 begins"; sleep 0.5; echo "$3 ends"
[ "$3" != b ]
"""


def test_roles_run_scenarios_side_by_side_and_print_each_log_whole_in_order(tmp_path, monkeypatch, capsys):
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    (bin_dir / 'molecule').write_text(FAKE_MOLECULE)
    (bin_dir / 'molecule').chmod(0o755)
    monkeypatch.setenv('PATH', '%s%s%s' % (bin_dir, os.pathsep, os.environ['PATH']))
    scenarios = [(name, str(tmp_path), name) for name in ('a', 'b', 'c', 'd')]
    started = time.time()
    results = run_molecule.run_side_by_side(scenarios, 2, str(tmp_path / 'logs'), interval=0.05)
    wall = time.time() - started
    assert [(r['name'], r['passed']) for r in results] == [('a', True), ('b', False), ('c', True), ('d', True)]
    # four half-second scenarios, two at a time: about 1 s, where one at a time takes 2 s and more
    assert wall < sum(r['seconds'] for r in results) - 0.6, (wall, results)
    out = re.sub(r' in [0-9.]+ s$', ' in N s', capsys.readouterr().out, flags=re.M)
    where = os.path.relpath(str(tmp_path), run_molecule.ROOT)
    assert out.splitlines() == [line for name in 'abcd' for line in (
        '=== molecule test -s %s (in %s)' % (name, where), '%s begins' % name, '%s ends' % name,
        '=== %s: %s in N s' % (name, 'FAILED (rc=1)' if name == 'b' else 'passed'))]
    assert (tmp_path / 'logs' / 'c.log').read_text() == 'c begins\nc ends\n'


def test_run_molecule_refuses_a_scenario_name_it_does_not_have(capsys, monkeypatch):
    monkeypatch.setattr(run_molecule.sys, 'argv', ['run_molecule', 'defualt'])
    monkeypatch.setattr(run_molecule.subprocess, 'call', lambda *a, **k: pytest.fail('ran molecule'))
    assert run_molecule.main() == 2
    assert "no scenario named defualt; there are: " in capsys.readouterr().err


def test_a_cluster_stage_without_a_control_plane_says_so_and_fails_only_where_every_stage_must_run(tmp_path):
    """No control plane folder and no KUBECONFIG: `make integration` prints that it did not run and why and exits 0.
    On a developer's machine the summary shows the stage as not run, neither passed nor failed, and the last line
    starts with "incomplete:"; under CI=true (or KUBEHW_REQUIRE_ALL_STAGES=1) the stage fails with that reason, so
    a CI machine that cannot get the Kubernetes binaries fails its run."""
    env = dict((k, v) for k, v in os.environ.items() if k != 'KUBECONFIG')
    env['KUBEHW_K8S_ASSETS'] = str(tmp_path / 'no-binaries-here')
    proc = subprocess.run(['bash', os.path.join(ROOT, 'scripts', 'cluster_stage.sh'), 'integration', str(tmp_path),
                           sys.executable, '--junitxml=%s' % (tmp_path / 'integration.xml'), 'tests/integration'],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert 'integration: did not run: ' in proc.stdout and 'KUBECONFIG unset' in proc.stdout, proc.stdout
    assert not (tmp_path / 'integration.xml').exists()
    reason = 'no Kubernetes binaries (%s) and KUBECONFIG unset' % env['KUBEHW_K8S_ASSETS']
    units = run_tests.Stage('units')
    units.ok, units.passed = True, 12

    stage = run_tests.evaluate('integration', 0, str(tmp_path), 0.1, required=False)
    assert stage.ok and (stage.passed, stage.failed, stage.skipped) == (0, 0, 0)
    assert stage.note == 'not run: ' + reason
    lines, ok = run_tests.summary([units, stage])
    assert ok and lines[-2:] == ['not run here: integration (see the table); CI runs every stage',
                                 'incomplete: 12 passed, 0 failed']

    stage = run_tests.evaluate('integration', 0, str(tmp_path), 0.1, required=True)
    assert not stage.ok and (stage.passed, stage.failed) == (0, 1)
    assert stage.note == 'could not run (every stage must, under CI=true or KUBEHW_REQUIRE_ALL_STAGES=1): ' + reason
    lines, ok = run_tests.summary([units, stage])
    assert not ok and lines[-1] == '12 passed, 1 failed'


@pytest.mark.parametrize('required', [True, False])
def test_setup_without_the_kubernetes_binaries_fails_where_every_stage_must_run(required):
    """make setup on a machine where the binaries are nowhere and the pinned release cannot be fetched: under CI=true
    (or KUBEHW_REQUIRE_ALL_STAGES=1) it fails naming why and what to set; on a developer's machine it warns and goes on
    (make test then ends with "incomplete:")."""
    release = json.load(open(os.path.join(ROOT, 'tests', 'support', 'k8s_release.json')))
    downloaded = os.path.join(ROOT, '.cache', 'k8s-release', release['version'], 'bin')
    assert not os.path.exists(downloaded), 'a downloaded release is installed (%s): this test needs none' % downloaded
    env = dict((k, v) for k, v in os.environ.items() if k not in ('CI', 'KUBEHW_REQUIRE_ALL_STAGES'))
    env.update(KUBEHW_K8S_ASSETS='/nonexistent', KUBEHW_K8S_MIRROR='http://127.0.0.1:9')
    if required:
        env['CI'] = 'true'
    proc = subprocess.run(['bash', os.path.join(ROOT, 'scripts', 'setup.sh')], env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    out = proc.stdout + proc.stderr
    assert 'could not fetch http://127.0.0.1:9/' in out, out
    if required:
        assert proc.returncode == 1, out
        assert '[setup] ERROR: no Kubernetes binaries' in out and 'KUBEHW_K8S_ASSETS' in out, out
        assert '[setup] done' not in out
    else:
        assert proc.returncode == 0, out
        assert '[setup] WARNING: no Kubernetes binaries' in out and proc.stdout.rstrip().endswith('[setup] done'), out


@pytest.mark.parametrize('environ, required', [
    ({}, False), ({'CI': 'true'}, True), ({'CI': 'True'}, True), ({'CI': 'false'}, False),
    ({'KUBEHW_REQUIRE_ALL_STAGES': '1'}, True), ({'KUBEHW_REQUIRE_ALL_STAGES': '0'}, False)])
def test_every_stage_is_required_under_ci_or_when_asked(environ, required):
    assert run_tests.every_stage_required(environ) is required


def test_the_summary_names_the_ansible_core_each_stage_ran(tmp_path):
    """A pytest stage's own header names its ansible-core (tests/conftest.py); a stage without one (sanity, lint,
    the role scenarios) ran .venv's."""
    (tmp_path / 'core-2.18.log').write_text('platform linux\nansible-core 2.18.19\nrootdir: /x\n')
    (tmp_path / 'lint.log').write_text('ansible-lint --profile production\n')
    pinned = run_tests.ansible_core_of('lint', str(tmp_path))
    assert re.match(r'2\.[0-9]+\.[0-9]+\Z', pinned), pinned
    core = run_tests.evaluate('core-2.18', 0, str(tmp_path), 1.0)
    lint = run_tests.evaluate('lint', 0, str(tmp_path), 1.0)
    assert (core.ansible_core, lint.ansible_core) == ('2.18.19', pinned)
    lines, _ok = run_tests.summary([core, lint])
    header = lines[2]
    assert 'ansible-core' in header.split()
    column = header.index('ansible-core')
    assert lines[3][column:].startswith('2.18.19') and lines[4][column:].startswith(pinned)


def test_every_pytest_stage_names_its_ansible_core_in_its_header():
    proc = subprocess.run([sys.executable, '-m', 'pytest', '-p', 'no:cacheprovider', '--co',
                           'tests/test_release.py'], cwd=ROOT, capture_output=True, text=True, check=False)
    import ansible.release
    assert 'ansible-core %s\n' % ansible.release.__version__ in proc.stdout, proc.stdout


def test_make_test_one_needs_a_test_and_runs_just_that_one():
    proc = _make('test-one')
    assert proc.returncode != 0 and 'make test-one TEST=' in proc.stdout, proc.stdout
    proc = _make('test-one', 'TEST=tests/test_release.py', 'ARGS=-k execution_environment')
    assert proc.returncode == 0, proc.stdout
    assert re.search(r'^=+ 1 passed, 3 deselected', proc.stdout, re.M), proc.stdout


def test_the_lint_configuration_fails_a_playbook_whose_only_finding_is_a_warning(tmp_path):
    """ansible-lint exits 0 on warnings (jinja[spacing] is one) unless told strict: the project's .ansible-lint
    must make a warning fail `make lint`."""
    lint = os.path.join(os.path.dirname(sys.executable), 'ansible-lint')
    if not os.access(lint, os.X_OK):
        pytest.fail('ansible-lint is not installed beside %s (make setup)' % sys.executable)
    playbook = tmp_path / 'spacing.yml'
    playbook.write_text('---\n- name: Spacing\n  hosts: localhost\n  gather_facts: false\n  tasks:\n'
                        '    - name: Show\n      ansible.builtin.debug:\n        msg: "{{ value|default(1) }}"\n')
    env = dict(os.environ, NO_COLOR='1', ANSIBLE_LINT_SKIP_SCHEMA_UPDATE='1')

    def run(config):
        return subprocess.run([lint, '--offline', '-c', config, str(playbook)], cwd=str(tmp_path), env=env,
                              capture_output=True, text=True, timeout=300, check=False)

    strict = run(os.path.join(ROOT, '.ansible-lint'))
    assert strict.returncode != 0 and 'jinja[spacing]' in strict.stdout + strict.stderr, strict.stdout + strict.stderr
    # the same configuration without `strict: true` passes it: the warning is what fails the run
    relaxed = tmp_path / 'relaxed.ansible-lint'
    relaxed.write_text(open(os.path.join(ROOT, '.ansible-lint')).read().replace('strict: true', 'strict: false'))
    loose = run(str(relaxed))
    assert loose.returncode == 0, loose.stdout + loose.stderr
