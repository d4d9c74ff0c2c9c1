#!/usr/bin/env python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run every molecule scenario of the collection, each as its own `molecule test -s NAME`.

Scenarios live in ``extensions/molecule/<name>/molecule.yml`` (the layout molecule expects in a
collection; run from the repository root) or in ``roles/<role>/molecule/<name>/molecule.yml``
(run from the role). One run per scenario, rather
than ``molecule test --all``, so a failing scenario does not hide the ones after it and each
counts once in ``make test``. With ``--results FILE`` the outcome is written as JSON:
``{"scenarios": [{"name", "dir", "passed", "seconds"}]}``.

``--jobs N`` runs up to N scenarios at a time (each boots its own target; much of a scenario's time
is waiting on dpkg, apt and systemd). Each scenario then writes its own log (``--logs DIR``, default
a temporary directory) and the logs are printed whole, in the listed order, so the output reads as
if they had run one after another. Scenarios whose platforms name a Debian ``suite`` start first:
their root file system is a second image (mmdebstrap), built beside the default suite's.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def find_scenarios(root):
    """Return (label, working directory, scenario name) for every scenario, sorted."""
    found = []
    for path in sorted(glob.glob(os.path.join(root, 'extensions', 'molecule', '*', 'molecule.yml'))):
        name = os.path.basename(os.path.dirname(path))
        found.append((name, root, name))
    for path in sorted(glob.glob(os.path.join(root, 'roles', '*', 'molecule', '*', 'molecule.yml'))):
        scenario_dir = os.path.dirname(path)
        role_dir = os.path.dirname(os.path.dirname(scenario_dir))
        name = os.path.basename(scenario_dir)
        found.append(('%s/%s' % (os.path.basename(role_dir), name), role_dir, name))
    return found


def own_suite(workdir, name):
    """Whether a scenario's platforms name a Debian suite of their own (a second image to build)."""
    for path in (os.path.join(workdir, 'extensions', 'molecule', name, 'molecule.yml'),
                 os.path.join(workdir, 'molecule', name, 'molecule.yml')):
        if os.path.exists(path):
            with open(path) as handle:
                return re.search(r'^\s+suite:\s*\S', handle.read(), re.M) is not None
    return False


class Run(object):
    """One `molecule test -s NAME` writing to its own log file."""

    def __init__(self, scenario, logs):
        self.label, self.workdir, self.name = scenario
        self.log_path = os.path.join(logs, '%s.log' % self.label.replace('/', '--'))
        self.log = open(self.log_path, 'wb')
        self.started = time.time()
        self.seconds = None
        self.proc = subprocess.Popen(['molecule', 'test', '-s', self.name], cwd=self.workdir, stdout=self.log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def poll(self):
        if self.seconds is None and self.proc.poll() is not None:
            self.seconds = time.time() - self.started
            self.log.close()
        return self.seconds is not None


def write(text):
    sys.stdout.write(text)
    sys.stdout.flush()


def run_one_at_a_time(scenarios):
    results = []
    for label, workdir, name in scenarios:
        write('=== molecule test -s %s (in %s)\n' % (name, os.path.relpath(workdir, ROOT) or '.'))
        started = time.time()
        rc = subprocess.call(['molecule', 'test', '-s', name], cwd=workdir)
        results.append(finished(label, workdir, rc, time.time() - started))
    return results


def finished(label, workdir, rc, seconds):
    write('=== %s: %s in %.1f s\n' % (label, 'passed' if rc == 0 else 'FAILED (rc=%d)' % rc, seconds))
    return {'name': label, 'dir': workdir, 'passed': rc == 0, 'seconds': round(seconds, 1)}


def run_side_by_side(scenarios, jobs, logs, interval=0.5):
    """Up to `jobs` scenarios at a time; their logs printed whole, in the order of `scenarios`."""
    if not os.path.isdir(logs):
        os.makedirs(logs)
    waiting = sorted(scenarios, key=lambda s: not own_suite(s[1], s[2]))
    runs = {}
    results = []
    printed, offset, header = 0, 0, False
    out = getattr(sys.stdout, 'buffer', sys.stdout)
    while printed < len(scenarios):
        while waiting and sum(1 for r in runs.values() if not r.poll()) < jobs:
            scenario = waiting.pop(0)
            runs[scenario[0]] = Run(scenario, logs)
        label, workdir, name = scenarios[printed]
        run = runs.get(label)
        if run is not None:
            if not header:
                write('=== molecule test -s %s (in %s)\n' % (name, os.path.relpath(workdir, ROOT) or '.'))
                header = True
            done = run.poll()
            with open(run.log_path, 'rb') as handle:
                handle.seek(offset)
                data = handle.read()
            offset += len(data)
            out.write(data)
            sys.stdout.flush()
            if done:
                results.append(finished(label, workdir, run.proc.returncode, run.seconds))
                printed, offset, header = printed + 1, 0, False
                continue
        time.sleep(interval)
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--results', help='write per-scenario results to this JSON file')
    parser.add_argument('--jobs', type=int, default=1, help='scenarios run at a time (default 1)')
    parser.add_argument('--logs', help='directory of the per-scenario logs when --jobs is above 1')
    parser.add_argument('scenario', nargs='*', help='run only these scenarios (labels as listed)')
    args = parser.parse_args()

    scenarios = find_scenarios(ROOT)
    if args.scenario:
        unknown = sorted(set(args.scenario) - set(s[0] for s in scenarios))
        if unknown:
            sys.stderr.write('roles: no scenario named %s; there are: %s\n' % (
                ', '.join(unknown), ', '.join(s[0] for s in scenarios)))
            return 2
        scenarios = [s for s in scenarios if s[0] in args.scenario]
    if not scenarios:
        write('roles: no molecule scenarios found (extensions/molecule/*/molecule.yml)\n')
    if args.jobs > 1 and len(scenarios) > 1:
        logs = args.logs or tempfile.mkdtemp(prefix='kubehw-roles-')
        results = run_side_by_side(scenarios, args.jobs, logs)
    else:
        results = run_one_at_a_time(scenarios)
    if args.results:
        with open(args.results, 'w') as handle:
            json.dump({'scenarios': results}, handle, indent=2)
    return 0 if all(r['passed'] for r in results) else 1


if __name__ == '__main__':
    sys.exit(main())
