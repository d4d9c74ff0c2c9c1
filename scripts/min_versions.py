#!/usr/bin/env python
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""`make min-versions` and `make core-2.18`: a venv with the declared minimum versions of the modules' libraries, or
with another ansible-core than the pinned one.

`make min-versions` tests the floors: the lowest ansible-core ``meta/runtime.yml`` declares (``requires_ansible``)
and the libraries' floors below. `make core-2.18` (``--ansible-core 2.18.19 --libraries pinned``) tests the
ansible-core release between the floor and the pinned one with the pinned libraries.

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
NOT_NEEDED = ('ansible-lint', 'yamllint', 'molecule', 'ansible-builder', 'antsibull-changelog', 'antsibull-docs')
# name, operator, version; an environment marker (`; python_version < "3.11"`) and a comment may follow.
REQUIREMENT = re.compile(r'^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(==|>=)\s*([^\s;,#]+)\s*(?:;[^#]*)?(?:#.*)?$')


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


def ansible_core_floor(runtime_path):
    """The X.Y.Z of meta/runtime.yml's ``requires_ansible: '>=X.Y.Z'``."""
    with open(runtime_path) as handle:
        for raw in handle:
            match = re.match(r"""^requires_ansible:\s*['"]?>=\s*([0-9]+\.[0-9]+\.[0-9]+)['"]?\s*$""", raw)
            if match:
                return match.group(1)
    raise SystemExit('%s declares no requires_ansible floor of the form >=X.Y.Z' % runtime_path)


def with_ansible_core(lines, version):
    """The requirement lines with ansible-core at exactly `version`."""
    return ['ansible-core==%s' % version if canonical(line.split('==')[0]) == 'ansible-core' else line
            for line in lines]


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
    parser.add_argument('--runtime', default=os.path.join(ROOT, 'meta', 'runtime.yml'))
    parser.add_argument('--ansible-core', help='ansible-core version (default: the floor of meta/runtime.yml)')
    parser.add_argument('--libraries', choices=('floors', 'pinned'), default='floors',
                        help="the modules' libraries at their declared floors, or as requirements-dev.txt pins them")
    parser.add_argument('--stage', default='min-versions', help='the name its messages start with')
    parser.add_argument('--print', action='store_true', help='print the requirement lines and stop')
    args = parser.parse_args()

    lines, floors = requirement_lines(args.ee_requirements, args.dev_requirements)
    if args.libraries == 'pinned':
        lines = ['%s==%s' % (name, version) for key, name, version in read_requirements(args.dev_requirements, '==')
                 if key not in NOT_NEEDED]
        floors = []
    core = args.ansible_core or ansible_core_floor(args.runtime)
    lines = with_ansible_core(lines, core)
    floors = floors + [('ansible-core', 'ansible-core', core)]
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
        sys.stdout.write('%s: venv up to date (%s)\n' % (args.stage, os.path.relpath(args.venv, ROOT)))
    else:
        if not os.access(python, os.X_OK):
            sys.stdout.write('%s: creating %s\n' % (args.stage, os.path.relpath(args.venv, ROOT)))
            # sys.executable is .venv's python; venv builds the new one on the same base interpreter
            subprocess.check_call([sys.executable, '-m', 'venv', args.venv])
        requirements = os.path.join(os.path.dirname(args.venv), 'requirements.txt')
        with open(requirements, 'w') as handle:
            handle.write(wanted)
        sys.stdout.write('%s: installing %s\n' % (args.stage, ' '.join(
            line for line in lines if canonical(line.split('==')[0]) in [key for key, _n, _v in floors])))
        sys.stdout.flush()
        subprocess.check_call([python, '-m', 'pip', 'install', '-q', '--disable-pip-version-check',
                               '-r', requirements])
        with open(stamp, 'w') as handle:
            handle.write(digest + '\n')
    versions = installed_versions(python, [name for _key, name, _version in floors])
    wrong = ['%s %s (asked for %s)' % (name, versions[name], version)
             for _key, name, version in floors if versions[name] != version]
    if wrong:
        raise SystemExit('%s: installed versions are not the ones asked for: %s' % (args.stage, ', '.join(wrong)))
    sys.stdout.write('%s: testing with %s\n' % (args.stage, ', '.join(
        '%s %s' % (name, versions[name]) for _key, name, _version in floors)))
    if args.libraries == 'floors' and 'urllib3' not in versions:
        sys.stdout.write('%s: meta/ee-requirements.txt declares no urllib3 floor; urllib3 %s came with them\n'
                         % (args.stage, installed_versions(python, ['urllib3'])['urllib3']))
    return 0


if __name__ == '__main__':
    sys.exit(main())
