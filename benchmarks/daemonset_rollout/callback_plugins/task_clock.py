# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: task_clock
type: aggregate
short_description: Record the wall-clock time each task returned, for the daemonset_rollout benchmark
description:
  - Appends one JSON line per finished task (name, status, time.time() when the result arrived, the result)
    to the file named by E(TASK_CLOCK_FILE).
"""

import json
import os
import time

from ansible.module_utils.common.json import AnsibleJSONEncoder
from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "task_clock"
    CALLBACK_NEEDS_ENABLED = True

    def _record(self, status, result):
        path = os.environ.get("TASK_CLOCK_FILE")
        if not path:
            return
        data = getattr(result, "result", None)
        if not hasattr(data, "items"):
            data = result._result
        line = {"returned_at": time.time(), "task": result.task_name or result._task.get_name(),
                "status": status, "result": dict(data)}
        with open(path, "a") as f:
            f.write(json.dumps(line, cls=AnsibleJSONEncoder, sort_keys=True) + "\n")

    def v2_runner_on_ok(self, result):
        self._record("ok", result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._record("failed", result)
