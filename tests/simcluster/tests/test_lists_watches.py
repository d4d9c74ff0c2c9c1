# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Paginated lists, watch ERROR events and write faults of the simulated apiserver, as the
"Creating nodes, lists and watches" facts (kube-apiserver v1.32) record them."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import http.client
import json
import ssl

import pytest

from tests.simcluster.tests.test_api import Raw

NODES = ["n%02d" % i for i in range(7)]


@pytest.fixture
def sim(simcluster_factory):
    return simcluster_factory({"nodes": [{"name": n, "labels": {"pool": "a" if i % 2 else "b"}}
                                         for i, n in enumerate(NODES)]}, controllers=False)


def pages(raw, path, limit):
    """Follow continue tokens; returns the list of page bodies."""
    out, token = [], None
    while True:
        sep = "&" if "?" in path else "?"
        url = "%s%slimit=%d" % (path, sep, limit) + ("&continue=%s" % token if token else "")
        code, body, _h = raw.request("GET", url)
        assert code == 200, body
        out.append(body)
        token = body["metadata"].get("continue")
        if not token:
            return out


def test_limit_and_continue_walk_every_item_once(sim):
    raw = Raw(sim)
    got = pages(raw, "/api/v1/nodes", 3)
    assert [len(p["items"]) for p in got] == [3, 3, 1]
    assert [i["metadata"]["name"] for p in got for i in p["items"]] == NODES
    # remainingItemCount counts what the later pages hold; the last page has neither field
    assert [p["metadata"].get("remainingItemCount") for p in got] == [4, 1, None]
    assert "continue" not in got[-1]["metadata"]
    # every page is served at the first page's resourceVersion
    assert len(set(p["metadata"]["resourceVersion"] for p in got)) == 1
    token = json.loads(base64.urlsafe_b64decode(got[0]["metadata"]["continue"]))
    assert token["v"] == "meta.k8s.io/v1" and str(token["rv"]) == got[0]["metadata"]["resourceVersion"]


def test_pages_are_a_snapshot_of_the_first_page(sim):
    raw = Raw(sim)
    code, first, _h = raw.request("GET", "/api/v1/nodes?limit=4")
    raw.request("DELETE", "/api/v1/nodes/n06")
    code, second, _h = raw.request("GET", "/api/v1/nodes?limit=4&continue=" + first["metadata"]["continue"])
    assert code == 200
    assert [i["metadata"]["name"] for i in second["items"]] == ["n04", "n05", "n06"]


def test_selector_lists_have_no_remaining_item_count(sim):
    got = pages(Raw(sim), "/api/v1/nodes?labelSelector=pool%3Da", 2)
    assert [i["metadata"]["name"] for p in got for i in p["items"]] == ["n01", "n03", "n05"]
    assert all("remainingItemCount" not in p["metadata"] for p in got)


def test_list_without_limit_has_no_continue(sim):
    code, body, _h = Raw(sim).request("GET", "/api/v1/nodes")
    assert code == 200 and len(body["items"]) == 7 and set(body["metadata"]) == {"resourceVersion"}


def test_compaction_expires_continue_tokens(sim):
    raw = Raw(sim)
    code, first, _h = raw.request("GET", "/api/v1/nodes?limit=2")
    raw.request("POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "bump"}})
    sim.compact()
    code, body, _h = raw.request("GET", "/api/v1/nodes?limit=2&continue=" + first["metadata"]["continue"])
    assert code == 410 and body["reason"] == "Expired" and body["code"] == 410
    assert body["message"].startswith("The provided continue parameter is too old to display a consistent list")


def test_injected_expired_continue_only_hits_continued_lists(sim):
    raw = Raw(sim)
    sim.inject_fault("GET", r"^/api/v1/nodes$", status="continue-expired")
    code, first, _h = raw.request("GET", "/api/v1/nodes?limit=2")
    assert code == 200
    code, body, _h = raw.request("GET", "/api/v1/nodes?limit=2&continue=" + first["metadata"]["continue"])
    assert code == 410 and body["reason"] == "Expired"
    assert raw.request("GET", "/api/v1/nodes?limit=2&continue=" + first["metadata"]["continue"])[0] == 200


def test_continue_with_resource_version_is_refused(sim):
    raw = Raw(sim)
    code, first, _h = raw.request("GET", "/api/v1/nodes?limit=2")
    code, body, _h = raw.request("GET", "/api/v1/nodes?limit=2&resourceVersion=1&continue="
                                 + first["metadata"]["continue"])
    assert code == 400 and "not allowed when using continue" in body["message"]


def test_list_ahead_of_the_server_is_504_too_large(sim):
    current = int(sim.store.resource_version)
    code, body, headers = Raw(sim).request("GET", "/api/v1/nodes?resourceVersion=%d" % (current + 100))
    assert code == 504 and body["reason"] == "Timeout"
    assert body["message"] == "Timeout: Too large resource version: %d, current: %d" % (current + 100, current)
    assert body["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"
    assert body["details"]["retryAfterSeconds"] == 1 and headers["Retry-After"] == "1"


def test_injected_too_large_resource_version_hits_lists_only(sim):
    raw = Raw(sim)
    sim.inject_fault("GET", r"^/api/v1/nodes", status="too-large-rv")
    assert raw.request("GET", "/api/v1/nodes/n01")[0] == 200
    code, body, _h = raw.request("GET", "/api/v1/nodes")
    assert code == 504 and body["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"
    assert raw.request("GET", "/api/v1/nodes")[0] == 200


def read_events(raw, path, timeout=5):
    conn = raw.connection(timeout=timeout)
    conn.request("GET", path, headers={"Authorization": "Bearer " + raw.token})
    resp = conn.getresponse()
    events = [json.loads(line) for line in resp.read().decode().splitlines() if line.strip()]
    conn.close()
    return resp.status, events


@pytest.mark.parametrize("kind, code, reason", [("watch-expired", 410, "Expired"),
                                                ("watch-too-large", 504, "Timeout")])
def test_injected_watch_error_is_200_then_one_error_event(sim, kind, code, reason):
    raw = Raw(sim)
    sim.inject_fault("GET", r"^/api/v1/nodes$", status=kind)
    # a list on the same path does not take the watch fault
    assert raw.request("GET", "/api/v1/nodes")[0] == 200
    status, events = read_events(raw, "/api/v1/nodes?watch=1&resourceVersion=%s" % sim.store.resource_version)
    assert status == 200 and len(events) == 1 and events[0]["type"] == "ERROR"
    assert events[0]["object"]["code"] == code and events[0]["object"]["reason"] == reason
    assert events[0]["object"]["kind"] == "Status" and events[0]["object"]["status"] == "Failure"


def test_compaction_ends_open_watches_with_an_expired_error(sim):
    import threading
    raw = Raw(sim)
    result = {}

    def watch():
        result["status"], result["events"] = read_events(
            raw, "/api/v1/nodes?watch=1&timeoutSeconds=10&resourceVersion=%s" % sim.store.resource_version)

    thread = threading.Thread(target=watch)
    thread.start()
    for _attempt in range(100):
        if sim.store._watches:
            break
        threading.Event().wait(0.05)
    raw.request("PATCH", "/api/v1/nodes/n01", {"metadata": {"labels": {"x": "1"}}},
                content_type="application/merge-patch+json")
    sim.compact(expire_watches=True)
    thread.join(10)
    events = result["events"]
    assert result["status"] == 200
    assert [e["type"] for e in events] == ["MODIFIED", "ERROR"]
    assert events[1]["object"]["code"] == 410 and events[1]["object"]["reason"] == "Expired"
    assert events[1]["object"]["message"].startswith("too old resource version: ")


@pytest.mark.parametrize("method, path, body, ctype", [
    ("POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "cm1"}}, "application/json"),
    ("PATCH", "/api/v1/nodes/n01", {"metadata": {"labels": {"x": "1"}}}, "application/merge-patch+json"),
])
def test_commit_then_504_stores_the_write(sim, method, path, body, ctype):
    raw = Raw(sim)
    sim.inject_fault(method, r"^/api/v1/", status="commit-504")
    code, answer, _h = raw.request(method, path, body, content_type=ctype)
    assert code == 504 and answer["reason"] == "Timeout"
    assert answer["message"].startswith("Timeout: request did not complete within requested timeout")
    if method == "POST":
        assert sim.store.get("configmaps", "default", "cm1") is not None
    else:
        assert sim.store.get("nodes", None, "n01")["metadata"]["labels"]["x"] == "1"


def test_commit_then_drop_stores_the_write(sim):
    raw = Raw(sim)
    sim.inject_fault("POST", r"/configmaps$", status="commit-drop")
    conn = raw.connection()
    conn.request("POST", "/api/v1/namespaces/default/configmaps", body=json.dumps({"metadata": {"name": "cm2"}}),
                 headers={"Authorization": "Bearer " + raw.token, "Content-Type": "application/json"})
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError, ssl.SSLError)):
        conn.getresponse()
    conn.close()
    assert sim.store.get("configmaps", "default", "cm2") is not None
    # the fault was used up: a GET on the same path is not affected
    assert raw.request("GET", "/api/v1/namespaces/default/configmaps/cm2")[0] == 200


def test_commit_fault_leaves_failed_writes_alone(sim):
    raw = Raw(sim)
    sim.inject_fault("POST", r"/configmaps$", status="commit-504")
    code, body, _h = raw.request("POST", "/api/v1/namespaces/default/configmaps", {"metadata": {}})
    assert code == 422
