# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""k8s_node_extended_resource reads selected nodes page by page and patches while it reads.

A fake list_node that pages as the apiserver does (limit, continue, a 410 for an expired token);
the page size is made small so a handful of nodes spans several pages.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

import pytest

from ansible_collections.kubehw.devices.plugins.module_utils._errors import KubeHwError
from ansible_collections.kubehw.devices.plugins.modules import k8s_node_extended_resource as mod
from tests.unit.plugins.modules.test_k8s_node_extended_resource import FakeClient, FakeCore, make_node, run

NAMES = ["p%d" % i for i in range(5)]


class PagedCore(FakeCore):
    def __init__(self, nodes):
        super(PagedCore, self).__init__(nodes)
        self.expire_tokens = 0      # how many continue tokens to answer with 410
        self.fail_page = None       # page number (1-based) to answer with this error

    def list_node(self, label_selector=None, field_selector=None, limit=None, _continue=None, **kw):
        self.calls.append(("LIST", label_selector, _continue))
        start = int(_continue) if _continue else 0
        page_number = start // limit + 1
        if _continue and self.expire_tokens:
            self.expire_tokens -= 1
            raise KubeHwError("Failed to list nodes: 410 Gone: The provided continue parameter is too old",
                              status=410, reason="Expired")
        if self.fail_page == page_number:
            raise KubeHwError("Failed to list nodes: 403 Forbidden", status=403, reason="Forbidden")
        names = sorted(self.nodes)
        items = [copy.deepcopy(self.nodes[n]) for n in names[start:start + limit]]
        meta = {"resourceVersion": str(self.rv)}
        if start + limit < len(names):
            meta["continue"] = str(start + limit)
        return {"kind": "NodeList", "metadata": meta, "items": items}


class PagedClient(FakeClient):
    retry_deadline = 45  # KubeClient's: how long a list may keep restarting


@pytest.fixture
def core(monkeypatch):
    fake = PagedCore([make_node(n, {"cpu": "8"}, labels={"pool": "x"}) for n in NAMES])
    PagedClient.api = fake
    monkeypatch.setattr(mod, "KubeClient", PagedClient)
    monkeypatch.setattr(mod, "PAGE_SIZE", 2, raising=False)
    return fake


def test_patches_the_first_page_before_reading_the_next(core, capsys):
    result = run(capsys, {"label_selectors": ["pool=x"], "resources": {"example.com/dongle": 1}, "parallel": 1})
    assert result["changed_nodes"] == NAMES
    assert [(c[0], c[1] if c[0] == "PATCH" else c[2]) for c in core.calls] == [
        ("LIST", None), ("PATCH", "p0"), ("PATCH", "p1"), ("LIST", "2"), ("PATCH", "p2"), ("PATCH", "p3"),
        ("LIST", "4"), ("PATCH", "p4")]


def test_every_page_is_patched_in_parallel_and_reported_by_name(core, capsys):
    result = run(capsys, {"all_nodes": True, "resources": {"example.com/dongle": 1}, "parallel": 4})
    assert [n["name"] for n in result["nodes"]] == NAMES
    assert sorted(c[1] for c in core.writes()) == NAMES
    assert [c[2] for c in core.calls if c[0] == "LIST"] == [None, "2", "4"]


def test_an_expired_continue_token_restarts_the_list_without_patching_twice(core, capsys):
    core.expire_tokens = 1
    result = run(capsys, {"label_selectors": ["pool=x"], "resources": {"example.com/dongle": 1}, "parallel": 1})
    assert result["changed_nodes"] == NAMES
    assert [c[2] for c in core.calls if c[0] == "LIST"] == [None, "2", None, "2", "4"]
    assert sorted(c[1] for c in core.writes()) == NAMES  # p0 and p1 once each


def test_a_failed_page_fails_the_task_and_reports_what_was_changed(core, capsys):
    core.fail_page = 2
    result = run(capsys, {"label_selectors": ["pool=x"], "resources": {"example.com/dongle": 1}, "parallel": 2})
    assert result["failed"] is True
    assert "403" in result["msg"] and "'list' on 'nodes'" in result["msg"]
    assert result["changed_nodes"] == ["p0", "p1"]
    assert sorted(c[1] for c in core.writes()) == ["p0", "p1"]
