# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: kubehw_results
type: aggregate
short_description: Write every task result as one JSON line, with when the task started and returned
description:
  - Test equipment of the integration tests, the benchmarks and C(make demo) (tests/support/playbook_runner.py
    enables it).
  - Appends one JSON object per finished task and host (ok, failed, skipped, unreachable) to the file named by the
    E(KUBEHW_RESULTS_FILE) environment variable. Each is the task's result with C(task) (its name), C(_host), C(_outcome),
    C(_started_at) (time.time() when the task started) and C(_returned_at) (time.time() when this result reached
    ansible-playbook) added, and C(failed) set as in a registered variable.
  - Needs only ansible-core, so results are read the same way whatever the stdout callback is.
requirements:
  - enabled in C(callbacks_enabled) (the runner sets E(ANSIBLE_CALLBACKS_ENABLED))
"""

import json
import os
import time

from ansible.module_utils.common.json import AnsibleJSONEncoder
from ansible.plugins.callback import CallbackBase


def _result_dict(result):
    # ansible-core 2.19 adds the public .result; older versions only have ._result
    data = getattr(result, "result", None)
    if not hasattr(data, "items"):
        data = result._result
    return dict(data)


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "kubehw_results"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self._path = os.environ.get("KUBEHW_RESULTS_FILE")
        self._started = {}

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._started[task._uuid] = time.time()

    def v2_playbook_on_handler_task_start(self, task):
        self._started[task._uuid] = time.time()

    def _record(self, status, result, ignore_errors=False):
        returned_at = time.time()
        if not self._path:
            return
        data = _result_dict(result)
        # the keys a registered variable has; ansible-core 2.19 keeps them out of the callback's copy
        data["failed"] = status == "failed"
        if status in ("skipped", "unreachable"):
            data[status] = True
        if ignore_errors:
            data["ignore_errors"] = True
        # underscore names, so they cannot hide a module's own return values (e.g. "status")
        data["task"] = result.task_name or result._task.get_name()
        data["_host"] = result._host.get_name()
        data["_outcome"] = status
        data["_started_at"] = self._started.get(result._task._uuid)
        data["_returned_at"] = returned_at
        line = json.dumps(data, cls=AnsibleJSONEncoder, sort_keys=True)
        with open(self._path, "a") as f:
            f.write(line + "\n")

    def v2_runner_on_ok(self, result):
        self._record("ok", result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._record("failed", result, ignore_errors)

    def v2_runner_on_skipped(self, result):
        self._record("skipped", result)

    def v2_runner_on_unreachable(self, result):
        self._record("unreachable", result)
