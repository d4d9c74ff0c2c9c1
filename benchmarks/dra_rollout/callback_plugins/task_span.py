# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: task_span
type: aggregate
short_description: Record when each task started and returned, for the dra_rollout benchmark
description:
  - Appends one JSON line per finished task (name, status, time.time() when the task started and when its result
    arrived, retries used) to the file named by E(TASK_SPAN_FILE).
"""

import json
import os
import time

from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "task_span"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self._started = {}

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._started[task._uuid] = time.time()

    def _record(self, status, result):
        path = os.environ.get("TASK_SPAN_FILE")
        if not path:
            return
        data = result._result
        line = {"task": result._task.get_name(), "status": status,
                "started_at": self._started.get(result._task._uuid), "returned_at": time.time(),
                "attempts": data.get("attempts"), "failed": bool(data.get("failed")),
                "msg": data.get("msg") if data.get("failed") else None}
        with open(path, "a") as f:
            f.write(json.dumps(line) + "\n")

    def v2_runner_on_ok(self, result):
        self._record("ok", result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._record("failed", result)
