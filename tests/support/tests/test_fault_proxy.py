# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fault proxy in front of a real kube-apiserver, driven with the official kubernetes client.

The apiserver is the one KUBECONFIG names when it is set (CI's real-cluster stage); else this file starts its own
control plane from ../shared/k8s (tests/support/control_plane.py: free ports) with its state under
.cache/support-k8s/ (tests/support/tests/conftest.py), and stops it at the end. Without either, the tests that need it
skip and say why. The last four put a second proxy in front of the apiserver, as the first one's upstream, whose
request log shows which identity reached it. Each fault test also
checks what the apiserver itself holds, read around the proxy, so a fault that was not injected (or a write that was
not forwarded) fails it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import http.client
import json
import os
import ssl
import threading
import time
import uuid

import pytest
import yaml

from tests.support.fault_proxy import FaultProxy, request_info
from tests.support.faults import COMMIT_TIMEOUT_MESSAGE, CONTINUE_EXPIRED_MESSAGE
from tests.support.kubeconfig import write_kubeconfig
from tests.support.tls import make_client_cert, make_tls
from tests.support.watch_mirror import shut_stream

kubernetes = pytest.importorskip("kubernetes")
urllib3 = pytest.importorskip("urllib3")

# on the ConfigMaps the tests make; watches select it, since the controller manager adds ConfigMaps of its own
OWN_LABEL = "fault-proxy-test"


def _client(kubeconfig, retries=False):
    """An ApiClient for kubeconfig; retries=False: urllib3 neither retries nor follows Retry-After."""
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    configuration.retries = retries
    return kubernetes.client.ApiClient(configuration)


@pytest.fixture(scope="session")
def direct(upstream_kubeconfig):
    """CoreV1Api straight to the apiserver, around the proxy: what is really stored."""
    return kubernetes.client.CoreV1Api(_client(upstream_kubeconfig, retries=None))


@pytest.fixture(scope="session")
def namespace(direct):
    name = "fault-proxy-%s" % uuid.uuid4().hex[:8]
    direct.create_namespace({"metadata": {"name": name}})
    yield name
    direct.delete_namespace(name)


@pytest.fixture
def proxy(upstream_kubeconfig):
    started = FaultProxy(upstream_kubeconfig).start()
    yield started
    started.stop()


@pytest.fixture
def core(proxy, tmp_path):
    """CoreV1Api through the proxy, as the upstream user, without client-side retries."""
    return kubernetes.client.CoreV1Api(_client(proxy.write_kubeconfig(str(tmp_path / "proxy.kubeconfig"))))


def _name(prefix="cm"):
    return "%s-%s" % (prefix, uuid.uuid4().hex[:8])


def _config_map(name, **data):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {OWN_LABEL: "yes"}},
            "data": data or {"a": "1"}}


def _exists(direct, namespace, name):
    try:
        return direct.read_namespaced_config_map(name, namespace)
    except kubernetes.client.ApiException as e:
        if e.status == 404:
            return None
        raise


def _api_error(call, *args, **kwargs):
    with pytest.raises(kubernetes.client.ApiException) as caught:
        call(*args, **kwargs)
    return caught.value, json.loads(caught.value.body)


def _raw(proxy, method, target, headers=None, body=None):
    """One request to the proxy with http.client: (status, headers, parsed body)."""
    conn = http.client.HTTPSConnection("127.0.0.1", proxy.port, timeout=30,
                                       context=ssl.create_default_context(cafile=proxy.ca_cert_path))
    try:
        conn.request(method, target, body=body, headers=headers or {})
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, dict(resp.getheaders()), json.loads(data) if data else None
    finally:
        conn.close()


def _watch_lines(core, namespace, since, timeout_seconds=20):
    """Start a watch of the namespace's ConfigMaps through the proxy; returns (events list, thread, response)."""
    resp = core.list_namespaced_config_map(namespace, watch=True, resource_version=since, label_selector=OWN_LABEL,
                                           timeout_seconds=timeout_seconds, _preload_content=False)
    events = []

    def read():
        try:
            for line in resp.stream(amt=None, decode_content=False):
                for piece in line.splitlines():
                    if piece.strip():
                        events.append((time.monotonic(), json.loads(piece)))
        except (urllib3.exceptions.HTTPError, OSError, AttributeError):
            pass    # the test hung up (urllib3 then has no socket left to read: AttributeError)
        events.append((time.monotonic(), None))     # the end of the stream

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return events, thread, resp


def _hang_up(resp):
    """Close the client's side of a streamed answer at once, as a client process that goes away does."""
    shut_stream(resp)
    resp.close()


def _token_user_of(token):
    return "token:" + hashlib.sha256(token.encode()).hexdigest()[:8]


def _wait_for(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


# ---------------------------------------------------------------- forwarding and the request log

def test_request_info_derives_the_verbs_the_faults_are_limited_to():
    assert request_info("GET", "/api/v1/namespaces/ns/configmaps", {}) == ("configmaps", "ns", None, None, "list")
    assert request_info("GET", "/api/v1/namespaces/ns/configmaps", {"watch": ["true"]})[4] == "watch"
    assert request_info("GET", "/api/v1/watch/nodes", {})[4] == "watch"
    assert request_info("GET", "/api/v1/namespaces/ns", {}) == ("namespaces", "ns", "ns", None, "get")
    assert request_info("PUT", "/api/v1/namespaces/ns/finalize", {}) == ("namespaces", "ns", "ns", "finalize", "update")
    assert request_info("PATCH", "/api/v1/nodes/n1/status", {}) == ("nodes", None, "n1", "status", "patch")
    assert request_info("POST", "/apis/apps/v1/namespaces/ns/daemonsets", {})[4] == "create"
    assert request_info("DELETE", "/apis/apps/v1/namespaces/ns/daemonsets", {})[4] == "deletecollection"
    assert request_info("GET", "/apis/apps/v1", {}) is None and request_info("GET", "/version", {}) is None


def test_requests_are_forwarded_and_logged_as_sent_with_the_status_received(proxy, core, direct, namespace):
    name = _name()
    core.create_namespaced_config_map(namespace, _config_map(name, a="1"))
    core.patch_namespaced_config_map(name, namespace, [{"op": "add", "path": "/data/b", "value": "2"}])
    listed = core.list_namespaced_config_map(namespace, label_selector="x!=y", limit=5)
    assert name in [c.metadata.name for c in listed.items]
    _error, body = _api_error(core.read_namespaced_config_map, "missing-" + name, namespace)
    assert body["reason"] == "NotFound"
    assert direct.read_namespaced_config_map(name, namespace).data == {"a": "1", "b": "2"}

    log = proxy.requests
    assert [(r["method"], r["path"], r["status"]) for r in log] == [
        ("POST", "/api/v1/namespaces/%s/configmaps" % namespace, 201),
        ("PATCH", "/api/v1/namespaces/%s/configmaps/%s" % (namespace, name), 200),
        ("GET", "/api/v1/namespaces/%s/configmaps" % namespace, 200),
        ("GET", "/api/v1/namespaces/%s/configmaps/missing-%s" % (namespace, name), 404)]
    create, patch, listing, _missing = log
    # what the client sent: the kubernetes client 37 sends no Content-Type with a create, older ones JSON's
    assert create["content_type"] in (None, "application/json")
    assert create["body"]["metadata"]["name"] == name and create["body"]["data"] == {"a": "1"}
    assert patch["content_type"] == "application/json-patch+json"
    assert patch["body"] == [{"op": "add", "path": "/data/b", "value": "2"}]
    assert listing["query"] == {"labelSelector": "x!=y", "limit": "5"} and listing["body"] is None
    assert all(r["user"] == "upstream" for r in log)
    assert log[0]["time"] <= log[-1]["time"] <= time.time()
    proxy.clear_requests()
    assert proxy.requests == []


def test_each_request_names_the_client_connection_it_came_on(proxy, core, namespace, tmp_path):
    """A client that reads its answers sends its requests on one kept-alive connection; one that leaves an answer
    unread (its connection never goes back to the pool) and another client come on connections of their own."""
    core.read_namespace(namespace)
    core.read_namespace(namespace)
    core.read_namespace(namespace, _preload_content=False)      # never read, on purpose: its connection is not reused
    core.read_namespace(namespace)
    other = kubernetes.client.CoreV1Api(_client(proxy.write_kubeconfig(str(tmp_path / "other.kubeconfig"))))
    other.read_namespace(namespace)
    first, second, unread, after, elsewhere = [r["connection"] for r in proxy.requests]
    assert first == second == unread
    assert len(set([first, after, elsewhere])) == 3 and min(first, after, elsewhere) >= 1


def test_a_request_without_authorization_goes_with_the_kubeconfig_credentials(proxy, namespace):
    status, _headers, body = _raw(proxy, "GET", "/api/v1/namespaces/%s/configmaps" % namespace,
                                  headers={"Accept": "application/json"})
    # the apiserver refuses an anonymous list (401 or 403): a 200 means the proxy added the credentials
    assert status == 200 and body["kind"] == "ConfigMapList"
    assert proxy.requests[-1]["user"] == "upstream"


def test_request_headers_are_forwarded_unchanged(proxy, namespace):
    path = "/api/v1/namespaces/%s/configmaps" % namespace
    # Accept chooses the answer's form: the apiserver answers a Table only when it sees this header
    status, _headers, body = _raw(proxy, "GET", path, headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
    assert status == 200 and body["kind"] == "Table"
    # Impersonate-User reaches the apiserver, which then authorizes the impersonated user
    status, _headers, body = _raw(proxy, "GET", path, headers={"Impersonate-User": "nobody-in-particular"})
    assert status == 403 and 'User "nobody-in-particular" cannot list' in body["message"]
    # a JSON merge patch is applied as one only when its Content-Type arrives with it
    status, _headers, body = _raw(proxy, "PATCH", "/api/v1/namespaces/%s" % namespace,
                                  headers={"Content-Type": "application/merge-patch+json"},
                                  body=json.dumps({"metadata": {"labels": {"patched": "yes"}}}))
    assert status == 200 and body["metadata"]["labels"]["patched"] == "yes"
    assert proxy.requests[-1]["content_type"] == "application/merge-patch+json"
    assert proxy.requests[-1]["body"] == {"metadata": {"labels": {"patched": "yes"}}}


def test_a_service_account_token_is_forwarded_and_authenticates_as_itself(proxy, direct, namespace, tmp_path):
    account = _name("sa")
    direct.create_namespaced_service_account(namespace, {"metadata": {"name": account}})
    token = direct.create_namespaced_service_account_token(
        account, namespace, {"spec": {"expirationSeconds": 600}}).status.token
    as_account = kubernetes.client.CoreV1Api(_client(proxy.write_kubeconfig(str(tmp_path / "sa.kubeconfig"),
                                                                            token=token)))
    error, body = _api_error(as_account.list_namespaced_config_map, namespace)
    assert error.status == 403 and body["reason"] == "Forbidden"
    assert 'User "system:serviceaccount:%s:%s" cannot list' % (namespace, account) in body["message"]
    entry = proxy.requests[-1]
    assert entry["status"] == 403
    assert entry["user"] == _token_user_of(token)
    assert token not in repr(proxy.requests)


def test_many_concurrent_requests_while_a_watch_is_open(proxy, core, namespace):
    since = core.list_namespaced_config_map(namespace).metadata.resource_version
    events, _thread, resp = _watch_lines(core, namespace, since)
    results = []

    def work():
        for _i in range(5):
            results.append(core.list_namespaced_config_map(namespace, limit=1).kind)
    threads = [threading.Thread(target=work) for _i in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert results == ["ConfigMapList"] * 50
    assert not [e for _t, e in events if e is None], "the open watch ended while other requests were served"
    _hang_up(resp)


# ---------------------------------------------------------------- watches relayed

def test_a_watch_is_relayed_event_by_event(proxy, core, direct, namespace):
    since = direct.list_namespaced_config_map(namespace).metadata.resource_version
    events, thread, _resp = _watch_lines(core, namespace, since, timeout_seconds=5)
    assert _wait_for(lambda: proxy.open_watches)
    watch_id = proxy.open_watches[0]["id"]
    assert proxy.open_watches == [{"id": watch_id, "path": "/api/v1/namespaces/%s/configmaps" % namespace, "resource": "configmaps",
                                   "query": {"watch": "true", "resourceVersion": since, "labelSelector": OWN_LABEL,
                                             "timeoutSeconds": "5"}, "since": since}]
    names = [_name() for _i in range(3)]
    written = []
    for name in names:
        direct.create_namespaced_config_map(namespace, _config_map(name))
        written.append(time.monotonic())
        # the event of this write reaches the client before the next write is made: nothing is held back
        assert _wait_for(lambda: len(events) == len(written), timeout=5), events
    direct.patch_namespaced_config_map(names[0], namespace, {"data": {"a": "2"}})
    direct.delete_namespaced_config_map(names[1], namespace)
    assert _wait_for(lambda: len(events) >= 5, timeout=5), events
    got = [(e["type"], e["object"]["metadata"]["name"]) for _t, e in events[:5]]
    assert got == [("ADDED", names[0]), ("ADDED", names[1]), ("ADDED", names[2]),
                   ("MODIFIED", names[0]), ("DELETED", names[1])]
    # timeoutSeconds=5 reaches the apiserver, which ends the watch; the proxy ends it for the client too
    thread.join(20)
    assert events[-1][1] is None and len(events) == 6
    watch_entry = [r for r in proxy.requests if r["query"].get("watch")][0]
    assert watch_entry["status"] == 200 and watch_entry["query"]["resourceVersion"] == since
    assert proxy.open_watches == []


def test_a_watch_whose_client_goes_away_is_ended_upstream(proxy, core, namespace):
    since = core.list_namespaced_config_map(namespace).metadata.resource_version
    _events, _thread, resp = _watch_lines(core, namespace, since, timeout_seconds=120)
    assert _wait_for(lambda: proxy.open_watches)
    _hang_up(resp)
    assert _wait_for(lambda: not proxy.open_watches, timeout=3), proxy.open_watches


def test_the_apiservers_own_errors_pass_through(proxy, core, direct, namespace):
    """A continue token the apiserver cannot read: its own 400, not one of the proxy's answers."""
    for _i in range(2):
        direct.create_namespaced_config_map(namespace, _config_map(_name()))
    first = direct.list_namespaced_config_map(namespace, limit=1)
    token = first.metadata._continue
    error, body = _api_error(core.list_namespaced_config_map, namespace, limit=1, _continue=token + "garbage")
    assert error.status == 400 and body["reason"] == "BadRequest"     # the apiserver's own words, not the proxy's
    assert proxy.requests[-1]["status"] == 400


# ---------------------------------------------------------------- faults: answers instead of forwarding

@pytest.mark.parametrize("status, reason", [(500, "InternalError"), (503, "ServiceUnavailable"), (504, "Timeout")])
def test_an_http_status_fault_is_answered_without_forwarding(proxy, core, direct, namespace, status, reason):
    name = _name()
    proxy.inject_fault("POST", r"/namespaces/%s/configmaps$" % namespace, status=status, count=2)
    for _attempt in range(2):
        error, body = _api_error(core.create_namespaced_config_map, namespace, _config_map(name))
        assert error.status == status and body["reason"] == reason and body["kind"] == "Status"
    assert _exists(direct, namespace, name) is None
    assert proxy.faults == []
    core.create_namespaced_config_map(namespace, _config_map(name))     # count=2 is used up
    assert _exists(direct, namespace, name) is not None
    assert [r["status"] for r in proxy.requests] == [status, status, 201]


def test_a_fault_matches_its_method_and_path_only(proxy, core, namespace):
    proxy.inject_fault("DELETE", r"/configmaps/", status=500)
    proxy.inject_fault("GET", r"^/api/v1/namespaces/other-namespace/configmaps$", status=500)
    core.list_namespaced_config_map(namespace)
    assert len(proxy.faults) == 2
    proxy.clear_faults()
    assert proxy.faults == []
    with pytest.raises(ValueError):
        proxy.inject_fault("GET", "x", status=418)


def test_a_409_fault_words_the_conflict_as_the_apiserver(proxy, core, direct, namespace):
    name = _name()
    direct.create_namespaced_config_map(namespace, _config_map(name))
    proxy.inject_fault("PUT", r"/configmaps/%s$" % name, status=409)
    current = core.read_namespaced_config_map(name, namespace)
    current.data = {"a": "changed"}
    error, body = _api_error(core.replace_namespaced_config_map, name, namespace, current)
    assert error.status == 409 and body["reason"] == "Conflict"
    assert body["message"].startswith('Operation cannot be fulfilled on configmaps "%s"' % name)
    assert direct.read_namespaced_config_map(name, namespace).data == {"a": "1"}


def test_a_429_carries_retry_after(proxy, core, namespace, tmp_path):
    path = "/api/v1/namespaces/%s/configmaps" % namespace
    proxy.inject_fault("GET", "^%s$" % path, status=429, retry_after=2)
    error, body = _api_error(core.list_namespaced_config_map, namespace)
    assert error.status == 429 and error.headers["Retry-After"] == "2"
    assert body["reason"] == "TooManyRequests" and body["details"] == {"retryAfterSeconds": 2}
    # the official client with its default retries waits as told and asks again
    proxy.inject_fault("GET", "^%s$" % path, status=429, retry_after=1)
    retrying = kubernetes.client.CoreV1Api(_client(proxy.write_kubeconfig(str(tmp_path / "k")), retries=None))
    started = time.monotonic()
    retrying.list_namespaced_config_map(namespace)
    assert time.monotonic() - started >= 1.0
    assert [r["status"] for r in proxy.requests][-2:] == [429, 200]


def test_drop_closes_the_connection_without_forwarding(proxy, core, direct, namespace):
    name = _name()
    proxy.inject_fault("POST", r"/configmaps$", status="drop")
    with pytest.raises(urllib3.exceptions.ProtocolError):
        core.create_namespaced_config_map(namespace, _config_map(name))
    assert _exists(direct, namespace, name) is None
    assert proxy.requests[-1]["status"] == "drop"
    # the next request on a new connection is served
    core.create_namespaced_config_map(namespace, _config_map(name))
    assert _exists(direct, namespace, name) is not None


# ---------------------------------------------------------------- faults: lost answers of stored writes

def test_commit_504_stores_the_create_and_answers_timeout(proxy, core, direct, namespace):
    name = _name()
    proxy.inject_fault("POST", r"/namespaces/%s/configmaps$" % namespace, status="commit-504")
    error, body = _api_error(core.create_namespaced_config_map, namespace, _config_map(name, a="stored"))
    assert error.status == 504 and body["reason"] == "Timeout" and body["message"] == COMMIT_TIMEOUT_MESSAGE
    assert direct.read_namespaced_config_map(name, namespace).data == {"a": "stored"}
    assert [r["status"] for r in proxy.requests] == [504]


def test_commit_drop_stores_the_patch_and_closes_the_connection(proxy, core, direct, namespace):
    name = _name()
    direct.create_namespaced_config_map(namespace, _config_map(name))
    proxy.inject_fault("PATCH", r"/configmaps/%s$" % name, status="commit-drop")
    with pytest.raises(urllib3.exceptions.ProtocolError):
        core.patch_namespaced_config_map(name, namespace, {"data": {"a": "patched"}})
    assert direct.read_namespaced_config_map(name, namespace).data == {"a": "patched"}
    assert proxy.requests[-1]["status"] == "drop"


def test_a_lost_answer_fault_passes_a_refused_write_on(proxy, core, direct, namespace):
    name = _name()
    direct.create_namespaced_config_map(namespace, _config_map(name))
    proxy.inject_fault("POST", r"/configmaps$", status="commit-504")
    error, body = _api_error(core.create_namespaced_config_map, namespace, _config_map(name))
    assert error.status == 409 and body["reason"] == "AlreadyExists"     # the apiserver's answer, not a 504
    assert proxy.faults == []


# ---------------------------------------------------------------- faults: lists and watches

def test_too_large_rv_answers_a_list_with_504_resource_version_too_large(proxy, core, namespace):
    proxy.inject_fault("GET", r"/configmaps$", status="too-large-rv")
    proxy.inject_fault("GET", r"/configmaps$", status="too-large-rv")
    error, body = _api_error(core.list_namespaced_config_map, namespace)
    assert error.status == 504 and body["reason"] == "Timeout" and error.headers["Retry-After"] == "1"
    assert body["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"
    assert body["details"]["retryAfterSeconds"] == 1
    asked, current = [int(x.strip()) for x in body["message"].split(":", 2)[2].split(", current:")]
    assert asked > current >= int(core.list_namespace(limit=1).metadata.resource_version) - 1000
    # a watch is not a list: it does not use the second fault
    resp = core.list_namespaced_config_map(namespace, watch=True, timeout_seconds=1, _preload_content=False)
    resp.read()
    assert len(proxy.faults) == 1


def test_continue_expired_answers_only_a_list_that_sends_a_continue_token(proxy, core, direct, namespace):
    for _i in range(2):
        direct.create_namespaced_config_map(namespace, _config_map(_name()))
    proxy.inject_fault("GET", r"/namespaces/%s/configmaps$" % namespace, status="continue-expired")
    first = core.list_namespaced_config_map(namespace, limit=1)
    token = first.metadata._continue
    assert token and proxy.faults          # the first page sent no token: fault still there
    error, body = _api_error(core.list_namespaced_config_map, namespace, limit=1, _continue=token)
    assert error.status == 410 and body["reason"] == "Expired" and body["message"] == CONTINUE_EXPIRED_MESSAGE
    assert len(core.list_namespaced_config_map(namespace, limit=1, _continue=token).items) == 1
    assert [(r["query"].get("continue") == token, r["status"]) for r in proxy.requests] == [
        (False, 200), (True, 410), (True, 200)]


@pytest.mark.parametrize("kind, code, reason", [("watch-expired", 410, "Expired"), ("watch-too-large", 504, "Timeout")])
def test_a_watch_fault_answers_200_and_one_error_event(proxy, core, direct, namespace, kind, code, reason):
    since = direct.list_namespaced_config_map(namespace).metadata.resource_version
    direct.create_namespaced_config_map(namespace, _config_map(_name()))   # the apiserver would send it as ADDED
    proxy.inject_fault("GET", r"^/api/v1/namespaces/%s/configmaps$" % namespace, status=kind)
    resp = core.list_namespaced_config_map(namespace, watch=True, resource_version=since, label_selector=OWN_LABEL,
                                           timeout_seconds=10,
                                           _preload_content=False)
    started = time.monotonic()
    lines = [json.loads(line) for line in resp.read().splitlines() if line.strip()]
    # at once, not after the watch's 10 s (the bound leaves room for a loaded machine)
    assert resp.status == 200 and time.monotonic() - started < 5
    assert len(lines) == 1 and lines[0]["type"] == "ERROR"
    assert lines[0]["object"]["code"] == code and lines[0]["object"]["reason"] == reason
    if kind == "watch-expired":
        assert lines[0]["object"]["message"].startswith("too old resource version: %s (" % since)
    else:
        assert lines[0]["object"]["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"
    assert proxy.requests[-1]["status"] == 200 and proxy.faults == []


# ---------------------------------------------------------------- compaction

def test_compact_with_expire_watches_ends_an_open_watch_with_410_at_once(proxy, core, direct, namespace):
    since = direct.list_namespaced_config_map(namespace).metadata.resource_version
    events, thread, _resp = _watch_lines(core, namespace, since, timeout_seconds=60)
    assert _wait_for(lambda: proxy.open_watches)
    name = _name()
    direct.create_namespaced_config_map(namespace, _config_map(name))
    assert _wait_for(lambda: events, timeout=5)
    started = time.monotonic()
    current = proxy.compact(expire_watches=True)
    thread.join(5)
    # at once, not after the watch's 60 s (the bound leaves room for a loaded machine)
    assert events[-1][1] is None and events[-1][0] - started < 5, events
    got = [e for _t, e in events[:-1]]
    assert [e["type"] for e in got] == ["ADDED", "ERROR"], got
    assert got[1]["object"]["code"] == 410 and got[1]["object"]["reason"] == "Expired"
    assert got[1]["object"]["message"] == "too old resource version: %s (%d)" % (
        got[0]["object"]["metadata"]["resourceVersion"], current + 1)
    assert proxy.open_watches == []


def test_after_compact_old_resource_versions_and_continue_tokens_expire(proxy, core, direct, namespace):
    for _i in range(2):
        direct.create_namespaced_config_map(namespace, _config_map(_name()))
    first = core.list_namespaced_config_map(namespace, limit=1)
    old = first.metadata.resource_version
    direct.create_namespaced_config_map(namespace, _config_map(_name()))
    proxy.compact()
    error, body = _api_error(core.list_namespaced_config_map, namespace, limit=1, _continue=first.metadata._continue)
    assert error.status == 410 and body["reason"] == "Expired"
    resp = core.list_namespaced_config_map(namespace, watch=True, resource_version=old, label_selector=OWN_LABEL,
                                           timeout_seconds=10, _preload_content=False)
    lines = [json.loads(line) for line in resp.read().splitlines() if line.strip()]
    assert [(e["type"], e["object"]["code"]) for e in lines] == [("ERROR", 410)]
    # a watch from after the compaction is the apiserver's
    fresh = core.list_namespaced_config_map(namespace).metadata.resource_version
    resp = core.list_namespaced_config_map(namespace, watch=True, resource_version=fresh, label_selector=OWN_LABEL,
                                           timeout_seconds=1, _preload_content=False)
    assert resp.read().strip() == b""
    assert [r["status"] for r in proxy.requests] == [200, 410, 200, 200, 200]


# ---------------------------------------------------------------- upstream credentials and connections: a second
# proxy stands in front of the apiserver as the first one's upstream, so its request log shows who reached it, and
# its connections can be closed under the first one

def test_a_client_certificate_upstream_is_used_only_for_requests_without_a_token(proxy, direct, namespace, tmp_path):
    account = _name("sa")
    direct.create_namespaced_service_account(namespace, {"metadata": {"name": account}})
    token = direct.create_namespaced_service_account_token(
        account, namespace, {"spec": {"expirationSeconds": 600}}).status.token
    cert, key = make_client_cert(os.path.dirname(proxy.ca_cert_path), "cert-admin", ["system:masters"])
    upstream = write_kubeconfig(str(tmp_path / "upstream"), proxy.url, proxy.ca_cert_path, None,
                                client_cert=cert, client_key=key)
    with FaultProxy(upstream) as via:
        as_cert = kubernetes.client.CoreV1Api(_client(via.write_kubeconfig(str(tmp_path / "cert"))))
        as_cert.list_namespace()
        as_token = kubernetes.client.CoreV1Api(_client(via.write_kubeconfig(str(tmp_path / "tok"), token=token)))
        error, _body = _api_error(as_token.list_namespace)
        assert error.status == 403
        assert [r["user"] for r in via.requests] == ["upstream", _token_user_of(token)]
    # what reached the upstream: the kubeconfig's certificate, then the token alone (a certificate would have won)
    assert [(r["user"], r["status"]) for r in proxy.requests] == [("cert:cert-admin", 200), (_token_user_of(token), 403)]


def test_a_kubeconfig_that_turns_tls_verification_off_is_refused(upstream_kubeconfig, tmp_path):
    with open(upstream_kubeconfig) as f:
        config = yaml.safe_load(f)
    for entry in config["clusters"]:
        entry["cluster"]["insecure-skip-tls-verify"] = True
    path = tmp_path / "insecure"
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(ValueError, match="insecure-skip-tls-verify"):
        FaultProxy(str(path)).start()


def test_the_upstream_certificate_is_verified(proxy, tmp_path):
    other_ca = make_tls(str(tmp_path / "other"))[0]
    upstream = write_kubeconfig(str(tmp_path / "upstream"), proxy.url, other_ca, "any-token")
    with FaultProxy(upstream) as via:
        status, _headers, body = _raw(via, "GET", "/api/v1/namespaces")
    assert status == 502 and "CERTIFICATE_VERIFY_FAILED" in body["message"]
    assert proxy.requests == []


def test_a_kept_alive_upstream_connection_the_apiserver_closed_is_not_reused(proxy, namespace, tmp_path):
    name = _name()
    with FaultProxy(proxy.write_kubeconfig(str(tmp_path / "upstream"))) as via:
        core = kubernetes.client.CoreV1Api(_client(via.write_kubeconfig(str(tmp_path / "k"))))
        core.list_namespace()
        # what an apiserver restart (or its idle timeout) does to the proxy's kept-alive connection
        proxy.close_connections()
        # a create is never sent twice, so sent on the closed connection it would be lost (the client's socket dropped)
        core.create_namespaced_config_map(namespace, _config_map(name))
    assert [(r["method"], r["status"]) for r in proxy.requests] == [("GET", 200), ("POST", 201)]
