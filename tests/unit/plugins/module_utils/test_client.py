# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import socket

import kubernetes
import pytest
import urllib3
import yaml
from kubernetes.client.rest import ApiException

from ansible_collections.kubehw.devices.plugins.module_utils import _connection, _errors, _waiting
from ansible_collections.kubehw.devices.plugins.module_utils._client import KubeClient
from ansible_collections.kubehw.devices.plugins.module_utils._connection import resolve_auth_params
from ansible_collections.kubehw.devices.plugins.module_utils._errors import KubeHwError


def kubeconfig_dict(server="https://kc.example:6443", token="kc-token"):
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}},
                     {"name": "other", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "ctx",
    }


@pytest.fixture
def no_env(monkeypatch, tmp_path):
    for name in list(_connection.ENV_VARS.values()) + ["KUBECONFIG"]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    return monkeypatch


def fake_api_exception(status, body=None, headers=None, reason=None):
    exc = ApiException(status=status, reason=reason or _errors.HTTP_REASONS.get(status, ""))
    exc.body = json.dumps(body) if body is not None else None
    exc.headers = headers or {}
    return exc


class Flaky(object):
    """Raises the given exceptions in turn, then returns 'ok'."""

    def __init__(self, *errors):
        self.errors = list(errors)
        self.calls = 0
        self.kwargs = []

    def __call__(self, *args, **kwargs):
        self.calls += 1
        self.kwargs.append(kwargs)
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


def make_client(sleeps, **params):
    base = dict(host="https://api.example:6443", api_key="secret")
    base.update(params)
    return KubeClient(params=base, sleep=sleeps.append)


def test_explicit_option_wins_over_environment(no_env):
    no_env.setenv("K8S_AUTH_HOST", "https://from-env:6443")
    no_env.setenv("K8S_AUTH_API_KEY", "env-token")
    auth = resolve_auth_params({"host": "https://explicit:6443"})
    assert auth["host"] == "https://explicit:6443"
    assert auth["api_key"] == "env-token"


@pytest.mark.parametrize("raw, expected", [("false", False), ("no", False), ("0", False),
                                           ("true", True), ("yes", True), ("1", True)])
def test_verify_ssl_environment_is_parsed_as_boolean(no_env, raw, expected):
    no_env.setenv("K8S_AUTH_VERIFY_SSL", raw)
    assert resolve_auth_params({})["validate_certs"] is expected


def test_groups_from_environment_are_split(no_env):
    no_env.setenv("K8S_AUTH_IMPERSONATE_GROUPS", "a, b,,c")
    assert resolve_auth_params({})["impersonate_groups"] == ["a", "b", "c"]


def test_kubeconfig_dict_then_host_override(no_env):
    client = KubeClient(params={"kubeconfig": kubeconfig_dict(), "host": "https://override:6443"})
    assert client.configuration.host == "https://override:6443"
    assert client.configuration.auth_settings()["BearerToken"]["value"] == "Bearer kc-token"
    assert client.configuration.verify_ssl is True


def test_kubeconfig_path_and_context(no_env, tmp_path):
    cfg = kubeconfig_dict()
    cfg["clusters"].append({"name": "c2", "cluster": {"server": "https://second:6443"}})
    cfg["contexts"][1]["context"]["cluster"] = "c2"
    path = tmp_path / "kc.yaml"
    path.write_text(yaml.safe_dump(cfg))
    assert KubeClient(params={"kubeconfig": str(path)}).configuration.host == "https://kc.example:6443"
    assert KubeClient(params={"kubeconfig": str(path), "context": "other"}).configuration.host == "https://second:6443"


def test_missing_kubeconfig_file_is_a_clear_error(no_env, tmp_path):
    with pytest.raises(KubeHwError) as err:
        KubeClient(params={"kubeconfig": str(tmp_path / "nope")})
    assert "does not exist" in err.value.msg


def test_in_cluster_config_comes_before_default_kubeconfig(no_env, tmp_path):
    calls = []
    no_env.setattr(kubernetes.config, "load_incluster_config",
                   lambda client_configuration: (calls.append("incluster"),
                                                 setattr(client_configuration, "host", "https://10.0.0.1:443")))
    no_env.setattr(kubernetes.config, "load_kube_config",
                   lambda **kw: calls.append("default"))
    client = KubeClient(params={})
    assert calls == ["incluster"]
    assert client.configuration.host == "https://10.0.0.1:443"


def test_default_kubeconfig_when_not_in_cluster(no_env, tmp_path):
    path = tmp_path / "default.yaml"
    path.write_text(yaml.safe_dump(kubeconfig_dict(server="https://default:6443")))
    no_env.setenv("KUBECONFIG", str(path))
    assert KubeClient(params={}).configuration.host == "https://default:6443"


def test_api_key_overrides_the_kubeconfig_token(no_env):
    client = KubeClient(params={"kubeconfig": kubeconfig_dict(), "api_key": "explicit"})
    assert client.configuration.auth_settings()["BearerToken"]["value"] == "Bearer explicit"


def test_tls_verification_is_on_unless_turned_off(no_env):
    assert make_client([]).configuration.verify_ssl is True
    assert make_client([], validate_certs=False).configuration.verify_ssl is False


def test_no_server_at_all_is_a_config_error(no_env):
    with pytest.raises(KubeHwError) as err:
        KubeClient(params={})
    assert err.value.reason == "ConfigError"
    assert "kubeconfig" in err.value.msg


def test_retries_429_honouring_retry_after(no_env):
    sleeps = []
    fn = Flaky(fake_api_exception(429, headers={"Retry-After": "2"}), fake_api_exception(503))
    assert make_client(sleeps).call(fn) == "ok"
    assert fn.calls == 3
    assert sleeps[0] == 2.0
    assert 0 < sleeps[1] <= 0.5
    # (connect_timeout, request_timeout): the options' defaults
    assert all(kw["_request_timeout"] == (5.0, 30.0) for kw in fn.kwargs)


def test_retries_dropped_connections(no_env):
    fn = Flaky(urllib3.exceptions.ProtocolError("Connection aborted."))
    assert make_client([]).call(fn) == "ok"
    assert fn.calls == 2


def test_retries_are_bounded_in_total_time(no_env):
    sleeps = []
    fn = Flaky(*[fake_api_exception(500)] * 100)
    client = make_client(sleeps, retry_timeout=2.0)
    with pytest.raises(KubeHwError) as err:
        client.call(fn, what='patch status of node "n1"')
    assert err.value.status == 500
    assert "gave up after" in err.value.msg
    assert 1 < fn.calls < 20


def test_client_errors_are_not_retried_and_carry_the_status(no_env):
    body = {"kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404,
            "message": 'nodes "n9" not found'}
    fn = Flaky(fake_api_exception(404, body=body))
    with pytest.raises(KubeHwError) as err:
        make_client([]).call(fn, what='read node "n9"')
    assert fn.calls == 1
    assert err.value.status == 404
    assert err.value.reason == "NotFound"
    assert err.value.msg == 'Failed to read node "n9": 404 Not Found: nodes "n9" not found'


def test_tls_failure_names_the_remedy(no_env):
    fn = Flaky(urllib3.exceptions.MaxRetryError(None, "/", reason=urllib3.exceptions.SSLError("certificate verify failed")))
    with pytest.raises(KubeHwError) as err:
        make_client([]).call(fn, what="list nodes")
    assert err.value.reason == "SSLError"
    assert "certificate verify failed" in err.value.msg
    assert "validate_certs" in err.value.msg
    assert fn.calls == 1


def test_impersonation_sends_one_header_line_per_group(no_env, monkeypatch):
    client = make_client([], impersonate_user="alice", impersonate_groups=["g1", "g2"])
    sent = {}

    def fake_request(method, url, *args, **kwargs):
        sent["headers"] = kwargs["headers"]
        raise urllib3.exceptions.SSLError("stop here")

    monkeypatch.setattr(client.api_client.rest_client.pool_manager, "request", fake_request)
    with pytest.raises(KubeHwError):
        client.call(client.core.read_node, "n1")
    assert sent["headers"].getlist("Impersonate-Group") == ["g1", "g2"]
    assert sent["headers"]["Impersonate-User"] == "alice"


def test_tls_failure_reported_by_the_generated_client_as_status_0(no_env):
    exc = ApiException(status=0, reason="SSLError\n[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed")
    fn = Flaky(exc)
    with pytest.raises(KubeHwError) as err:
        make_client([]).call(fn, what="list nodes")
    assert err.value.reason == "SSLError" and err.value.status is None
    assert "CERTIFICATE_VERIFY_FAILED" in err.value.msg and "ca_cert" in err.value.msg
    assert not err.value.msg.startswith("Failed to list nodes: 0")
    assert fn.calls == 1


# -- ambiguous creates -----------------------------------------------------------

def test_create_is_not_retried_after_a_5xx(no_env):
    fn = Flaky(fake_api_exception(504, body={"kind": "Status", "code": 504, "reason": "Timeout",
                                             "message": "Timeout: request did not complete"}))
    with pytest.raises(KubeHwError) as err:
        make_client([]).call(fn, create=True, what="create pod")
    assert fn.calls == 1 and err.value.ambiguous and err.value.status == 504


@pytest.mark.parametrize("error", [urllib3.exceptions.ProtocolError("Connection aborted."),
                                   urllib3.exceptions.ReadTimeoutError(None, "/", "read timed out"),
                                   ConnectionResetError("reset")])
def test_create_is_not_retried_after_a_reset_or_read_timeout(no_env, error):
    fn = Flaky(error)
    with pytest.raises(KubeHwError) as err:
        make_client([]).call(fn, create=True)
    assert fn.calls == 1 and err.value.ambiguous


@pytest.mark.parametrize("error", [fake_api_exception(429, headers={"Retry-After": "1"}),
                                   urllib3.exceptions.NewConnectionError(None, "Connection refused"),
                                   urllib3.exceptions.MaxRetryError(
                                       None, "/", reason=urllib3.exceptions.NewConnectionError(None, "refused")),
                                   ConnectionRefusedError("refused")])
def test_create_is_retried_when_it_never_reached_the_server(no_env, error):
    client = answered_client([])
    fn = Flaky(error)
    assert client.call(fn, create=True) == "ok"
    assert fn.calls == 2


def answered_client(sleeps, **params):
    """A client whose server has answered once (the first request of a module's task went through)."""
    client = make_client(sleeps, **params)
    assert client.call(Flaky()) == "ok" and client.answered
    return client


def refused():
    """What urllib3 raises for a refused connection: NewConnectionError, raised from ConnectionRefusedError."""
    try:
        try:
            raise ConnectionRefusedError(111, "Connection refused")
        except ConnectionRefusedError as exc:
            raise urllib3.exceptions.NewConnectionError(None, "Failed to establish a new connection: %s" % exc)
    except urllib3.exceptions.NewConnectionError as exc:
        return exc


def unknown_host():
    try:
        try:
            raise socket.gaierror(-2, "Name or service not known")
        except socket.gaierror as exc:
            raise urllib3.exceptions.NewConnectionError(None, "Failed to resolve: %s" % exc)
    except urllib3.exceptions.NewConnectionError as exc:
        return exc


ADDRESS_FAILURES = [
    (refused, "refused the connection"),
    (unknown_host, "does not resolve"),
    (lambda: urllib3.exceptions.ConnectTimeoutError(None, "timed out"), "within connect_timeout (5.0s)"),
    (lambda: urllib3.exceptions.ReadTimeoutError(None, "/", "read timed out"),
     "sent no answer in time (connect_timeout 5.0s for the TLS handshake, request_timeout 30.0s for the answer)"),
    (lambda: urllib3.exceptions.MaxRetryError(None, "/", reason=refused()), "refused the connection"),
]


@pytest.mark.parametrize("failure, words", ADDRESS_FAILURES)
def test_an_address_that_never_answered_fails_at_once_naming_the_server(no_env, failure, words):
    sleeps = []
    fn = Flaky(*[failure() for _attempt in range(20)])
    with pytest.raises(KubeHwError) as err:
        make_client(sleeps).call(fn, what="list nodes")
    assert fn.calls == 1 and sleeps == []
    assert err.value.reason == "ConnectionError"
    assert err.value.msg.startswith("Failed to list nodes: ")
    assert words in err.value.msg and "https://api.example:6443" in err.value.msg
    assert "not retried" in err.value.msg


@pytest.mark.parametrize("failure, words", ADDRESS_FAILURES)
def test_the_same_failures_are_retried_once_the_server_has_answered(no_env, failure, words):
    sleeps = []
    client = answered_client(sleeps)
    fn = Flaky(failure(), failure())
    assert client.call(fn) == "ok"
    assert fn.calls == 3 and len(sleeps) == 2


def test_a_reset_is_retried_even_before_the_first_answer(no_env):
    fn = Flaky(urllib3.exceptions.ProtocolError("Connection aborted.", ConnectionResetError(104, "reset")))
    assert make_client([]).call(fn) == "ok" and fn.calls == 2


def test_an_http_error_counts_as_an_answer(no_env):
    client = make_client([])
    with pytest.raises(KubeHwError):
        client.call(Flaky(fake_api_exception(404)))
    assert client.answered
    assert client.call(Flaky(refused())) == "ok"


def test_retry_timeout_zero_fails_at_the_first_retryable_error(no_env):
    sleeps = []
    fn = Flaky(fake_api_exception(503), fake_api_exception(503))
    with pytest.raises(KubeHwError) as err:
        make_client(sleeps, retry_timeout=0).call(fn)
    assert fn.calls == 1 and sleeps == [] and err.value.status == 503


def test_connect_timeout_goes_with_every_request(no_env):
    fn = Flaky()
    make_client([], connect_timeout=1.5, request_timeout=7).call(fn)
    assert fn.kwargs[0]["_request_timeout"] == (1.5, 7)


@pytest.mark.parametrize("option, value, words", [
    ("request_timeout", 0, "request_timeout 0 must be a number of seconds above 0"),
    ("connect_timeout", -1.0, "connect_timeout -1.0 must be a number of seconds above 0"),
    ("retry_timeout", -0.5, "retry_timeout -0.5 must be a number of seconds 0 or more"),
    ("connect_timeout", True, "connect_timeout True must be a number of seconds above 0"),
])
def test_a_timeout_that_cannot_work_is_refused_before_any_request(no_env, option, value, words):
    with pytest.raises(KubeHwError) as err:
        make_client([], **{option: value})
    assert err.value.msg == words and err.value.reason == "ConfigError"


def test_other_verbs_are_still_retried_after_a_5xx(no_env):
    fn = Flaky(fake_api_exception(504))
    assert make_client([]).call(fn) == "ok" and fn.calls == 2


class JsonResponse(object):
    def __init__(self, body, status=200):
        self.data = json.dumps(body).encode()
        self.status = status


def test_create_json_finds_the_object_after_an_ambiguous_failure(no_env):
    created = {"metadata": {"name": "p-x1"}}
    create = Flaky(fake_api_exception(504))
    finds = []
    found = make_client([]).create_json(create, "ns", {}, find=lambda: finds.append(1) or created)
    assert found == created and create.calls == 1 and finds == [1]


def test_create_json_creates_again_when_nothing_was_stored(no_env):
    calls = []
    sleeps = []

    def create_fn(*args, **kwargs):
        calls.append(kwargs)
        if len(calls) == 1:
            raise urllib3.exceptions.ProtocolError("reset")
        return JsonResponse({"metadata": {"name": "p-x2"}})

    found = make_client(sleeps).create_json(create_fn, find=lambda: None)
    assert found["metadata"]["name"] == "p-x2" and len(calls) == 2 and len(sleeps) == 1


def test_create_json_resolves_already_exists_after_an_ambiguous_failure(no_env):
    calls = []

    def create_fn(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise fake_api_exception(500)
        raise fake_api_exception(409, body={"kind": "Status", "code": 409, "reason": "AlreadyExists",
                                            "message": 'configmaps "x" already exists'})

    answers = [None, {"metadata": {"name": "x"}}]
    found = make_client([]).create_json(create_fn, find=lambda: answers.pop(0))
    assert found == {"metadata": {"name": "x"}} and len(calls) == 2


def test_create_json_does_not_hide_a_plain_already_exists(no_env):
    fn = Flaky(fake_api_exception(409, body={"kind": "Status", "code": 409, "reason": "AlreadyExists",
                                             "message": "exists"}))
    with pytest.raises(KubeHwError) as err:
        make_client([]).create_json(fn, find=lambda: {"found": True})
    assert err.value.status == 409


def test_finder_returns_none_on_404(no_env):
    client = make_client([])
    assert client.finder(Flaky(fake_api_exception(404)))() is None
    assert client.finder(lambda *a, **k: JsonResponse({"metadata": {"name": "a"}}))() == {"metadata": {"name": "a"}}


# -- pagination ------------------------------------------------------------------

class PagedList(object):
    """A list function serving `items` in pages of `limit`, with optional errors by call number."""

    def __init__(self, items, errors=None):
        self.items = items
        self.errors = dict(errors or {})
        self.calls = []
        self.__name__ = "list_node"

    def __call__(self, *args, **kwargs):
        self.calls.append(kwargs)
        if len(self.calls) in self.errors:
            raise self.errors[len(self.calls)]
        start = int(kwargs.get("_continue") or 0)
        limit = kwargs["limit"]
        meta = {"resourceVersion": "7"}
        if start + limit < len(self.items):
            meta["continue"] = str(start + limit)
        return JsonResponse({"items": self.items[start:start + limit], "metadata": meta})


def test_list_all_follows_continue_with_limit_500(no_env):
    items = [{"metadata": {"name": "n%04d" % i}} for i in range(1203)]
    fn = PagedList(items)
    listing = make_client([]).list_all(fn, label_selector="a=b", what="list nodes")
    assert listing["items"] == items and listing["metadata"]["resourceVersion"] == "7"
    assert [c["limit"] for c in fn.calls] == [500, 500, 500]
    assert [c.get("_continue") for c in fn.calls] == [None, "500", "1000"]
    assert all(c["label_selector"] == "a=b" for c in fn.calls)


def test_list_all_restarts_after_an_expired_continue_token(no_env):
    items = [{"metadata": {"name": "n%d" % i}} for i in range(3)]
    expired = fake_api_exception(410, body={"kind": "Status", "code": 410, "reason": "Expired",
                                            "message": "The provided continue parameter is too old"})
    fn = PagedList(items, errors={2: expired})
    listing = make_client([]).list_all(fn, limit=2)
    assert listing["items"] == items
    assert [c.get("_continue") for c in fn.calls] == [None, "2", None, "2"]


def test_list_retries_504_too_large_resource_version_after_retry_after_seconds(no_env):
    body = {"kind": "Status", "code": 504, "reason": "Timeout",
            "message": "Timeout: Too large resource version: 99, current: 7",
            "details": {"causes": [{"reason": "ResourceVersionTooLarge"}], "retryAfterSeconds": 1}}
    sleeps = []
    fn = PagedList([{"metadata": {"name": "a"}}], errors={1: fake_api_exception(504, body=body)})
    assert make_client(sleeps).list_all(fn)["items"] == [{"metadata": {"name": "a"}}]
    assert sleeps == [1.0]


# -- watching --------------------------------------------------------------------

class Stream(object):
    def __init__(self, lines, then=None):
        self.chunks = [(json.dumps(line) + "\n").encode() if not isinstance(line, bytes) else line
                       for line in lines]
        self.then = then
        self.closed = False

    def stream(self, amt=None, decode_content=None):
        yield from self.chunks
        if self.then is not None:
            raise self.then

    def close(self):
        self.closed = True

    def release_conn(self):
        pass


class WatchedList(object):
    """Lists answer with `listings` in turn; watches with `streams` in turn."""

    def __init__(self, listings, streams):
        self.listings = list(listings)
        self.streams = list(streams)
        self.calls = []
        self.__name__ = "list_node"

    def __call__(self, *args, **kwargs):
        self.calls.append(kwargs)
        if kwargs.get("watch"):
            return self.streams.pop(0)
        items, rv = self.listings.pop(0)
        return JsonResponse({"items": items, "metadata": {"resourceVersion": rv}})


def node(name, rv, ready=False):
    return {"metadata": {"name": name, "resourceVersion": rv}, "ready": ready}


def all_ready(objects):
    return bool(objects) and all(o["ready"] for o in objects.values())


EXPIRED = {"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                       "message": "too old resource version: 5 (9)", "reason": "Expired",
                                       "code": 410}}


def test_watch_error_event_relists_and_resumes(no_env):
    fn = WatchedList(
        listings=[([node("a", "5")], "5"), ([node("a", "10")], "10")],
        streams=[Stream([EXPIRED]), Stream([{"type": "MODIFIED", "object": node("a", "11", ready=True)}])])
    sleeps = []
    objects = make_client(sleeps).watch(fn, all_ready, timeout=30, what="see a ready", field_selector="metadata.name=a")
    assert objects["a"]["ready"] is True
    kinds = [("watch" if c.get("watch") else "list", c.get("resource_version")) for c in fn.calls]
    assert kinds == [("list", None), ("watch", "5"), ("list", None), ("watch", "10")]
    assert all(c["field_selector"] == "metadata.name=a" for c in fn.calls)
    assert sleeps == [0.0]


def test_watch_too_large_error_event_waits_retry_after(no_env):
    too_large = {"type": "ERROR", "object": {"kind": "Status", "status": "Failure", "reason": "Timeout", "code": 504,
                                             "message": "Too large resource version: 20, current: 10",
                                             "details": {"retryAfterSeconds": 1}}}
    fn = WatchedList(listings=[([node("a", "5")], "5"), ([node("a", "6", ready=True)], "6")],
                     streams=[Stream([too_large])])
    sleeps = []
    assert make_client(sleeps).watch(fn, all_ready, timeout=30)["a"]["ready"] is True
    assert sleeps == [1.0]


def test_watch_resumes_from_the_last_resource_version_after_a_drop(no_env):
    fn = WatchedList(
        listings=[([node("a", "5")], "5")],
        streams=[Stream([{"type": "MODIFIED", "object": node("a", "6")}],
                        then=urllib3.exceptions.ProtocolError("Connection broken")),
                 Stream([{"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "8"}}},
                         {"type": "MODIFIED", "object": node("a", "9", ready=True)}])])
    assert make_client([]).watch(fn, all_ready, timeout=30)["a"]["ready"] is True
    assert [c.get("resource_version") for c in fn.calls if c.get("watch")] == ["5", "6"]


def test_a_list_watch_lists_once_and_each_later_wait_goes_on_from_where_the_last_stopped(no_env):
    """The rollout wait looks at the nodes many times: one list, then only watches from the last resourceVersion."""
    fn = WatchedList(
        listings=[([node("a", "5")], "5")],
        streams=[Stream([{"type": "MODIFIED", "object": node("a", "6")},
                         {"type": "ADDED", "object": node("b", "7", ready=True)}]),
                 Stream([{"type": "MODIFIED", "object": node("a", "9", ready=True)}])])
    watch = make_client([]).list_watch(fn, what="watch the nodes")
    assert set(watch.until(lambda objects: "b" in objects, timeout=30)) == {"a", "b"}
    assert watch.until(lambda objects: "b" in objects, timeout=30)["b"]["ready"] is True   # held: no request
    assert all_ready(watch.until(all_ready, timeout=30))
    kinds = [("watch" if c.get("watch") else "list", c.get("resource_version")) for c in fn.calls]
    assert kinds == [("list", None), ("watch", "5"), ("watch", "7")]


def test_watch_reads_lines_split_across_chunks(no_env):
    line = (json.dumps({"type": "ADDED", "object": node("b", "6", ready=True)}) + "\n").encode()
    fn = WatchedList(listings=[([], "5")], streams=[Stream([line[:10], line[10:]])])
    assert list(make_client([]).watch(fn, all_ready, timeout=30)) == ["b"]


@pytest.mark.parametrize("line", [b"not json\n", json.dumps({"type": "SURPRISE", "object": {}}).encode() + b"\n",
                                  json.dumps({"type": "ADDED"}).encode() + b"\n"])
def test_watch_garbage_is_a_kubehw_error(no_env, line):
    fn = WatchedList(listings=[([], "5")], streams=[Stream([line])])
    with pytest.raises(KubeHwError) as err:
        make_client([]).watch(fn, all_ready, timeout=30, what="see b")
    assert err.value.reason == "BadResponse" and "see b" in err.value.msg


def test_watch_timeout_names_the_last_problem(no_env):
    fn = WatchedList(listings=[([node("a", "5")], "5")] * 50, streams=[Stream([EXPIRED])] * 50)
    clock = [0.0]
    no_env.setattr(_waiting.time, "monotonic", lambda: clock[0])

    def sleep(seconds):
        clock[0] += max(seconds, 1.0)

    client = KubeClient(params=dict(host="https://api.example:6443"), sleep=sleep)
    with pytest.raises(KubeHwError) as err:
        client.watch(fn, all_ready, timeout=5, what="see a ready")
    assert err.value.reason == "Timeout" and "too old resource version" in err.value.msg
    assert err.value.objects["a"]["metadata"]["resourceVersion"] == "5"


# -- kubeconfig secrets ------------------------------------------------------------

def test_kubeconfig_secrets_cover_tokens_keys_exec_and_auth_provider():
    cfg = kubeconfig_dict(token="tok-123")
    cfg["users"] += [
        {"name": "cert", "user": {"client-certificate-data": "CERTDATA", "client-key-data": "KEYDATA"}},
        {"name": "basic", "user": {"username": "admin", "password": "pw-456"}},
        {"name": "exec", "user": {"exec": {"command": "aws", "args": ["eks", "get-token", "--token=arg-789"],
                                           "env": [{"name": "AWS_SECRET_ACCESS_KEY", "value": "env-000"}]}}},
        {"name": "oidc", "user": {"auth-provider": {"name": "oidc", "config": {
            "id-token": "idt-1", "refresh-token": "rt-2", "client-secret": "cs-3", "client-id": "public-id",
            "idp-issuer-url": "https://issuer.example"}}}},
    ]
    secrets = _connection.kubeconfig_secrets(cfg)
    assert {"tok-123", "KEYDATA", "pw-456", "arg-789", "env-000", "idt-1", "rt-2", "cs-3"} <= secrets
    assert not {"CERTDATA", "admin", "public-id", "https://issuer.example", "--token=arg-789"} & secrets
    assert _connection.kubeconfig_secrets("/path/to/kubeconfig") == set()


class FakeModule(object):
    def __init__(self, params):
        self.params = params
        self.no_log_values = set()


def test_kubeconfig_dict_secrets_become_no_log_values(no_env):
    module = FakeModule({"kubeconfig": kubeconfig_dict(token="tok-abc")})
    KubeClient(module=module)
    assert "tok-abc" in module.no_log_values


def test_kubeconfig_json_from_environment_is_protected(no_env):
    no_env.setenv("K8S_AUTH_KUBECONFIG", json.dumps(kubeconfig_dict(token="env-tok")))
    module = FakeModule({"kubeconfig": None})
    assert _connection.protect_kubeconfig_secrets(module) == {"env-tok"}
    assert module.no_log_values == {"env-tok"}


# -- replaces whose answer was lost ------------------------------------------------

CONFLICT = {"kind": "Status", "code": 409, "reason": "Conflict", "message": "the object has been modified"}


def configmap(data, rv="5"):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "ns",
                                                                  "resourceVersion": rv}, "data": data}


def test_replace_after_a_lost_answer_accepts_the_applied_write(no_env):
    client = make_client([])
    fn = Flaky(fake_api_exception(504), fake_api_exception(409, body=CONFLICT))
    live = configmap({"a": "1"}, rv="6")
    live["metadata"]["uid"] = "u1"
    reads = []
    got = client.replace_json(fn, "cm", "ns", configmap({"a": "1"}), find=lambda: reads.append(1) or live)
    assert got == live and fn.calls == 2 and reads == [1]


def test_replace_after_a_lost_answer_still_reports_a_real_conflict(no_env):
    fn = Flaky(fake_api_exception(504), fake_api_exception(409, body=CONFLICT))
    with pytest.raises(KubeHwError) as err:
        make_client([]).replace_json(fn, "cm", "ns", configmap({"a": "1"}), find=lambda: configmap({"a": "other"}))
    assert err.value.status == 409 and err.value.after_lost_answer


def test_a_plain_conflict_is_not_read_again(no_env):
    fn = Flaky(fake_api_exception(409, body=CONFLICT))
    with pytest.raises(KubeHwError) as err:
        make_client([]).replace_json(fn, "cm", "ns", configmap({"a": "1"}),
                                     find=lambda: pytest.fail("read after a plain conflict"))
    assert err.value.status == 409 and not err.value.after_lost_answer


def test_create_json_without_a_way_to_find_raises_the_ambiguous_error(no_env):
    fn = Flaky(fake_api_exception(502))
    with pytest.raises(KubeHwError) as err:
        make_client([]).create_json(fn, "ns", {"kind": "Pod", "metadata": {"generateName": "p-"}})
    assert err.value.ambiguous and fn.calls == 1


def test_an_empty_map_in_the_body_matches_the_dropped_field(no_env):
    fn = Flaky(fake_api_exception(503), fake_api_exception(409, body=CONFLICT))
    body = configmap({"a": "1"})
    body["metadata"]["annotations"] = {}
    live = configmap({"a": "1"}, rv="9")
    assert make_client([]).replace_json(fn, "cm", "ns", body, find=lambda: live) == live
