#!/usr/bin/env python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""`make test`: run every stage, keep going past failures, then summarise.

Stages: setup, sanity, units, integration, min-versions, core-2.18, lint, roles, node (each is `make <stage>`). The last line
printed is ``N passed, N failed`` where N counts pytest test cases of the pytest stages (read
from their JUnit XML) plus one per non-pytest check (sanity, lint, each molecule scenario).
A stage that breaks without reporting test cases (pytest exit 5 "no tests collected", a
collection or usage error, a failed setup) counts as one failure. Runs on the standard library
only, so it can report even when `make setup` could not build .venv.

Setup runs first and alone (every stage uses what it makes). Then the stages run in LANES that
run side by side, each lane one stage after another: the role scenarios spend much of their time
waiting on package downloads, dpkg and booting targets, while the pytest stages keep the cores
busy. Each stage writes to its own log (<reports>/<stage>.log) and the logs are printed whole, in
STAGES order: the first unfinished stage's log as it grows, a later one's when its turn comes. So
the output reads as if the stages had run one after another. On a terminal each stage runs on a
pseudo-terminal of its own, so the tools colour as they would when run by hand; otherwise each
writes a plain file and the Makefile tells every tool not to colour. `--serial` runs one stage at
a time.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import argparse
import fcntl
import glob
import json
import os
import pty
import re
import subprocess
import sys
import termios
import threading
import time
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTEST_STAGES = ('units', 'integration', 'min-versions', 'core-2.18', 'node')
STAGES = ('setup', 'sanity', 'units', 'integration', 'min-versions', 'core-2.18', 'lint', 'roles', 'node')
# After setup, these lanes run at the same time; a lane runs its stages in the order given. The integration stage is
# the longest and has a lane of its own; the role scenarios (mostly waiting on downloads, dpkg and systemd boots) are
# followed by the two other ansible-core releases' stages; the real node (mostly waiting on its Debian sid image and
# the kubelet) by sanity, the units and lint. The lanes end within a minute of each other in a fresh-clone run: the
# seconds of each stage are docs/development.md's table ("What each stage proves, and what it costs").
LANES = (
    ('integration',),
    ('roles', 'min-versions', 'core-2.18'),
    ('node', 'sanity', 'units', 'lint'),
)
# A stage that could not run here (no control plane for the cluster stages, no machine for the real node) writes its
# reason to <stage>.not-run and exits 0. On a developer's machine it counts neither as passed nor as failed: the table
# says why and the last line starts with "incomplete:". Where every stage must run (CI=true, as CI sets it, or
# KUBEHW_REQUIRE_ALL_STAGES=1) it fails with that reason: a run that could not reach Kubernetes proved nothing of the
# modules.
NOT_RUN_SUFFIX = '.not-run'
INCOMPLETE = 'incomplete:'


def every_stage_required(environ=None):
    """Whether a stage that cannot run fails the run: under CI (CI=true) or KUBEHW_REQUIRE_ALL_STAGES=1."""
    environ = os.environ if environ is None else environ
    return (environ.get('CI', '').strip().lower() in ('true', '1', 'yes')
            or environ.get('KUBEHW_REQUIRE_ALL_STAGES', '').strip() == '1')


PYTEST_EXIT_MEANING = {
    1: 'tests failed',
    2: 'interrupted',
    3: 'pytest internal error',
    4: 'pytest usage error',
    5: 'no tests collected',
}


def junit_counts(path):
    """Return (passed, failed, skipped) from a pytest JUnit XML file, or None if unreadable."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return None
    suites = [root] if root.tag == 'testsuite' else root.findall('testsuite')
    tests = failed = skipped = 0
    for suite in suites:
        tests += int(suite.get('tests', 0))
        failed += int(suite.get('failures', 0)) + int(suite.get('errors', 0))
        skipped += int(suite.get('skipped', 0))
    return tests - failed - skipped, failed, skipped


class Stage(object):
    def __init__(self, name):
        self.name = name
        self.passed = 0
        self.failed = 0
        self.skipped = 0
        self.seconds = 0.0
        self.cpu = 0.0
        self.note = ''
        self.ok = False
        # the stage left a reason why it could not run here (REPORTS/<stage>.not-run)
        self.not_run = False
        self.ansible_core = ''


def stage_command(name):
    """The command line of one stage."""
    return ['make', '--no-print-directory', '-C', ROOT, name]


def report_paths(name, reports):
    """(report file or None, rc file) of a stage."""
    report = None
    if name in PYTEST_STAGES:
        report = os.path.join(reports, '%s.xml' % name)
    elif name == 'roles':
        report = os.path.join(reports, 'roles.json')
    return report, os.path.join(reports, '%s.rc' % name)


class Running(object):
    """One stage's process, its log file and (on a terminal) the thread copying its pseudo-terminal there."""

    def __init__(self, name, reports, terminal):
        self.name = name
        self.log_path = os.path.join(reports, '%s.log' % name)
        for stale in report_paths(name, reports) + (self.log_path, os.path.join(reports, name + NOT_RUN_SUFFIX)):
            if stale and os.path.exists(stale):
                os.remove(stale)
        self.log = open(self.log_path, 'wb')
        self.copier = None
        self.rc = None
        self.cpu = 0.0
        self.started = time.time()
        self.ended = None
        command = stage_command(name)
        if not terminal:
            self.proc = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            return
        master, slave = pty.openpty()
        try:
            size = fcntl.ioctl(sys.stdout.fileno(), termios.TIOCGWINSZ, b'\0' * 8)
            fcntl.ioctl(slave, termios.TIOCSWINSZ, size)
        except OSError:
            pass
        self.proc = subprocess.Popen(command, stdout=slave, stderr=slave, stdin=subprocess.DEVNULL)
        os.close(slave)
        self.copier = threading.Thread(target=self._copy, args=(master,))
        self.copier.daemon = True
        self.copier.start()

    def _copy(self, master):
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every writer has closed the terminal
                data = b''
            if not data:
                break
            self.log.write(data)
            self.log.flush()
        os.close(master)

    def poll(self):
        """True once the stage has ended; then rc and cpu (user+sys seconds of its processes) are set."""
        if self.rc is not None:
            return True
        pid, status, usage = os.wait4(self.proc.pid, os.WNOHANG)
        if pid == 0:
            return False
        self.ended = time.time()
        self.rc = os.waitstatus_to_exitcode(status)
        self.proc.returncode = self.rc
        # the stage's processes that it waited for, not targets it started and left to init
        self.cpu = usage.ru_utime + usage.ru_stime
        if self.copier is not None:
            self.copier.join(10)
        self.log.close()
        return True


ANSIBLE_CORE_HEADER = re.compile(r'^ansible-core (\S+)$', re.M)
VENV_RELEASE = re.compile(r"""^__version__ = ['"]([^'"]+)['"]""", re.M)


def ansible_core_of(name, reports):
    """The ansible-core a stage ran: the pytest header of its log (tests/conftest.py), else the one in .venv (sanity,
    lint and the role scenarios run .venv's tools)."""
    try:
        with open(os.path.join(reports, '%s.log' % name), errors='replace') as handle:
            found = ANSIBLE_CORE_HEADER.search(handle.read())
        if found:
            return found.group(1)
    except OSError:
        pass
    for release in glob.glob(os.path.join(ROOT, '.venv', 'lib', 'python3*', 'site-packages', 'ansible', 'release.py')):
        with open(release) as handle:
            found = VENV_RELEASE.search(handle.read())
        if found:
            return found.group(1)
    return ''


def evaluate(name, rc, reports, seconds, cpu=0.0, required=None):
    """The Stage of a finished stage from its exit code and the reports it left. required: whether a stage that could
    not run fails (default: every_stage_required())."""
    stage = Stage(name)
    stage.seconds = seconds
    stage.cpu = cpu
    if name != 'setup':
        stage.ansible_core = ansible_core_of(name, reports)
    report, rc_file = report_paths(name, reports)
    not_run = os.path.join(reports, name + NOT_RUN_SUFFIX)
    if rc == 0 and os.path.exists(not_run):
        with open(not_run) as handle:
            reason = handle.read().strip()
        stage.not_run = True
        if every_stage_required() if required is None else required:
            stage.note = 'could not run (every stage must, under CI=true or KUBEHW_REQUIRE_ALL_STAGES=1): ' + reason
            stage.failed = 1
            return stage
        stage.note = 'not run: ' + reason
        stage.ok = True
        return stage
    if name in PYTEST_STAGES:
        # make answers 2 for any failure; the Makefile saved pytest's own exit code
        if rc != 0 and os.path.exists(rc_file):
            with open(rc_file) as handle:
                rc = int(handle.read().strip() or rc)
        counts = junit_counts(report)
        if counts:
            stage.passed, stage.failed, stage.skipped = counts
        if rc == 0:
            stage.ok = True
        else:
            stage.note = PYTEST_EXIT_MEANING.get(rc, 'exit code %d' % rc)
            if stage.failed == 0:
                # no failing test case was recorded (nothing collected, crash): the stage itself fails
                stage.failed = 1
    elif name == 'roles':
        scenarios = []
        if report and os.path.exists(report):
            with open(report) as handle:
                scenarios = json.load(handle).get('scenarios', [])
        stage.passed = sum(1 for s in scenarios if s['passed'])
        stage.failed = sum(1 for s in scenarios if not s['passed'])
        stage.ok = rc == 0
        if not scenarios:
            stage.note = 'no molecule scenarios yet' if rc == 0 else 'exit code %d' % rc
        else:
            stage.note = ', '.join('%s %s' % (s['name'], 'ok' if s['passed'] else 'FAILED') for s in scenarios)
        if rc != 0 and stage.failed == 0:
            stage.failed = 1
    elif name == 'setup':
        # not a test: it only counts when it breaks, since every later stage depends on it
        stage.ok = rc == 0
        stage.failed = 0 if stage.ok else 1
        if not stage.ok:
            stage.note = 'exit code %d' % rc
    else:
        stage.ok = rc == 0
        stage.passed, stage.failed = (1, 0) if stage.ok else (0, 1)
        if not stage.ok:
            stage.note = 'exit code %d' % rc
    return stage


def plan(names, serial=False):
    """The lanes that run `names` after setup: LANES restricted to them, or one lane in STAGES order."""
    rest = [name for name in STAGES if name in names and name != 'setup']
    if serial:
        return [rest] if rest else []
    lanes = [[name for name in lane if name in rest] for lane in LANES]
    placed = set(name for lane in lanes for name in lane)
    lanes[0].extend(name for name in rest if name not in placed)
    return [lane for lane in lanes if lane]


class Printer(object):
    """Writes each stage's log to `out` whole and in STAGES order while the stages run."""

    def __init__(self, names, out):
        self.order = [name for name in STAGES if name in names]
        self.out = out
        self.index = 0
        self.offset = 0
        self.header_done = False

    def pump(self, running):
        """Print what can be printed now. running: {name: Running} of the stages started so far."""
        while self.index < len(self.order):
            name = self.order[self.index]
            job = running.get(name)
            if job is None:
                return
            if not self.header_done:
                self.write(b'\n##### make %s\n' % name.encode('ascii'))
                self.header_done = True
            ended = job.rc is not None
            with open(job.log_path, 'rb') as handle:
                handle.seek(self.offset)
                data = handle.read()
            self.offset += len(data)
            if data:
                self.write(data)
            if not ended:
                return
            self.index += 1
            self.offset = 0
            self.header_done = False

    def write(self, data):
        stream = getattr(self.out, 'buffer', self.out)
        stream.write(data)
        self.out.flush()


def run_stages(names, reports, serial=False, out=None, terminal=None, interval=0.2):
    """Run the stages (setup first and alone, then the lanes side by side); return their Stages in STAGES order."""
    out = out or sys.stdout
    if terminal is None:
        terminal = out.isatty()
    printer = Printer(names, out)
    running = {}
    results = {}

    def finish(job):
        results[job.name] = evaluate(job.name, job.rc, reports, job.ended - job.started, job.cpu)

    if 'setup' in names:
        job = running['setup'] = Running('setup', reports, terminal)
        while not job.poll():
            printer.pump(running)
            time.sleep(interval)
        finish(job)
    lanes = [list(lane) for lane in plan(names, serial)]
    current = [None] * len(lanes)
    while True:
        for i, lane in enumerate(lanes):
            job = current[i]
            if job is not None and job.poll():
                finish(job)
                job = current[i] = None
            if job is None and lane:
                name = lane.pop(0)
                current[i] = running[name] = Running(name, reports, terminal)
        printer.pump(running)
        if all(job is None for job in current):
            break
        time.sleep(interval)
    printer.pump(running)
    return [results[name] for name in STAGES if name in results]


def table(rows, numeric):
    """Lines of `rows` (lists of strings) in columns as wide as their widest cell; numeric columns right-aligned."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [cell.rjust(width) if i in numeric else cell.ljust(width)
                 for i, (cell, width) in enumerate(zip(row, widths))]
        lines.append('  '.join(cells).rstrip())
    return lines


def summary(stages, wall=None):
    """The summary lines and whether everything passed. wall: the run's elapsed seconds (stages overlap, so
    the total row shows that, not the sum of the stages' seconds); cpu is user+sys seconds of each stage's
    processes."""
    rows = [['stage', 'result', 'passed', 'failed', 'skipped', 'seconds', 'cpu', 'ansible-core', 'note']]
    for s in stages:
        rows.append([s.name, 'ok' if s.ok else 'FAIL', str(s.passed), str(s.failed), str(s.skipped),
                     '%.1f' % s.seconds, '%.1f' % s.cpu, s.ansible_core, s.note])
    passed = sum(s.passed for s in stages)
    failed = sum(s.failed for s in stages)
    skipped = sum(s.skipped for s in stages)
    total = wall if wall is not None else sum(s.seconds for s in stages)
    rows.append(['total', 'ok' if failed == 0 else 'FAIL', str(passed), str(failed), str(skipped), '%.1f' % total,
                 '%.1f' % sum(s.cpu for s in stages), '', ''])
    lines = ['', '##### summary'] + table(rows, numeric=(2, 3, 4, 5, 6))
    final = '%d passed, %d failed' % (passed, failed)
    if skipped:
        final += ', %d skipped' % skipped
    not_run = [s.name for s in stages if s.not_run and s.ok]
    if not_run:
        lines.append('not run here: %s (see the table); CI runs every stage' % ', '.join(not_run))
        final = '%s %s' % (INCOMPLETE, final)
    lines.append(final)
    return lines, failed == 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--reports', default=os.path.join(ROOT, '.cache', 'reports'))
    parser.add_argument('--serial', action='store_true', help='one stage at a time, in order')
    parser.add_argument('stages', nargs='*', default=list(STAGES), help='stages to run (default: all)')
    args = parser.parse_args()
    unknown = [s for s in args.stages if s not in STAGES]
    if unknown:
        parser.error('unknown stage(s) %s; choose from %s' % (', '.join(unknown), ', '.join(STAGES)))
    if not os.path.isdir(args.reports):
        os.makedirs(args.reports)

    started = time.time()
    stages = run_stages(args.stages, args.reports, serial=args.serial)
    lines, ok = summary(stages, wall=time.time() - started)
    text = '\n'.join(lines) + '\n'
    sys.stdout.write(text)
    sys.stdout.flush()
    with open(os.path.join(args.reports, 'summary.txt'), 'w') as handle:
        handle.write(text)
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
