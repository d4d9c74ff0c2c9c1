# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test equipment for the molecule scenarios: keep what each run of a scenario playbook did, so a
verify step can assert on molecule's own converge, idempotence and check runs instead of running
the roles once more (each run of a role costs tens of CPU seconds)."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
name: kubehw_molecule_runs
type: aggregate
short_description: Record each playbook run of a molecule scenario as JSON, for its verify step
description:
  - At the end of every ansible-playbook run started under molecule (E(MOLECULE_EPHEMERAL_DIRECTORY)
    set), writes C(runs/<playbook>-<run|check>.json) in that directory, replacing the previous run of
    the same playbook and mode, so C(converge-run.json) is what the latest converge or idempotence run
    did, and C(converge-check.json) what the check run did.
  - The document has the shape of the ansible.posix.json callback's (C(plays[].tasks[].task.name),
    C(plays[].tasks[].hosts.<host>), C(stats)), holding per host only C(changed), C(skipped),
    C(failed) and C(msg), plus C(check) and C(sequence) (how many runs of that playbook and mode the
    scenario has made, so a verify step can tell the idempotence run, the second, from the first).
requirements:
  - enabled in C(callbacks_enabled) of the scenario's molecule.yml
"""

import json
import os

from ansible import context
from ansible.plugins.callback import CallbackBase

# Only these keys are kept: enough to assert on, and never a module's secret or a file's content.
_KEPT = ('changed', 'skipped', 'failed', 'msg')


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'aggregate'
    CALLBACK_NAME = 'kubehw_molecule_runs'
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self._dir = os.environ.get('MOLECULE_EPHEMERAL_DIRECTORY')
        self._playbook = None
        self._tasks = []
        self._by_uuid = {}

    def v2_playbook_on_start(self, playbook):
        self._playbook = os.path.splitext(os.path.basename(playbook._file_name))[0]

    def _record(self, result, status):
        task = result._task
        entry = self._by_uuid.get(task._uuid)
        if entry is None:
            entry = self._by_uuid[task._uuid] = {'task': {'name': task.get_name()}, 'hosts': {}}
            self._tasks.append(entry)
        data = getattr(result, 'result', None)
        if not hasattr(data, 'items'):
            data = result._result
        kept = dict((key, data[key]) for key in _KEPT if key in data)
        kept['failed'] = status == 'failed'
        if status == 'skipped':
            kept['skipped'] = True
        entry['hosts'][result._host.get_name()] = kept

    def v2_runner_on_ok(self, result, **kwargs):
        self._record(result, 'ok')

    def v2_runner_on_failed(self, result, ignore_errors=False, **kwargs):
        self._record(result, 'failed')

    def v2_runner_on_skipped(self, result, **kwargs):
        self._record(result, 'skipped')

    def v2_runner_on_unreachable(self, result, **kwargs):
        self._record(result, 'unreachable')

    def v2_playbook_on_stats(self, stats):
        # create and destroy are molecule's machinery, not runs of the roles.
        if not self._dir or self._playbook in (None, 'create', 'destroy'):
            return
        check = bool(context.CLIARGS.get('check'))
        runs = os.path.join(self._dir, 'runs')
        path = os.path.join(runs, '%s-%s.json' % (self._playbook, 'check' if check else 'run'))
        sequence = 1
        if os.path.exists(path):
            with open(path) as handle:
                sequence = json.load(handle).get('sequence', 0) + 1
        if not os.path.isdir(runs):
            os.makedirs(runs)
        document = {
            'check': check,
            'sequence': sequence,
            'plays': [{'tasks': self._tasks}],
            'stats': dict((host, stats.summarize(host)) for host in sorted(stats.processed)),
        }
        with open(path + '.tmp', 'w') as handle:
            json.dump(document, handle, indent=1, sort_keys=True, default=str)
        os.rename(path + '.tmp', path)
