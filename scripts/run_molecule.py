#!/usr/bin/env python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run every molecule scenario of the collection, one `molecule test -s NAME` at a time.

Scenarios live in ``extensions/molecule/<name>/molecule.yml`` (the layout molecule expects in a
collection; run from the repository root) or in ``roles/<role>/molecule/<name>/molecule.yml``
(run from the role). One run per scenario, rather
than ``molecule test --all``, so a failing scenario does not hide the ones after it and each
counts once in ``make test``. With ``--results FILE`` the outcome is written as JSON:
``{"scenarios": [{"name", "dir", "passed", "seconds"}]}``.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import argparse
import glob
import json
import os
import subprocess
import sys
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--results', help='write per-scenario results to this JSON file')
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
    results = []
    if not scenarios:
        sys.stdout.write('roles: no molecule scenarios found (extensions/molecule/*/molecule.yml)\n')
    for label, workdir, name in scenarios:
        sys.stdout.write('=== molecule test -s %s (in %s)\n' % (name, os.path.relpath(workdir, ROOT) or '.'))
        sys.stdout.flush()
        started = time.time()
        rc = subprocess.call(['molecule', 'test', '-s', name], cwd=workdir)
        seconds = time.time() - started
        results.append({'name': label, 'dir': workdir, 'passed': rc == 0, 'seconds': round(seconds, 1)})
        sys.stdout.write('=== %s: %s in %.1f s\n' % (label, 'passed' if rc == 0 else 'FAILED (rc=%d)' % rc, seconds))
        sys.stdout.flush()
    if args.results:
        with open(args.results, 'w') as handle:
            json.dump({'scenarios': results}, handle, indent=2)
    return 0 if all(r['passed'] for r in results) else 1


if __name__ == '__main__':
    sys.exit(main())
