# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The runtime drop-in filters give, for every recorded input, what the role's drop-ins were before.

recorded/dropins.json holds, per case of dropin_cases.py, the result (or the error message) of the
scripts the role ran through the pipe lookup before these filters replaced them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import json
import os
import subprocess
import sys

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.kubehw.devices.plugins.filter import runtime_dropins

from tests.unit.plugins.filter import dropin_cases

CASES = dropin_cases.cases()
OLD_SCRIPTS = os.path.join(dropin_cases.HERE, "..", "..", "..", "..", "roles", "nvidia_container_toolkit", "files")


def run_filter(name, data, kwargs):
    """The filter's result as the role saw the script's: through JSON, or {"error": message}."""
    try:
        result = runtime_dropins.FilterModule().filters()[name](data, **kwargs)
    except AnsibleFilterError as exc:
        return {"error": exc.message}
    return {"result": json.loads(json.dumps(result))}


def run_old_script(name, data, kwargs):
    """The script the role ran, with the request the role built (containerd: systemd_cgroup only when set)."""
    options = dict(kwargs)
    if name == "containerd_nvidia_dropin":
        script = "containerd_dropin.py"
        if options.get("systemd_cgroup") is None:
            options.pop("systemd_cgroup", None)
        request = {"dump": data, "options": options}
    else:
        script = "crio_dropin.py"
        status = options.pop("status")
        request = {"paths": [item["path"] for item in data], "contents": [item["content"] for item in data],
                   "status": status, "options": options}
    encoded = base64.b64encode(json.dumps(request).encode("utf-8")).decode("ascii")
    out = subprocess.run([sys.executable, os.path.join(OLD_SCRIPTS, script), encoded], stdout=subprocess.PIPE,
                         check=True).stdout
    answer = json.loads(out)
    if answer.pop("failed"):
        return {"error": answer["msg"]}
    answer.pop("msg")
    return {"result": answer}


@pytest.fixture(scope="module")
def recorded():
    with open(dropin_cases.RECORDED, encoding="utf-8") as handle:
        return json.load(handle)


def test_every_case_is_recorded_and_the_cases_cover_both_versions_and_errors(recorded):
    assert sorted(recorded) == sorted(case[0] for case in CASES)
    versions = set(r["result"]["dump_version"] for r in recorded.values() if "dump_version" in r.get("result", {}))
    assert versions == {2, 3}
    assert sum(1 for r in recorded.values() if "error" in r) == \
        len(dropin_cases.CONTAINERD_ERRORS) + len(dropin_cases.CRIO_ERRORS)


@pytest.mark.parametrize("case_id, name, data, kwargs", CASES, ids=[case[0] for case in CASES])
def test_filter_gives_the_recorded_result(recorded, case_id, name, data, kwargs):
    assert run_filter(name, data, kwargs) == recorded[case_id]


@pytest.mark.skipif(not os.path.isdir(OLD_SCRIPTS), reason="the role's old drop-in scripts are gone")
@pytest.mark.parametrize("case_id, name, data, kwargs", CASES, ids=[case[0] for case in CASES])
def test_filter_gives_what_the_old_script_gave(recorded, case_id, name, data, kwargs):
    old = run_old_script(name, data, kwargs)
    assert old == recorded[case_id]
    assert run_filter(name, data, kwargs) == old
