# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test equipment for the molecule scenarios: parse TOML on the controller, so verify steps
compare data rather than grep text (Ansible has no TOML filter).

stdin: a JSON object whose values are TOML documents (strings); stdout: the same object with
each document parsed. A document that is not valid TOML ends the run with exit code 1 and the
parser's message on stderr, so the verify step that asked fails.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import sys
import tomllib


def main():
    documents = json.load(sys.stdin)
    parsed = {}
    for name, text in documents.items():
        try:
            parsed[name] = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            sys.stderr.write('%s is not valid TOML: %s\n' % (name, exc))
            return 1
    # default=str: TOML dates and times have no JSON type; containerd's files hold none.
    sys.stdout.write(json.dumps(parsed, default=str) + '\n')
    return 0


if __name__ == '__main__':
    sys.exit(main())
