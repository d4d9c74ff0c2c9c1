# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The runtime drop-in filters give, for every recorded input, the drop-in the role wrote before them.

recorded/dropins.json holds, per case of dropin_cases.py, the result (or the error message) of the
Python scripts the nvidia_container_toolkit role ran through the pipe lookup before these filters
replaced them. Both gave the same for every case when the filters came in; the scripts are gone.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.kubehw.devices.plugins.filter import runtime_dropins

from tests.unit.plugins.filter import dropin_cases

CASES = dropin_cases.cases()


def run_filter(name, data, kwargs):
    """The filter's result as the role saw the script's (through JSON), or {"error": message}."""
    try:
        result = runtime_dropins.FilterModule().filters()[name](data, **kwargs)
    except AnsibleFilterError as exc:
        return {"error": exc.message}
    return {"result": json.loads(json.dumps(result))}


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
