#!/usr/bin/env python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""`make test`: run every stage in order, keep going past failures, then summarise.

Stages: setup, sanity, units, integration, least-privilege, min-versions, lint, roles (each is `make <stage>`). The last line
printed is ``N passed, N failed`` where N counts pytest test cases of the pytest stages (read
from their JUnit XML) plus one per non-pytest check (sanity, lint, each molecule scenario).
A stage that breaks without reporting test cases (pytest exit 5 "no tests collected", a
collection or usage error, a failed setup) counts as one failure. Runs on the standard library
only, so it can report even when `make setup` could not build .venv.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import argparse
import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTEST_STAGES = ('units', 'integration', 'least-privilege', 'min-versions')
STAGES = ('setup', 'sanity', 'units', 'integration', 'least-privilege', 'min-versions', 'lint', 'roles')
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
        self.note = ''
        self.ok = False


def run_stage(name, reports):
    stage = Stage(name)
    report = None
    rc_file = os.path.join(reports, '%s.rc' % name)
    if name in PYTEST_STAGES:
        report = os.path.join(reports, '%s.xml' % name)
    elif name == 'roles':
        report = os.path.join(reports, 'roles.json')
    for stale in (report, rc_file):
        if stale and os.path.exists(stale):
            os.remove(stale)

    sys.stdout.write('\n##### make %s\n' % name)
    sys.stdout.flush()
    started = time.time()
    rc = subprocess.call(['make', '--no-print-directory', '-C', ROOT, name])
    stage.seconds = time.time() - started

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


def table(rows, numeric):
    """Lines of `rows` (lists of strings) in columns as wide as their widest cell; numeric columns right-aligned."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [cell.rjust(width) if i in numeric else cell.ljust(width)
                 for i, (cell, width) in enumerate(zip(row, widths))]
        lines.append('  '.join(cells).rstrip())
    return lines


def summary(stages):
    rows = [['stage', 'result', 'passed', 'failed', 'skipped', 'seconds', 'note']]
    for s in stages:
        rows.append([s.name, 'ok' if s.ok else 'FAIL', str(s.passed), str(s.failed), str(s.skipped),
                     '%.1f' % s.seconds, s.note])
    passed = sum(s.passed for s in stages)
    failed = sum(s.failed for s in stages)
    skipped = sum(s.skipped for s in stages)
    total = sum(s.seconds for s in stages)
    rows.append(['total', 'ok' if failed == 0 else 'FAIL', str(passed), str(failed), str(skipped), '%.1f' % total, ''])
    lines = ['', '##### summary'] + table(rows, numeric=(2, 3, 4, 5))
    final = '%d passed, %d failed' % (passed, failed)
    if skipped:
        final += ', %d skipped' % skipped
    lines.append(final)
    return lines, failed == 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--reports', default=os.path.join(ROOT, '.cache', 'reports'))
    parser.add_argument('stages', nargs='*', default=list(STAGES), help='stages to run (default: all, in order)')
    args = parser.parse_args()
    unknown = [s for s in args.stages if s not in STAGES]
    if unknown:
        parser.error('unknown stage(s) %s; choose from %s' % (', '.join(unknown), ', '.join(STAGES)))
    if not os.path.isdir(args.reports):
        os.makedirs(args.reports)

    stages = [run_stage(name, args.reports) for name in args.stages]
    lines, ok = summary(stages)
    text = '\n'.join(lines) + '\n'
    sys.stdout.write(text)
    sys.stdout.flush()
    with open(os.path.join(args.reports, 'summary.txt'), 'w') as handle:
        handle.write(text)
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
