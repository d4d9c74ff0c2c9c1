# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The row registry of the fidelity probes, and the helpers the probes of every topic use.

A topic module (nodes.py, pods.py, ...) registers each probe with @row on import; ROWS keeps them in the order
they were registered, which tests/integration/test_facts.py parametrizes test_fact with."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from tests.integration.facts.clusters import JSON_PATCH

GENERIC_422 = "the server rejected our request due to an error in our request"

ROWS = []


def row(row_id, expect, controllers=False, known_difference=None):
    """Register probe(target) -> observation; expect: the row's observation (a dict), or a callable check.

    controllers: the row is about what a controller or the scheduler does, so the simulated half runs on a
    simulated cluster with its controllers (the real control plane always has them).
    known_difference: the simulated cluster is known to answer differently in a file of the lead engineer's
    (controllers.py): the row's sim half and comparison are expected to fail (strict: a fix makes them XPASS)."""
    def register(probe):
        probe.controllers = controllers
        probe.known_difference = known_difference
        probe.row_id = row_id
        ROWS.append(pytest.param(probe, expect, id=row_id))
        return probe
    return register


def status_fields(body, *extra):
    """code, reason, message (and details when asked) of a Status body."""
    if not isinstance(body, dict):
        return {"body": body}
    out = {"kind": body.get("kind"), "reason": body.get("reason"), "message": body.get("message")}
    for key in extra:
        out[key] = body.get(key)
    return out


def answer(code, body, *extra):
    out = status_fields(body, *extra)
    out["code"] = code
    return out


def patch_status(t, node, ops, sub="/status", content_type=JSON_PATCH):
    return t.req("PATCH", "/api/v1/nodes/%s%s" % (node, sub), ops, content_type)[:2]


def generic(code=422):
    return {"code": code, "kind": "Status", "reason": "Invalid", "message": GENERIC_422, "details": {}}


DONGLE = "/status/capacity/example.com~1dongle"


def pod_body(name, resources=None, **spec):
    """A pod; one that names neither a node nor a node selector gets a selector no node matches, so a real
    scheduler leaves it unbound even where other probes' Ready nodes exist."""
    container = {"name": "c", "image": "registry.example/pause:1"}
    if resources is not None:
        container["resources"] = resources
    if "nodeName" not in spec and "nodeSelector" not in spec:
        spec["nodeSelector"] = {"kubehw-facts.example.com/never": "scheduled"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": dict({"containers": [container]}, **spec)}


def create_pod(t, body, query=""):
    code, answer_body, _headers = t.req("POST", "/api/v1/namespaces/%s/pods%s" % (t.namespace, query), body)
    if code in (200, 201):
        t.later("DELETE", "/api/v1/namespaces/%s/pods/%s?gracePeriodSeconds=0" % (t.namespace, answer_body["metadata"]["name"]))
    return code, answer_body
