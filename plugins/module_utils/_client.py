# -*- coding: utf-8 -*-
# Copyright: kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Kubernetes client layer shared by every kubehw.devices module.

Private to the collection: the interface may change without notice.

One option set (``AUTH_ARG_SPEC``) with kubernetes.core's names and environment
variables, one client factory (``KubeClient``), one exception type
(``KubeHwError``), bounded retries with backoff for 429/5xx/connection resets,
and a watch helper that lists once and then follows a watch.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import gc
import json
import os
import random
import time
import traceback

from ansible.module_utils.basic import missing_required_lib
from ansible.module_utils.common.text.converters import to_native

KUBERNETES_IMPORT_ERROR = None
try:
    import kubernetes
    import urllib3
    from kubernetes.client.rest import ApiException
    from kubernetes.config.config_exception import ConfigException

    HAS_KUBERNETES = True
except ImportError:
    HAS_KUBERNETES = False
    KUBERNETES_IMPORT_ERROR = traceback.format_exc()


# Option name -> environment variable, as kubernetes.core names them, so
# inventories and AWX credentials written for kubernetes.core work unchanged.
ENV_VARS = {
    "kubeconfig": "K8S_AUTH_KUBECONFIG",
    "context": "K8S_AUTH_CONTEXT",
    "host": "K8S_AUTH_HOST",
    "api_key": "K8S_AUTH_API_KEY",
    "username": "K8S_AUTH_USERNAME",
    "password": "K8S_AUTH_PASSWORD",
    "client_cert": "K8S_AUTH_CERT_FILE",
    "client_key": "K8S_AUTH_KEY_FILE",
    "ca_cert": "K8S_AUTH_SSL_CA_CERT",
    "validate_certs": "K8S_AUTH_VERIFY_SSL",
    "proxy": "K8S_AUTH_PROXY",
    "no_proxy": "K8S_AUTH_NO_PROXY",
    "impersonate_user": "K8S_AUTH_IMPERSONATE_USER",
    "impersonate_groups": "K8S_AUTH_IMPERSONATE_GROUPS",
}

AUTH_ARG_SPEC = dict(
    kubeconfig=dict(type="raw"),
    context=dict(type="str"),
    host=dict(type="str"),
    api_key=dict(type="str", no_log=True),
    username=dict(type="str"),
    password=dict(type="str", no_log=True),
    client_cert=dict(type="path", aliases=["cert_file"]),
    client_key=dict(type="path", aliases=["key_file"], no_log=False),
    ca_cert=dict(type="path", aliases=["ssl_ca_cert"]),
    validate_certs=dict(type="bool", aliases=["verify_ssl"]),
    proxy=dict(type="str"),
    no_proxy=dict(type="str"),
    proxy_headers=dict(
        type="dict",
        options=dict(
            proxy_basic_auth=dict(type="str", no_log=True),
            basic_auth=dict(type="str", no_log=True),
            user_agent=dict(type="str"),
        ),
    ),
    impersonate_user=dict(type="str"),
    impersonate_groups=dict(type="list", elements="str"),
    request_timeout=dict(type="float", default=30.0),
)

RETRY_STATUSES = frozenset([429, 500, 502, 503, 504])
# Bounded retries: enough to ride out an apiserver restart or a burst of 429s,
# short enough that a broken cluster fails a play within a minute.
RETRY_DEADLINE = 45.0
RETRY_BASE_DELAY = 0.2
RETRY_MAX_DELAY = 5.0

HTTP_REASONS = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    410: "Gone",
    415: "Unsupported Media Type",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}

FALSE_STRINGS = ("0", "false", "no", "off", "n", "f")


class KubeHwError(Exception):
    """The one error type of kubehw.devices module_utils.

    ``status`` is the HTTP status code (None when no answer came back),
    ``reason`` the Kubernetes Status reason (``NotFound``, ``Invalid``,
    ``Conflict``...) or a short word for client-side failures, ``body`` the
    decoded Status object when the server sent one.
    """

    def __init__(self, msg, status=None, reason=None, body=None):
        super(KubeHwError, self).__init__(msg)
        self.msg = msg
        self.status = status
        self.reason = reason
        self.body = body

    def __str__(self):
        return self.msg


def fail_from_error(module, err, **result):
    """Fail the module from a KubeHwError, keeping the partial result."""
    result.pop("msg", None)
    module.fail_json(msg=err.msg, status=err.status, reason=err.reason, **result)


def _env_bool(value):
    if isinstance(value, bool):
        return value
    return to_native(value).strip().lower() not in FALSE_STRINGS


def resolve_auth_params(params, environ=None):
    """Explicit options first, then the K8S_AUTH_* environment variables."""
    environ = os.environ if environ is None else environ
    resolved = {}
    for option in AUTH_ARG_SPEC:
        value = params.get(option)
        env_name = ENV_VARS.get(option)
        if value is None and env_name and environ.get(env_name):
            value = environ[env_name]
            if option == "validate_certs":
                value = _env_bool(value)
            elif option == "impersonate_groups":
                value = [g.strip() for g in value.split(",") if g.strip()]
            elif option == "kubeconfig" and value.lstrip().startswith("{"):
                value = json.loads(value)
        resolved[option] = value
    if resolved.get("request_timeout") is None:
        resolved["request_timeout"] = AUTH_ARG_SPEC["request_timeout"]["default"]
    return resolved


def build_configuration(auth):
    """Turn resolved options into a kubernetes.client.Configuration.

    A kubeconfig (given or from ``K8S_AUTH_KUBECONFIG``) is loaded first and
    explicit host/credential options override it; with neither a kubeconfig
    nor a host, the in-cluster service account is tried (AWX running inside
    Kubernetes), then the default kubeconfig (``$KUBECONFIG`` or ``~/.kube/config``).
    """
    cfg = kubernetes.client.Configuration()
    kubeconfig = auth.get("kubeconfig")
    try:
        if isinstance(kubeconfig, dict):
            kubernetes.config.load_kube_config_from_dict(
                kubeconfig, context=auth.get("context"), client_configuration=cfg, persist_config=False)
        elif kubeconfig:
            path = os.path.expanduser(to_native(kubeconfig))
            if not os.path.exists(path):
                raise KubeHwError("kubeconfig file %s does not exist" % path, reason="ConfigError")
            kubernetes.config.load_kube_config(
                config_file=path, context=auth.get("context"), client_configuration=cfg, persist_config=False)
        elif not auth.get("host"):
            try:
                kubernetes.config.load_incluster_config(client_configuration=cfg)
            except ConfigException:
                # The client reads $KUBECONFIG at import time; read it now instead.
                default = os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
                kubernetes.config.load_kube_config(
                    config_file=default, context=auth.get("context"), client_configuration=cfg, persist_config=False)
    except ConfigException as exc:
        raise KubeHwError(
            "Could not load Kubernetes connection settings: %s. Set kubeconfig, or host with "
            "api_key, or the K8S_AUTH_* environment variables." % to_native(exc).rstrip("."), reason="ConfigError")
    except (IOError, OSError, ValueError, TypeError) as exc:
        raise KubeHwError("Could not read the kubeconfig: %s" % to_native(exc), reason="ConfigError")

    if auth.get("host"):
        cfg.host = auth["host"].rstrip("/")
    if auth.get("api_key"):
        cfg.api_key = {"BearerToken": "Bearer %s" % auth["api_key"]}
        cfg.api_key_prefix = {}
        # The kubeconfig loader installs a hook that would put its own token back.
        cfg.refresh_api_key_hook = None
    if auth.get("username"):
        cfg.username = auth["username"]
    if auth.get("password"):
        cfg.password = auth["password"]
    if auth.get("ca_cert"):
        cfg.ssl_ca_cert = auth["ca_cert"]
    if auth.get("client_cert"):
        cfg.cert_file = auth["client_cert"]
    if auth.get("client_key"):
        cfg.key_file = auth["client_key"]
    if auth.get("validate_certs") is not None:
        cfg.verify_ssl = bool(auth["validate_certs"])
    if auth.get("proxy"):
        cfg.proxy = auth["proxy"]
    if auth.get("no_proxy"):
        cfg.no_proxy = auth["no_proxy"]
    if auth.get("proxy_headers"):
        headers = dict((k, v) for k, v in auth["proxy_headers"].items() if v)
        cfg.proxy_headers = urllib3.util.make_headers(**headers)
    # Our own retry loop decides; urllib3's hidden retries would blur request counts.
    cfg.retries = False
    if not cfg.host:
        raise KubeHwError(
            "No Kubernetes API server to talk to: set kubeconfig, host or K8S_AUTH_HOST.", reason="ConfigError")
    return cfg


def _status_body(exc):
    try:
        body = json.loads(exc.body) if exc.body else None
    except (TypeError, ValueError):
        return None
    return body if isinstance(body, dict) else None


def error_from_api_exception(exc, what):
    body = _status_body(exc)
    status = exc.status
    reason = (body or {}).get("reason") or exc.reason or HTTP_REASONS.get(status)
    message = (body or {}).get("message") or to_native(exc.body or exc.reason or "").strip()
    http_reason = HTTP_REASONS.get(status, exc.reason or "")
    msg = "Failed to %s: %s %s" % (what, status, http_reason)
    if message:
        msg += ": %s" % message
    return KubeHwError(msg, status=status, reason=reason, body=body)


def _retry_after(exc):
    headers = getattr(exc, "headers", None) or {}
    value = headers.get("Retry-After") or headers.get("retry-after")
    try:
        return max(0.0, float(value))
    except (TypeError, ValueError):
        return None


class KubeClient(object):
    """A configured Kubernetes API client with retries and JSON helpers."""

    def __init__(self, module=None, params=None, retry_deadline=RETRY_DEADLINE, sleep=time.sleep):
        if not HAS_KUBERNETES:
            if module is not None:
                module.fail_json(msg=missing_required_lib("kubernetes"), exception=KUBERNETES_IMPORT_ERROR)
            raise KubeHwError(missing_required_lib("kubernetes"), reason="MissingLibrary")
        if params is None:
            params = module.params
        self.auth = resolve_auth_params(params)
        self.request_timeout = self.auth["request_timeout"]
        self.retry_deadline = retry_deadline
        self._sleep = sleep
        self.configuration = build_configuration(self.auth)
        self.api_client = kubernetes.client.ApiClient(configuration=self.configuration)
        self.api_client.user_agent = "kubehw.devices/ansible"
        if self.auth.get("impersonate_user"):
            self.api_client.set_default_header("Impersonate-User", self.auth["impersonate_user"])
        if self.auth.get("impersonate_groups"):
            self._send_impersonate_groups(self.auth["impersonate_groups"])
        # The kubernetes package builds a large object graph; without this the module spends
        # about a second collecting it at exit, after its work is done (measured in benchmarks/).
        gc.freeze()
        self.core = kubernetes.client.CoreV1Api(self.api_client)
        self.apps = kubernetes.client.AppsV1Api(self.api_client)
        self.node_api = kubernetes.client.NodeV1Api(self.api_client)
        self.rbac = kubernetes.client.RbacAuthorizationV1Api(self.api_client)

    def _send_impersonate_groups(self, groups):
        # The apiserver takes one group per Impersonate-Group header line, and the
        # generated client only sends a dict of single headers: add the lines here.
        pool = self.api_client.rest_client.pool_manager
        plain_request = pool.request

        def request(method, url, *args, **kwargs):
            headers = urllib3.HTTPHeaderDict(kwargs.get("headers") or {})
            for group in groups:
                headers.add("Impersonate-Group", group)
            kwargs["headers"] = headers
            return plain_request(method, url, *args, **kwargs)

        pool.request = request

    # -- calls ---------------------------------------------------------------
    def call(self, fn, *args, **kwargs):
        """Call an API function, retrying 429/5xx/connection errors with backoff.

        ``what`` (keyword) names the action for error messages, e.g.
        ``'patch status of node "n1"'``. Raises KubeHwError on failure.
        """
        what = kwargs.pop("what", None) or getattr(fn, "__name__", "call the Kubernetes API").replace("_", " ")
        kwargs.setdefault("_request_timeout", self.request_timeout)
        started = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            delay = None
            try:
                return fn(*args, **kwargs)
            except ApiException as exc:
                if not exc.status and "SSLError" in to_native(exc.reason or ""):
                    # The generated client reports a TLS failure as an ApiException with status 0.
                    raise self._tls_error(what, to_native(exc.reason).replace("SSLError", "", 1).strip())
                if exc.status not in RETRY_STATUSES:
                    raise error_from_api_exception(exc, what)
                error = error_from_api_exception(exc, what)
                delay = _retry_after(exc)
            except urllib3.exceptions.SSLError as exc:
                raise self._tls_error(what, to_native(exc))
            except (urllib3.exceptions.ProtocolError, urllib3.exceptions.NewConnectionError,
                    urllib3.exceptions.MaxRetryError, urllib3.exceptions.TimeoutError,
                    ConnectionError) as exc:
                if isinstance(exc, urllib3.exceptions.MaxRetryError) and isinstance(
                        exc.reason, urllib3.exceptions.SSLError):
                    raise self._tls_error(what, to_native(exc.reason))
                error = KubeHwError(
                    "Failed to %s: connection to %s failed: %s" % (what, self.configuration.host, to_native(exc)),
                    reason="ConnectionError")
            if delay is None:
                delay = min(RETRY_MAX_DELAY, RETRY_BASE_DELAY * (2 ** (attempt - 1)))
                delay *= random.uniform(0.75, 1.25)
            if time.monotonic() - started + delay > self.retry_deadline:
                error.msg += " (gave up after %d attempts in %.1fs)" % (attempt, time.monotonic() - started)
                raise error
            self._sleep(delay)

    def _tls_error(self, what, detail):
        return KubeHwError(
            "Failed to %s: TLS error talking to %s: %s. Give the cluster's CA with ca_cert, "
            "or set validate_certs: false only if you accept an unverified connection."
            % (what, self.configuration.host, detail), reason="SSLError")

    def call_json(self, fn, *args, **kwargs):
        """Like call() but returns the decoded JSON the server sent (a dict)."""
        kwargs["_preload_content"] = False
        what = kwargs.get("what")
        response = self.call(fn, *args, **kwargs)
        data = response.data
        try:
            return json.loads(data) if data else {}
        except ValueError:
            raise KubeHwError("Failed to %s: the server sent a body that is not JSON" % (what or "call the API"),
                              status=getattr(response, "status", None), reason="BadResponse")

    # -- watching ------------------------------------------------------------
    def watch(self, list_fn, predicate, timeout, what="watch", **list_kwargs):
        """List objects, then follow a watch until ``predicate(objects)`` is true.

        ``objects`` maps ``namespace/name`` (or ``name``) to the object as a dict.
        Returns the objects that satisfied the predicate; raises KubeHwError
        with reason ``Timeout`` (and ``.objects`` holding the last state) when
        ``timeout`` seconds pass first. Relists after a 410 Gone or a dropped watch.
        """
        deadline = time.monotonic() + timeout
        objects = {}
        resource_version = None
        need_list = True
        while True:
            remaining = deadline - time.monotonic()
            if need_list:
                listing = self.call_json(list_fn, what=what, **list_kwargs)
                objects = dict((_key(obj), obj) for obj in listing.get("items") or [])
                resource_version = (listing.get("metadata") or {}).get("resourceVersion")
                need_list = False
                if predicate(objects):
                    return objects
                remaining = deadline - time.monotonic()
            if remaining <= 0:
                err = KubeHwError("Timed out after %ss waiting to %s" % (timeout, what), reason="Timeout")
                err.objects = objects
                raise err
            watcher = kubernetes.watch.Watch()
            try:
                for event in watcher.stream(
                        list_fn, resource_version=resource_version, allow_watch_bookmarks=True,
                        timeout_seconds=max(1, int(remaining + 0.999)),
                        _request_timeout=remaining + self.request_timeout, deserialize=False, **list_kwargs):
                    obj = event.get("raw_object") or event.get("object") or {}
                    kind = event.get("type")
                    if kind == "ERROR":
                        need_list = True
                        break
                    resource_version = (obj.get("metadata") or {}).get("resourceVersion") or resource_version
                    if kind == "BOOKMARK":
                        continue
                    if kind == "DELETED":
                        objects.pop(_key(obj), None)
                    else:
                        objects[_key(obj)] = obj
                    if predicate(objects):
                        watcher.stop()
                        return objects
                    if time.monotonic() >= deadline:
                        break
            except ApiException as exc:
                if exc.status != 410 and exc.status not in RETRY_STATUSES:
                    raise error_from_api_exception(exc, what)
                need_list = True
            except (urllib3.exceptions.ProtocolError, urllib3.exceptions.TimeoutError,
                    urllib3.exceptions.MaxRetryError, ConnectionError, ValueError):
                # A watch that drops is normal (apiserver restart, load balancer idle timeout).
                need_list = True
                self._sleep(min(1.0, max(0.0, deadline - time.monotonic())))
            finally:
                watcher.stop()


def _key(obj):
    meta = obj.get("metadata") or {}
    if meta.get("namespace"):
        return "%s/%s" % (meta["namespace"], meta.get("name"))
    return meta.get("name")
