# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from fractions import Fraction

import pytest

from ansible_collections.kubehw.devices.plugins.module_utils._errors import InputRefused
from ansible_collections.kubehw.devices.plugins.module_utils._extended_resources import (
    apply_patch,
    capacity_pointer,
    changed_resources,
    check_exact_scope,
    compute_patch,
    diff_for,
    escape_pointer,
    extended_resource_name_problem,
    normalize_resources,
    parse_quantity,
    same_quantity,
    unescape_pointer,
    validate_scope,
    whole_quantity,
)
from ansible_collections.kubehw.devices.plugins.module_utils._k8s_names import node_target_problem

VALID_NAMES = [
    "example.com/dongle",
    "nvidia.com/gpu",
    "amd.com/gpu",
    "gpu.intel.com/i915",
    "squat.ai/fuse",
    "example.com/Dongle_X",
    "example.com/a",
    "example.com/9",
    "example.com/a.b-c_d",
    "a/b",
    "1.2.3.4/x",
    "kubernetes.io.example.com/x",
    "example.com/" + "x" * 63,
    # requests.<domain> must stay within 253 characters: 244 is the longest domain that fits
    ".".join(["a" * 60] * 3 + ["a" * 61]) + "/x",
]

INVALID_NAMES = [
    ("dongle", "exactly one '/'"),
    ("a/b/c", "exactly one '/'"),
    ("", "exactly one '/'"),
    ("example.com/", "must not be empty"),
    ("/dongle", "domain part"),
    ("kubernetes.io/foo", "reserved"),
    ("foo.kubernetes.io/bar", "reserved"),
    # Kubernetes' IsPrefixedNativeResource: any name containing "kubernetes.io/" is native
    ("my-kubernetes.io/x", "reserved"),
    # the whole string must match: Python's "$" would accept a final newline
    ("example.com/x\n", "letters, digits"),
    ("example.com\n/x", "lowercase"),
    ("example.com/x ", "letters, digits"),
    ("example.com/x\t", "letters, digits"),
    ("example.com/d\u00f6ngle", "letters, digits"),
    ("Example.com/dongle", "lowercase"),
    ("-bad.com/x", "lowercase"),
    ("bad-.com/x", "lowercase"),
    ("exa_mple.com/x", "lowercase"),
    ("example..com/x", "lowercase"),
    ("example.com/bad name", "letters, digits"),
    ("example.com/-x", "start and end"),
    ("example.com/x-", "start and end"),
    ("example.com/x.", "start and end"),
    ("example.com/" + "x" * 64, "no more than 63"),
    ("requests.example.com/dongle", "requests."),
    ("a" * 254 + "/x", "no more than 253"),
    # fits as a domain (245 characters) but requests.<domain> is 254
    (".".join(["a" * 60] * 3 + ["a" * 62]) + "/x", "quota name"),
    (4, "must be a string"),
]


@pytest.mark.parametrize("name", VALID_NAMES)
def test_valid_names(name):
    assert extended_resource_name_problem(name) is None


@pytest.mark.parametrize("name,rule", INVALID_NAMES)
def test_invalid_names(name, rule):
    problem = extended_resource_name_problem(name)
    assert problem is not None
    assert rule in problem


def test_boundary_domain_lengths_match_the_table():
    assert len(".".join(["a" * 60] * 3 + ["a" * 61])) == 244
    assert len("requests." + ".".join(["a" * 60] * 3 + ["a" * 62])) == 254


QUANTITIES = [
    (4, 4),
    (0, 0),
    ("4", 4),
    ("0", 0),
    ("+4", 4),
    ("4.0", 4),
    ("4.", 4),
    ("1Ki", 1024),
    ("2Mi", 2 * 2 ** 20),
    ("1Gi", 2 ** 30),
    ("1Ti", 2 ** 40),
    ("1Pi", 2 ** 50),
    ("2k", 2000),
    ("3M", 3000000),
    ("1G", 10 ** 9),
    ("1T", 10 ** 12),
    ("1P", 10 ** 15),
    ("1.5k", 1500),
    ("0.5Ki", 512),
    ("4000m", 4),
    ("4000000u", 4),
    ("4000000000n", 4),
    ("1e3", 1000),
    ("1E3", 1000),
    ("15e-1", Fraction(3, 2)),  # parses; whole_quantity refuses it below
    ("1.5e1", 15),
    ("1e+2", 100),
    (".5e1", 5),
    (4.0, 4),
]


@pytest.mark.parametrize("value,expected", [q for q in QUANTITIES if not isinstance(q[0], (int, float))])
def test_parse_quantity(value, expected):
    assert parse_quantity(value) == expected


@pytest.mark.parametrize("value,expected", [q for q in QUANTITIES if Fraction(q[1]).denominator == 1])
def test_whole_quantity_valid(value, expected):
    assert whole_quantity(value) == expected
    assert isinstance(whole_quantity(value), int)


INVALID_QUANTITIES = [
    ("4.5", "whole numbers"),
    ("500m", "whole numbers"),
    ("15e-1", "whole numbers"),
    ("1n", "whole numbers"),
    (4.5, "whole numbers"),
    ("-1", "greater than or equal to 0"),
    (-1, "greater than or equal to 0"),
    ("-1Ki", "greater than or equal to 0"),
    ("abc", "must match"),
    ("", "empty"),
    (" 4", "must match"),
    ("4 ", "must match"),
    # the whole string must match: Python's "$" would accept a final newline
    ("4\n", "must match"),
    ("1Ki\n", "must match"),
    ("1e3\n", "must match"),
    ("\u0664", "must match"),  # ARABIC-INDIC DIGIT FOUR: a digit to str.isdigit, not to Kubernetes
    ("1K", "unknown suffix"),
    ("1KiB", "must match"),
    ("1mi", "unknown suffix"),
    ("1e", "unknown suffix"),
    ("1.2.3", "unknown suffix"),
    (".", "bad number"),
    ("1e1000", "out of range"),
    ("1Ei", None),
    ("1E", None),  # 1 exa: valid quantity but too large for the apiserver's milli-value check
    (True, "non-negative whole"),
    (None, "non-negative whole"),
    ([4], "must be a number or a string"),
    (float("nan"), "finite"),
]


@pytest.mark.parametrize("value,rule", INVALID_QUANTITIES)
def test_whole_quantity_invalid(value, rule):
    with pytest.raises(InputRefused) as exc:
        whole_quantity(value, key="example.com/dongle")
    assert "example.com/dongle" in str(exc.value)
    assert (rule or "at most") in str(exc.value)


def test_the_table_has_at_least_thirty_names_and_quantities():
    assert len(VALID_NAMES) + len(INVALID_NAMES) >= 30
    assert len(QUANTITIES) + len(INVALID_QUANTITIES) >= 30


@pytest.mark.parametrize("stored,wanted,same", [
    ("1Ki", 1024, True),
    ("1k", 1000, True),
    ("1000", 1000, True),
    ("4", 4, True),
    ("4000m", 4, True),
    (4, 4, True),
    ("4", 5, False),
    ("1Ki", 1000, False),
    ("garbage", 4, False),
    (None, 0, False),
    (True, 1, False),
])
def test_same_quantity_compares_by_value(stored, wanted, same):
    assert same_quantity(stored, wanted) is same


@pytest.mark.parametrize("token,escaped", [
    ("example.com/dongle", "example.com~1dongle"),
    ("a~b", "a~0b"),
    ("a~1b", "a~01b"),
    ("~/", "~0~1"),
    ("/~", "~1~0"),
    ("plain", "plain"),
])
def test_rfc6901_escaping_round_trips(token, escaped):
    assert escape_pointer(token) == escaped
    assert unescape_pointer(escaped) == token


def test_capacity_pointer():
    assert capacity_pointer("example.com/dongle") == "/status/capacity/example.com~1dongle"


NODE = {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "110", "example.com/dongle": "4",
                     "example.com/other": "1", "nvidia.com/gpu": "2"}}


def test_present_no_change_when_equal_by_value():
    status = {"capacity": {"cpu": "4", "example.com/dongle": "1Ki"}}
    assert compute_patch(status, {"example.com/dongle": 1024}, "present") == []


def test_present_adds_new_key_without_test():
    ops = compute_patch(NODE, {"example.com/widget": 2}, "present")
    assert ops == [{"op": "add", "path": "/status/capacity/example.com~1widget", "value": "2"}]


def test_present_update_is_guarded_by_test_of_read_value():
    ops = compute_patch(NODE, {"example.com/dongle": 6}, "present")
    assert ops == [
        {"op": "test", "path": "/status/capacity/example.com~1dongle", "value": "4"},
        {"op": "replace", "path": "/status/capacity/example.com~1dongle", "value": "6"},
    ]


def test_present_never_touches_other_keys():
    ops = compute_patch(NODE, {"example.com/dongle": 6, "example.com/new": 1}, "present")
    touched = set(op["path"] for op in ops)
    assert touched == {"/status/capacity/example.com~1dongle", "/status/capacity/example.com~1new"}


def test_missing_capacity_map_is_created_whole_in_one_add():
    ops = compute_patch({"conditions": []}, {"example.com/dongle": 4, "example.com/b": 1}, "present",
                        resource_version="42")
    assert ops == [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "42"},
        {"op": "add", "path": "/status/capacity", "value": {"example.com/b": "1", "example.com/dongle": "4"}},
    ]


def test_missing_status_is_created_whole():
    ops = compute_patch(None, {"example.com/dongle": 4}, "present")
    assert ops == [{"op": "add", "path": "/status", "value": {"capacity": {"example.com/dongle": "4"}}}]


def test_absent_on_missing_map_or_missing_key_is_a_no_op():
    assert compute_patch({}, {"example.com/dongle": None}, "absent") == []
    assert compute_patch(NODE, {"example.com/nothere": None}, "absent") == []


def test_absent_removes_with_test_guard():
    ops = compute_patch(NODE, {"example.com/dongle": None}, "absent")
    assert ops == [
        {"op": "test", "path": "/status/capacity/example.com~1dongle", "value": "4"},
        {"op": "remove", "path": "/status/capacity/example.com~1dongle"},
    ]


def test_exact_removes_unlisted_keys_only_in_its_domain():
    ops = compute_patch(NODE, {"example.com/dongle": 4}, "exact", domains=["example.com"])
    assert ops == [
        {"op": "test", "path": "/status/capacity/example.com~1other", "value": "1"},
        {"op": "remove", "path": "/status/capacity/example.com~1other"},
    ]


def test_exact_with_prefix_scope():
    status = {"capacity": {"example.com/dongle-a": "1", "example.com/dongle-b": "1", "example.com/keep": "1"}}
    ops = compute_patch(status, {"example.com/dongle-a": 2}, "exact", prefixes=["example.com/dongle-"])
    assert {(op["op"], op["path"]) for op in ops} == {
        ("test", "/status/capacity/example.com~1dongle-a"),
        ("replace", "/status/capacity/example.com~1dongle-a"),
        ("test", "/status/capacity/example.com~1dongle-b"),
        ("remove", "/status/capacity/example.com~1dongle-b"),
    }


def test_exact_with_empty_resources_clears_the_domain():
    ops = compute_patch(NODE, {}, "exact", domains=["example.com"])
    assert [op["op"] for op in ops] == ["test", "remove", "test", "remove"]
    assert all("nvidia.com" not in op["path"] for op in ops)


def test_exact_domain_does_not_match_subdomains_or_lookalikes():
    status = {"capacity": {"gpu.example.com/x": "1", "example.com.evil/x": "1", "example.com/x": "1"}}
    ops = compute_patch(status, {}, "exact", domains=["example.com"])
    assert [op["path"] for op in ops if op["op"] == "remove"] == ["/status/capacity/example.com~1x"]


def test_key_with_tilde_is_escaped_in_ops():
    status = {"capacity": {"example.com/a~b": "1"}}
    ops = compute_patch(status, {"example.com/a~b": 2}, "present")
    assert ops[1]["path"] == "/status/capacity/example.com~1a~0b"


def test_unparseable_stored_value_is_replaced():
    status = {"capacity": {"example.com/dongle": "junk"}}
    ops = compute_patch(status, {"example.com/dongle": 4}, "present")
    assert ops[0] == {"op": "test", "path": "/status/capacity/example.com~1dongle", "value": "junk"}


def test_apply_patch_predicts_result_and_leaves_input_alone():
    before = {"metadata": {"name": "n1", "resourceVersion": "7"}, "status": {"capacity": dict(NODE["capacity"])}}
    ops = compute_patch(before["status"], {"example.com/dongle": 6, "example.com/new": 1}, "present")
    after = apply_patch(before, ops)
    assert after["status"]["capacity"]["example.com/dongle"] == "6"
    assert after["status"]["capacity"]["example.com/new"] == "1"
    assert after["status"]["capacity"]["cpu"] == "4"
    assert before["status"] == {"capacity": dict(NODE["capacity"])}
    bare = {"metadata": {"name": "n1", "resourceVersion": "7"}, "status": {}}
    ops = compute_patch(bare["status"], {"example.com/d": 1}, "present", resource_version="7")
    assert apply_patch(bare, ops)["status"] == {"capacity": {"example.com/d": "1"}}


def test_apply_patch_evaluates_test_operations():
    node = {"metadata": {"resourceVersion": "7"}, "status": {"capacity": {"example.com/dongle": "4"}}}
    ops = compute_patch(node["status"], {"example.com/dongle": 6}, "present")
    node["status"]["capacity"]["example.com/dongle"] = "5"  # someone changed it since the ops were computed
    with pytest.raises(InputRefused) as err:
        apply_patch(node, ops)
    assert "does not apply" in str(err.value)


def test_diff_shows_only_managed_keys():
    diff = diff_for(NODE["capacity"], {"example.com/dongle": 6}, "present")
    assert diff == {"before": {"example.com/dongle": "4"}, "after": {"example.com/dongle": "6"}}
    diff = diff_for(NODE["capacity"], {"example.com/dongle": 4}, "exact", domains=["example.com"])
    assert diff == {"before": {"example.com/dongle": "4", "example.com/other": "1"},
                    "after": {"example.com/dongle": "4"}}
    diff = diff_for(NODE["capacity"], {"example.com/dongle": None}, "absent")
    assert diff == {"before": {"example.com/dongle": "4"}, "after": {}}
    # an equal value keeps its stored spelling in "after", so before == after
    diff = diff_for({"example.com/dongle": "1Ki"}, {"example.com/dongle": 1024}, "present")
    assert diff["before"] == diff["after"]


def test_changed_resources_lists_removed_and_changed_not_added():
    assert changed_resources(NODE["capacity"], {"example.com/dongle": 6, "example.com/new": 1}, "present") == [
        "example.com/dongle"]
    assert changed_resources(NODE["capacity"], {"example.com/dongle": 4}, "exact", domains=["example.com"]) == [
        "example.com/other"]


def test_normalize_resources():
    assert normalize_resources({"example.com/dongle": "1Ki"}, "present") == {"example.com/dongle": 1024}
    assert normalize_resources(["example.com/dongle"], "absent") == {"example.com/dongle": None}
    assert normalize_resources({"example.com/dongle": None}, "absent") == {"example.com/dongle": None}
    assert normalize_resources({}, "exact") == {}
    with pytest.raises(InputRefused, match="kubernetes.io"):
        normalize_resources({"example.com/ok": 1, "kubernetes.io/x": 1}, "present")
    with pytest.raises(InputRefused, match="only accepted for state=absent"):
        normalize_resources(["example.com/dongle"], "present")
    with pytest.raises(InputRefused, match="must not be empty"):
        normalize_resources({}, "present")
    with pytest.raises(InputRefused, match="'example.com/dongle'.*'4.5'|'4.5'.*example.com/dongle"):
        normalize_resources({"example.com/dongle": "4.5"}, "present")


def test_scope_validation():
    assert validate_scope("example.com".split(","), None) == (["example.com"], [])
    with pytest.raises(InputRefused, match="needs domain or managed_prefixes"):
        validate_scope(None, None)
    with pytest.raises(InputRefused, match="native"):
        validate_scope(["kubernetes.io"], None)
    with pytest.raises(InputRefused, match="managed prefix"):
        validate_scope(None, ["example"])
    with pytest.raises(InputRefused, match="managed prefix"):
        validate_scope(None, ["Bad.com/"])
    with pytest.raises(InputRefused, match="outside the declared"):
        check_exact_scope({"nvidia.com/gpu": 1}, ["example.com"], [])
    check_exact_scope({"example.com/gpu": 1}, ["example.com"], [])


@pytest.mark.parametrize("domains,prefixes,rule", [
    (["example.com\n"], None, "lowercase"),
    ([""], None, "must not be empty"),
    (["my-kubernetes.io"], None, "native"),
    (None, ["example.com/dongle\n"], "start of a name"),
    (None, ["example.com/-x"], "start of a name"),
    (None, ["example.com/x y"], "start of a name"),
    (None, ["example.com\n/x"], "lowercase"),
])
def test_scope_values_must_match_whole(domains, prefixes, rule):
    with pytest.raises(InputRefused, match=rule):
        validate_scope(domains, prefixes)


def test_scope_prefix_may_be_a_name_start():
    assert validate_scope(None, ["example.com/", "example.com/dongle-", "example.com/a_b."]) == (
        [], ["example.com/", "example.com/dongle-", "example.com/a_b."])


TARGETS_REFUSED = [
    ({}, "no target"),
    ({"all_nodes": False}, "no target"),
    ({"name": ""}, "must not be empty or blank"),
    ({"name": "  "}, "must not be empty or blank"),
    ({"name": "node-1\n"}, "DNS subdomain"),
    ({"name": "Node-1"}, "DNS subdomain"),
    ({"name": "a" * 254}, "no more than 253"),
    ({"names": []}, "empty list"),
    ({"names": ["n1", ""]}, "names[1]"),
    ({"names": ["n1", " "]}, "must not be empty or blank"),
    ({"names": ["n1\n"]}, "DNS subdomain"),
    ({"names": [None]}, "must be a string"),
    ({"label_selectors": []}, "empty list"),
    ({"label_selectors": [""]}, "empty selector matches every object"),
    ({"label_selectors": ["  "]}, "must not be empty or blank"),
    ({"label_selectors": ["a=b", ""]}, "label_selectors[1]"),
    ({"label_selectors": ["a=b\n"]}, "control characters"),
    ({"label_selectors": ["a=b,"]}, "empty term"),
    ({"label_selectors": [",a=b"]}, "empty term"),
    ({"field_selectors": []}, "empty list"),
    ({"field_selectors": [""]}, "empty selector"),
    ({"field_selectors": ["metadata.name=n1\t"]}, "control characters"),
    ({"all_nodes": True, "name": "n1"}, "cannot be combined with name"),
    ({"all_nodes": True, "label_selectors": []}, "cannot be combined with label_selectors"),
]


@pytest.mark.parametrize("params,rule", TARGETS_REFUSED)
def test_node_targets_refused(params, rule):
    problem = node_target_problem(dict(params))
    assert problem is not None and rule in problem, problem


@pytest.mark.parametrize("params", [
    {"name": "n1"},
    {"name": "node-1.example.com"},
    {"names": ["n1", "n2"]},
    {"label_selectors": ["kubehw-it/pool=many", "a!=b"]},
    {"field_selectors": ["metadata.name=n1"]},
    {"label_selectors": ["a=b"], "field_selectors": ["metadata.name=n1"]},
    {"all_nodes": True},
])
def test_node_targets_accepted(params):
    assert node_target_problem(params) is None
