# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest
import urllib3
import yaml
from kubernetes.client.rest import ApiException

from ansible_collections.kubehw.devices.plugins.module_utils import _client
from ansible_collections.kubehw.devices.plugins.module_utils._client import (
    KubeClient,
    KubeHwError,
    resolve_auth_params,
)


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
    for name in list(_client.ENV_VARS.values()) + ["KUBECONFIG"]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    return monkeypatch


def fake_api_exception(status, body=None, headers=None, reason=None):
    exc = ApiException(status=status, reason=reason or _client.HTTP_REASONS.get(status, ""))
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
    no_env.setattr(_client.kubernetes.config, "load_incluster_config",
                   lambda client_configuration: (calls.append("incluster"),
                                                 setattr(client_configuration, "host", "https://10.0.0.1:443")))
    no_env.setattr(_client.kubernetes.config, "load_kube_config",
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
    assert all(kw["_request_timeout"] == 30.0 for kw in fn.kwargs)


def test_retries_dropped_connections(no_env):
    fn = Flaky(urllib3.exceptions.ProtocolError("Connection aborted."))
    assert make_client([]).call(fn) == "ok"
    assert fn.calls == 2


def test_retries_are_bounded_in_total_time(no_env):
    sleeps = []
    fn = Flaky(*[fake_api_exception(500)] * 100)
    client = make_client(sleeps)
    client.retry_deadline = 2.0
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


def test_impersonation_sends_one_header_line_per_group(no_env):
    client = make_client([], impersonate_user="alice", impersonate_groups=["g1", "g2"])
    sent = {}
    pool = client.api_client.rest_client.pool_manager

    def fake_request(method, url, *args, **kwargs):
        sent["headers"] = kwargs["headers"]
        raise urllib3.exceptions.SSLError("stop here")

    # Replace the plain request underneath the wrapper installed by KubeClient.
    for cell in pool.request.__closure__:
        if callable(cell.cell_contents) and getattr(cell.cell_contents, "__name__", "") == "request":
            cell.cell_contents = fake_request
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
