#!/usr/bin/env python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""`make min-versions`: a venv with the declared minimum versions of the modules' libraries.

The floors come from ``meta/ee-requirements.txt`` (one ``name>=version`` per line): the libraries
in ``FLOORED`` (kubernetes, urllib3, jsonpatch) are installed at exactly that version. The test
tools come from ``requirements-dev.txt`` (pinned there), without the ones the pytest stages do not
use (``NOT_NEEDED``) and without its own pins of the floored libraries. Other libraries of
ee-requirements.txt (PyYAML) keep the version requirements-dev.txt pins: PyYAML's floor 5.4 has no
wheel for Python 3.11 and does not build with current Cython, and the modules use none of its
newer API.

Idempotent: the requirement list is hashed into a stamp file next to the venv; a second run with
the same lists only checks the stamp. It then prints the versions it installed, and fails if an
installed version is not the declared floor.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import argparse
import hashlib
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLOORED = ('kubernetes', 'urllib3', 'jsonpatch')
NOT_NEEDED = ('ansible-lint', 'yamllint', 'molecule', 'ansible-builder', 'antsibull-changelog')
REQUIREMENT = re.compile(r'^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(==|>=)\s*([^\s;,#]+)\s*(?:#.*)?$')


def canonical(name):
    return re.sub(r'[-_.]+', '-', name).lower()


def read_requirements(path, operator):
    """Return [(canonical name, line)] for the `name<operator>version` lines of a requirements file."""
    found = []
    with open(path) as handle:
        for raw in handle:
            line = raw.strip()
            if not line or line.startswith('#'):
                continue
            match = REQUIREMENT.match(line)
            if not match or match.group(2) != operator:
                raise SystemExit('%s: %r is not of the form name%sversion' % (path, line, operator))
            found.append((canonical(match.group(1)), match.group(1), match.group(3)))
    return found


def requirement_lines(ee_path, dev_path):
    """The exact requirement lines of the min-versions venv, floors first."""
    floors = [(key, name, version) for key, name, version in read_requirements(ee_path, '>=') if key in FLOORED]
    missing = [name for name in FLOORED if name not in [key for key, _name, _version in floors]]
    if 'kubernetes' in missing or 'jsonpatch' in missing:
        raise SystemExit('%s declares no floor for %s' % (ee_path, ', '.join(missing)))
    floored = set(key for key, _name, _version in floors)
    lines = ['%s==%s' % (name, version) for _key, name, version in floors]
    for key, name, version in read_requirements(dev_path, '=='):
        if key in floored or key in NOT_NEEDED:
            continue
        lines.append('%s==%s' % (name, version))
    return lines, floors


def installed_versions(python, names):
    code = ('import importlib.metadata as m, json, sys\n'
            'print(json.dumps({n: m.version(n) for n in sys.argv[1:]}))')
    out = subprocess.check_output([python, '-c', code] + list(names))
    import json
    return json.loads(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--venv', default=os.path.join(ROOT, '.cache', 'min-versions', 'venv'))
    parser.add_argument('--ee-requirements', default=os.path.join(ROOT, 'meta', 'ee-requirements.txt'))
    parser.add_argument('--dev-requirements', default=os.path.join(ROOT, 'requirements-dev.txt'))
    parser.add_argument('--print', action='store_true', help='print the requirement lines and stop')
    args = parser.parse_args()

    lines, floors = requirement_lines(args.ee_requirements, args.dev_requirements)
    if args.print:
        sys.stdout.write('\n'.join(lines) + '\n')
        return 0
    wanted = '\n'.join(lines) + '\n'
    stamp = os.path.join(args.venv, '.requirements.sha256')
    digest = hashlib.sha256(wanted.encode('utf-8')).hexdigest()
    python = os.path.join(args.venv, 'bin', 'python')
    current = None
    if os.path.exists(stamp):
        with open(stamp) as handle:
            current = handle.read().strip()
    if current == digest and os.access(python, os.X_OK):
        sys.stdout.write('min-versions: venv up to date (%s)\n' % os.path.relpath(args.venv, ROOT))
    else:
        if not os.access(python, os.X_OK):
            sys.stdout.write('min-versions: creating %s\n' % os.path.relpath(args.venv, ROOT))
            # sys.executable is .venv's python; venv builds the new one on the same base interpreter
            subprocess.check_call([sys.executable, '-m', 'venv', args.venv])
        requirements = os.path.join(os.path.dirname(args.venv), 'requirements.txt')
        with open(requirements, 'w') as handle:
            handle.write(wanted)
        sys.stdout.write('min-versions: installing %s\n' % ' '.join(lines[:len(floors)]))
        sys.stdout.flush()
        subprocess.check_call([python, '-m', 'pip', 'install', '-q', '--disable-pip-version-check',
                               '-r', requirements])
        with open(stamp, 'w') as handle:
            handle.write(digest + '\n')
    versions = installed_versions(python, [name for _key, name, _version in floors])
    wrong = ['%s %s (declared floor %s)' % (name, versions[name], version)
             for _key, name, version in floors if versions[name] != version]
    if wrong:
        raise SystemExit('min-versions: installed versions are not the floors: %s' % ', '.join(wrong))
    sys.stdout.write('min-versions: testing with %s\n' % ', '.join(
        '%s %s' % (name, versions[name]) for _key, name, _version in floors))
    if 'urllib3' not in versions:
        sys.stdout.write('min-versions: meta/ee-requirements.txt declares no urllib3 floor; urllib3 %s came with them\n'
                         % installed_versions(python, ['urllib3'])['urllib3'])
    return 0


if __name__ == '__main__':
    sys.exit(main())
