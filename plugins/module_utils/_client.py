# -*- coding: utf-8 -*-
# Copyright: kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Kubernetes client layer shared by every kubehw.devices module.

Private to the collection: the interface may change without notice.

One option set (``AUTH_ARG_SPEC``) with kubernetes.core's names and environment
variables, one client factory (``KubeClient``), one exception type
(``KubeHwError``), bounded retries with backoff for 429/5xx/connection resets
(creates only when the request certainly did not reach the server), paginated
lists (``list_all``), and a watch helper that lists once and then follows a
watch stream it reads itself, relisting on ERROR events.
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

# The kubernetes library is imported when the first client is built (import_kubernetes()), not when a module
# starts: a task that refuses its input before any request then never pays for it (about 0.5 CPU-s, most of
# such a task's time). Until then these names are None and HAS_KUBERNETES is None (not tried yet).
kubernetes = urllib3 = ApiException = ConfigException = HTTPHeaderDict = None
# What a request fails with when the connection fails (urllib3's classes are added on import).
CONNECTION_ERRORS = (ConnectionError,)
ACCEPTS_CONTENT_TYPE = False
HAS_KUBERNETES = None
KUBERNETES_IMPORT_ERROR = None


def _without_gc(fn, *args):
    """fn(*args) with the cyclic garbage collector paused: importing the kubernetes library and making an API
    class creates thousands of classes (pydantic models in kubernetes 35+), and the collector would scan the
    growing heap again and again meanwhile (about an eighth of that CPU time, measured with kubernetes 37)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return fn(*args)
    finally:
        if enabled:
            gc.enable()


def import_kubernetes():
    """Import the kubernetes library and its urllib3 (once); return whether they are installed."""
    if HAS_KUBERNETES is None:
        _without_gc(_import_kubernetes)
    return HAS_KUBERNETES


def _import_kubernetes():
    global kubernetes, urllib3, ApiException, ConfigException, HTTPHeaderDict, ACCEPTS_CONTENT_TYPE, CONNECTION_ERRORS
    global HAS_KUBERNETES, KUBERNETES_IMPORT_ERROR
    try:
        import kubernetes
        import urllib3
        from kubernetes.client.rest import ApiException
        from kubernetes.config.config_exception import ConfigException

        try:
            from urllib3 import HTTPHeaderDict  # urllib3 2.x exports it here
        except ImportError:
            from urllib3._collections import HTTPHeaderDict  # urllib3 1.26 only has it here

        # The generated functions take _content_type from kubernetes 36.0.0 on. Before that, every patch
        # function sends the first type it lists, application/json-patch+json (api_client.py
        # select_header_content_type, release 24.2.0), so that one needs no keyword there.
        ACCEPTS_CONTENT_TYPE = int(kubernetes.__version__.split(".")[0]) >= 36

        CONNECTION_ERRORS = (urllib3.exceptions.ProtocolError, urllib3.exceptions.NewConnectionError,
                             urllib3.exceptions.MaxRetryError, urllib3.exceptions.TimeoutError, ConnectionError)
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
JSON_PATCH = "application/json-patch+json"
# Page size of every list, as kubectl and client-go's pager use.
PAGE_SIZE = 500

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
    decoded Status object when the server sent one, ``ambiguous`` whether a
    create may have been stored although it failed.
    """

    # True when a create failed in a way that leaves unknown whether the object was stored.
    ambiguous = False
    # True when an earlier attempt of the same request may have been applied (its answer was lost).
    after_lost_answer = False

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


# Keys of a kubeconfig's users[].user whose values are credentials (client-certificate-data is public).
KUBECONFIG_SECRET_KEYS = ("token", "password", "client-key-data")
# auth-provider config keys holding credentials (id-token, refresh-token, access-token, client-secret...).
AUTH_PROVIDER_SECRET_WORDS = ("token", "secret", "password", "key")


def kubeconfig_secrets(kubeconfig):
    """Every credential of a kubeconfig given as a dict, as a set of strings.

    users[].user token, password and client-key-data; every exec env value and every exec
    argument that is not a bare flag (``--token=x`` and ``x`` after ``--token`` are both kept,
    since which arguments are secret is the plugin's business); auth-provider config values
    whose key names a token, secret, password or key.
    """
    found = set()
    if not isinstance(kubeconfig, dict):
        return found
    for entry in kubeconfig.get("users") or []:
        user = entry.get("user") if isinstance(entry, dict) else None
        if not isinstance(user, dict):
            continue
        for key in KUBECONFIG_SECRET_KEYS:
            if user.get(key):
                found.add(to_native(user[key]))
        exec_cfg = user.get("exec")
        if isinstance(exec_cfg, dict):
            for env in exec_cfg.get("env") or []:
                if isinstance(env, dict) and env.get("value"):
                    found.add(to_native(env["value"]))
            for arg in exec_cfg.get("args") or []:
                arg = to_native(arg)
                if arg.startswith("-") and "=" in arg:
                    arg = arg.split("=", 1)[1]
                elif arg.startswith("-"):
                    continue
                if arg:
                    found.add(arg)
        provider = user.get("auth-provider")
        if isinstance(provider, dict) and isinstance(provider.get("config"), dict):
            for key, value in provider["config"].items():
                if value and any(word in to_native(key).lower() for word in AUTH_PROVIDER_SECRET_WORDS):
                    found.add(to_native(value))
    return found


def protect_kubeconfig_secrets(module):
    """Add the credentials of a kubeconfig dict (option or K8S_AUTH_KUBECONFIG JSON) to the
    module's no-log values, so no result, warning or error shows them, even at -vvv.
    Call it right after AnsibleModule(), before anything can fail."""
    kubeconfig = module.params.get("kubeconfig")
    if kubeconfig is None:
        raw = os.environ.get(ENV_VARS["kubeconfig"]) or ""
        if raw.lstrip().startswith("{"):
            try:
                kubeconfig = json.loads(raw)
            except ValueError:
                kubeconfig = None
    secrets = kubeconfig_secrets(kubeconfig)
    module.no_log_values.update(secrets)
    return secrets


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
    if not import_kubernetes():
        raise KubeHwError(missing_required_lib("kubernetes"), reason="MissingLibrary")
    cfg = kubernetes.client.Configuration()
    _load_connection_settings(cfg, auth)
    _apply_server_and_credentials(cfg, auth)
    _apply_tls_and_proxy(cfg, auth)
    # Our own retry loop decides; urllib3's hidden retries would blur request counts.
    cfg.retries = False
    if not cfg.host:
        raise KubeHwError(
            "No Kubernetes API server to talk to: set kubeconfig, host or K8S_AUTH_HOST.", reason="ConfigError")
    return cfg


def _load_connection_settings(cfg, auth):
    """Load the kubeconfig, the in-cluster service account or the default kubeconfig into cfg; a KubeHwError
    (ConfigError) names what could not be loaded."""
    try:
        _load_kubeconfig_or_in_cluster(cfg, auth)
    except ConfigException as exc:
        raise KubeHwError(
            "Could not load Kubernetes connection settings: %s. Set kubeconfig, or host with "
            "api_key, or the K8S_AUTH_* environment variables." % to_native(exc).rstrip("."), reason="ConfigError")
    except (IOError, OSError, ValueError, TypeError) as exc:
        raise KubeHwError("Could not read the kubeconfig: %s" % to_native(exc), reason="ConfigError")


def _load_kubeconfig_or_in_cluster(cfg, auth):
    kubeconfig = auth.get("kubeconfig")
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


def _apply_server_and_credentials(cfg, auth):
    """host, api_key, username and password, over what the kubeconfig set."""
    if auth.get("host"):
        cfg.host = auth["host"].rstrip("/")
    if auth.get("api_key"):
        # kubernetes 24.2.0 reads the token under "authorization", 37.0.2 under "BearerToken"
        # (kubernetes/client/configuration.py, auth_settings): set both.
        bearer = "Bearer %s" % auth["api_key"]
        cfg.api_key = {"authorization": bearer, "BearerToken": bearer}
        cfg.api_key_prefix = {}
        # The kubeconfig loader installs a hook that would put its own token back.
        cfg.refresh_api_key_hook = None
    if auth.get("username"):
        cfg.username = auth["username"]
    if auth.get("password"):
        cfg.password = auth["password"]


def _apply_tls_and_proxy(cfg, auth):
    """ca_cert, client_cert, client_key, validate_certs and the proxy options, over what the kubeconfig set."""
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


def _drop_content_type_older_clients_lack(kwargs, what):
    """Before kubernetes 36.0.0 a generated call takes no ``_content_type`` and sends JSON patch: leave it out when it
    is JSON patch, refuse any other type."""
    if "_content_type" in kwargs and not ACCEPTS_CONTENT_TYPE:
        content_type = kwargs.pop("_content_type")
        if content_type != JSON_PATCH:
            raise KubeHwError("Failed to %s: sending %s needs the kubernetes Python library 36.0.0 or later, "
                              "found %s" % (what, content_type, kubernetes.__version__), reason="MissingLibrary")


def _backoff(attempt):
    """Seconds before retry number ``attempt`` (1, 2, ...): doubling from RETRY_BASE_DELAY up to RETRY_MAX_DELAY."""
    return min(RETRY_MAX_DELAY, RETRY_BASE_DELAY * (2 ** (attempt - 1)))


def _jittered_backoff(attempt):
    """_backoff, spread by a quarter either way so that clients retrying together do not stay in step."""
    return _backoff(attempt) * random.uniform(0.75, 1.25)


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


def _retry_after(exc, body=None):
    """Seconds to wait: the Retry-After header, else the Status's details.retryAfterSeconds
    (a list at a resourceVersion the apiserver has not seen yet answers 504 with 1 there)."""
    headers = getattr(exc, "headers", None) or {}
    value = headers.get("Retry-After") or headers.get("retry-after")
    if value is None:
        value = ((body or {}).get("details") or {}).get("retryAfterSeconds")
    try:
        return max(0.0, float(value))
    except (TypeError, ValueError):
        return None


class KubeClient(object):
    """A configured Kubernetes API client with retries and JSON helpers."""

    def __init__(self, module=None, params=None, retry_deadline=RETRY_DEADLINE, sleep=time.sleep):
        if not import_kubernetes():
            if module is not None:
                module.fail_json(msg=missing_required_lib("kubernetes"), exception=KUBERNETES_IMPORT_ERROR)
            raise KubeHwError(missing_required_lib("kubernetes"), reason="MissingLibrary")
        if params is None:
            protect_kubeconfig_secrets(module)
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

    # Made on first use: importing an API class imports all its models (pydantic classes in kubernetes
    # 35+), which costs about a second each on 2 cores; k8s_node_extended_resource only needs core, and
    # k8s_runtime_class and the DRA modules not even that.
    _LAZY_APIS = {"core": "CoreV1Api", "apps": "AppsV1Api", "node_api": "NodeV1Api", "rbac": "RbacAuthorizationV1Api"}

    def __getattr__(self, name):
        api = KubeClient._LAZY_APIS.get(name)
        if api is None or "api_client" not in self.__dict__:
            raise AttributeError(name)
        value = _without_gc(getattr(kubernetes.client, api), self.api_client)
        setattr(self, name, value)
        return value

    def _send_impersonate_groups(self, groups):
        # The apiserver takes one group per Impersonate-Group header line, and the
        # generated client only sends a dict of single headers: add the lines here.
        pool = self.api_client.rest_client.pool_manager
        plain_request = pool.request

        def request(method, url, *args, **kwargs):
            headers = HTTPHeaderDict(kwargs.get("headers") or {})
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

        ``create=True`` (keyword) marks a request that is not idempotent (a POST): it is
        retried only when it certainly did not reach the server (429, connection refused,
        connect timeout). After any other failure (5xx, read timeout, reset) the object may
        have been stored, so the KubeHwError carries ``ambiguous=True`` and the caller must
        look for the object (``create_json`` does) instead of sending the request again.
        """
        what = kwargs.pop("what", None) or getattr(fn, "__name__", "call the Kubernetes API").replace("_", " ")
        create = kwargs.pop("create", False)
        kwargs.setdefault("_request_timeout", self.request_timeout)
        _drop_content_type_older_clients_lack(kwargs, what)
        started = time.monotonic()
        attempt = 0
        # whether an earlier attempt may have been applied although its answer was lost
        lost_answer = False
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
                    error = error_from_api_exception(exc, what)
                    error.after_lost_answer = lost_answer
                    raise error
                error = error_from_api_exception(exc, what)
                lost_answer = lost_answer or exc.status != 429
                if create and exc.status != 429:
                    # a 5xx after the body was sent: the apiserver may have stored the object
                    error.ambiguous = True
                    raise error
                delay = _retry_after(exc, error.body)
            except urllib3.exceptions.SSLError as exc:
                raise self._tls_error(what, to_native(exc))
            except CONNECTION_ERRORS as exc:
                if isinstance(exc, urllib3.exceptions.MaxRetryError) and isinstance(
                        exc.reason, urllib3.exceptions.SSLError):
                    raise self._tls_error(what, to_native(exc.reason))
                error = KubeHwError(
                    "Failed to %s: connection to %s failed: %s" % (what, self.configuration.host, to_native(exc)),
                    reason="ConnectionError")
                if create and not _never_sent(exc):
                    error.ambiguous = True
                    raise error
                lost_answer = lost_answer or not _never_sent(exc)
            if delay is None:
                delay = _jittered_backoff(attempt)
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

    # -- creating exactly once -------------------------------------------------
    def create_json(self, create_fn, *args, **kwargs):
        """Create an object once, even when the answer to the POST is lost.

        ``find`` (keyword) is a callable returning the object if it exists, else None: by
        default the object is read by the fixed name of the body (the last positional
        argument; the namespace is the first one, if any); with ``generateName`` give a
        label-selector lookup. After an ambiguous failure (5xx, reset, read timeout
        once the request was sent) the object is looked for before anything is sent again;
        an ``AlreadyExists`` answer to a repeated create is resolved the same way.
        Returns the created (or found) object as a dict; raises KubeHwError otherwise.
        """
        find = kwargs.pop("find", None) or self._find_by_name(args[-1], args[0] if len(args) == 2 else None)
        started = time.monotonic()
        attempt = 0
        ambiguous = None
        while True:
            attempt += 1
            try:
                return self.call_json(create_fn, *args, create=True, **kwargs)
            except KubeHwError as err:
                if getattr(err, "ambiguous", False):
                    ambiguous = err
                elif not (ambiguous is not None and err.status == 409 and err.reason == "AlreadyExists"):
                    raise
            found = find() if find is not None else None
            if found is not None:
                return found
            if find is None:
                raise ambiguous
            delay = _jittered_backoff(attempt)
            if time.monotonic() - started + delay > self.retry_deadline:
                ambiguous.msg += (" (the object was not found after %d attempts in %.1fs)"
                                  % (attempt, time.monotonic() - started))
                raise ambiguous
            self._sleep(delay)

    def _find_by_name(self, body, namespace=None):
        meta = (body.get("metadata") or {}) if isinstance(body, dict) else {}
        # (API, method): only the API of this kind is made (each costs a second of imports, see _LAZY_APIS)
        readers = {
            "Pod": ("core", "read_namespaced_pod"),
            "ConfigMap": ("core", "read_namespaced_config_map"),
            "DaemonSet": ("apps", "read_namespaced_daemon_set"),
            "RuntimeClass": ("node_api", "read_runtime_class"),
        }
        reader = readers.get(body.get("kind")) if isinstance(body, dict) else None
        if reader is None or not meta.get("name"):
            # generateName or a kind not listed: the caller must give find=
            return None
        read_fn = getattr(getattr(self, reader[0]), reader[1])
        read_args = (meta["name"],) + ((namespace,) if namespace else ())
        return self.finder(read_fn, *read_args, what="read %s %r again after a write whose answer was lost"
                           % (body["kind"], meta["name"]))

    def replace_json(self, replace_fn, *args, **kwargs):
        """PUT an object (``replace_fn(name, [namespace,] body)``), as call_json.

        The body carries the resourceVersion it was computed from, so a PUT is safe to repeat:
        when the answer to an attempt was lost and the repeat fails with 409 Conflict, the
        object is read again and, if it already holds every field of the body (the lost attempt
        was applied), returned as the answer. Any other 409 reaches the caller, who re-reads
        and decides again. ``find`` (keyword) overrides how the object is read.
        """
        body = args[-1]
        find = kwargs.pop("find", None) or self._find_by_name(body, args[1] if len(args) == 3 else None)
        try:
            return self.call_json(replace_fn, *args, **kwargs)
        except KubeHwError as err:
            if err.status != 409 or not err.after_lost_answer:
                raise
            live = find() if find is not None else None
            if live is None or not _holds(live, _without_version(body)):
                raise
            return live

    def finder(self, read_fn, *args, **kwargs):
        """A ``find`` for create_json: read_fn(*args) as a dict, or None on 404."""
        kwargs.setdefault("what", getattr(read_fn, "__name__", "read").replace("_", " "))

        def find():
            try:
                return self.call_json(read_fn, *args, **kwargs)
            except KubeHwError as err:
                if err.status == 404:
                    return None
                raise
        return find

    # -- listing ---------------------------------------------------------------
    def list_pages(self, list_fn, *args, **kwargs):
        """Yield ``(page, restarted)`` for every page of ``limit`` (500) objects, following ``continue`` tokens.

        ``restarted`` is true on the first page after a continue token expired (410, etcd compacted
        it): the list starts again from the first page, within the retry deadline, and the caller
        drops or skips what it took from the pages before.
        """
        kwargs.setdefault("what", "list " + getattr(list_fn, "__name__", "objects").replace("list_", "", 1)
                          .replace("_", " "))
        limit = kwargs.pop("limit", None) or PAGE_SIZE
        started = time.monotonic()
        restarts = 0
        token = None
        while True:
            page_kwargs = dict(kwargs, limit=limit)
            if token:
                page_kwargs["_continue"] = token
            try:
                page = self.call_json(list_fn, *args, **page_kwargs)
            except KubeHwError as err:
                if err.status != 410 or not token:
                    raise
                restarts += 1
                if time.monotonic() - started > self.retry_deadline:
                    err.msg += " (the list was restarted %d times)" % restarts
                    raise
                token = None
                continue
            yield page, restarts > 0 and token is None
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return

    def list_all(self, list_fn, *args, **kwargs):
        """List every object through list_pages().

        Returns a dict shaped like a List: ``{"items": [...], "metadata": {"resourceVersion": rv}}``
        (every page of one list is served at the first page's resourceVersion).
        """
        items = []
        resource_version = None
        for page, restarted in self.list_pages(list_fn, *args, **kwargs):
            if restarted:
                items = []
            if restarted or resource_version is None:
                resource_version = (page.get("metadata") or {}).get("resourceVersion")
            items.extend(page.get("items") or [])
        return {"items": items, "metadata": {"resourceVersion": resource_version}}

    # -- watching ------------------------------------------------------------
    def watch(self, list_fn, predicate, timeout, what="watch", **list_kwargs):
        """List objects, then follow a watch until ``predicate(objects)`` is true.

        ``objects`` maps ``namespace/name`` (or ``name``) to the object as a dict.
        Pass a ``field_selector`` (``metadata.name=<x>``) or the user's ``label_selector``
        so the watch carries only what the predicate needs.
        Returns the objects that satisfied the predicate; raises KubeHwError
        with reason ``Timeout`` (and ``.objects`` holding the last state) when
        ``timeout`` seconds pass first. The stream is read line by line here (not through
        the client library's Watch, whose ERROR handling differs between releases): an
        ERROR event (410 Expired/Gone after a compaction, 504 "Too large resource
        version", anything else) relists and resumes within the same deadline; a stream
        that ends or drops resumes from the last resourceVersion seen.
        """
        deadline = time.monotonic() + timeout
        objects = {}
        resource_version = None
        need_list = True
        errors = 0
        last_problem = None
        while True:
            if need_list:
                listing = self.list_all(list_fn, what=what, **list_kwargs)
                objects = dict((_key(obj), obj) for obj in listing.get("items") or [])
                resource_version = (listing.get("metadata") or {}).get("resourceVersion")
                need_list = False
                if predicate(objects):
                    return objects
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                msg = "Timed out after %ss waiting to %s" % (timeout, what)
                if last_problem:
                    msg += " (last watch problem: %s)" % last_problem
                err = KubeHwError(msg, reason="Timeout")
                err.objects = objects
                raise err
            try:
                outcome = self._follow(list_fn, predicate, objects, resource_version, deadline, what, list_kwargs)
            except KubeHwError as err:
                if err.status != 410 and err.reason != "ConnectionError":
                    raise
                # an apiserver before v1.11's watch cache answered 410 to the watch request itself
                outcome = ("relist", err.msg, None)
            kind, value, delay = outcome
            if kind == "done":
                return objects
            if kind == "resume":
                resource_version = value
                continue
            # relist: an ERROR event, a broken stream
            need_list = True
            last_problem = value
            errors += 1
            if delay is None:
                delay = _backoff(errors)
            self._sleep(max(0.0, min(delay, deadline - time.monotonic())))

    def _follow(self, list_fn, predicate, objects, resource_version, deadline, what, list_kwargs):
        """Read one watch stream. Returns ("done", None, None), ("resume", rv, None) when the
        stream ended or dropped, or ("relist", problem, delay) after an ERROR event."""
        remaining = max(1.0, deadline - time.monotonic())
        response = self.call(
            list_fn, watch=True, resource_version=resource_version, allow_watch_bookmarks=True,
            timeout_seconds=int(remaining + 0.999), _preload_content=False,
            _request_timeout=remaining + self.request_timeout, what=what, **list_kwargs)
        try:
            for line in _stream_lines(response):
                try:
                    event = json.loads(line)
                except ValueError:
                    raise KubeHwError("Failed to %s: the watch sent a line that is not JSON: %.200s"
                                      % (what, to_native(line)), reason="BadResponse")
                if not isinstance(event, dict) or not isinstance(event.get("object"), dict):
                    raise KubeHwError("Failed to %s: the watch sent an event without an object: %.200s"
                                      % (what, to_native(line)), reason="BadResponse")
                kind, obj = event.get("type"), event["object"]
                if kind == "ERROR":
                    return ("relist",) + _watch_error(obj)
                if kind not in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK"):
                    raise KubeHwError("Failed to %s: the watch sent an event of unknown type %r"
                                      % (what, kind), reason="BadResponse")
                resource_version = (obj.get("metadata") or {}).get("resourceVersion") or resource_version
                if kind == "BOOKMARK":
                    continue
                if kind == "DELETED":
                    objects.pop(_key(obj), None)
                else:
                    objects[_key(obj)] = obj
                if predicate(objects):
                    return ("done", None, None)
                if time.monotonic() >= deadline:
                    break
        except (urllib3.exceptions.HTTPError, ConnectionError, OSError):
            # A watch that drops is normal (apiserver restart, load balancer idle timeout).
            pass
        finally:
            response.close()
            response.release_conn()
        return ("resume", resource_version, None)


def _without_version(body):
    """The fields of a PUT body the server must hold after applying it (not status, not versions)."""
    body = dict((k, v) for k, v in body.items() if k != "status")
    body["metadata"] = dict((k, v) for k, v in (body.get("metadata") or {}).items()
                            if k not in ("resourceVersion", "generation", "managedFields"))
    return body


def _holds(live, wanted):
    """Whether ``live`` has every field of ``wanted`` (the server may have added defaults)."""
    if isinstance(wanted, dict):
        # the apiserver drops empty maps and lists (omitempty), so an empty one matches an absent one
        return isinstance(live, dict) and all(
            (k in live and _holds(live[k], v)) or (k not in live and v in ({}, [], None)) for k, v in wanted.items())
    if isinstance(wanted, list):
        return isinstance(live, list) and len(live) == len(wanted) and all(
            _holds(a, b) for a, b in zip(live, wanted))
    return live == wanted


def _stream_lines(response):
    """The lines of a streamed answer, as they arrive (one JSON event per line)."""
    pending = b""
    for chunk in response.stream(amt=None, decode_content=False):
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            if line.strip():
                yield line
    if pending.strip():
        yield pending


def _watch_error(status):
    """(problem, delay before relisting) for the Status object of a watch ERROR event."""
    code = status.get("code")
    message = status.get("message") or status.get("reason") or "unknown error"
    details = status.get("details") or {}
    problem = "ERROR event %s %s: %s" % (code, status.get("reason") or "", message)
    if code == 410:
        # the resourceVersion was compacted: relist at once (kube-apiserver facts, watches)
        return problem, 0.0
    delay = details.get("retryAfterSeconds")
    return problem, float(delay) if isinstance(delay, (int, float)) and delay >= 0 else None


def _never_sent(exc):
    """Whether a connection error proves the request never reached the server."""
    if isinstance(exc, urllib3.exceptions.MaxRetryError):
        exc = exc.reason
    # NewConnectionError is a ConnectTimeoutError in urllib3 1.26 and 2.x: no connection, no request
    return isinstance(exc, (urllib3.exceptions.ConnectTimeoutError, ConnectionRefusedError))


def _key(obj):
    meta = obj.get("metadata") or {}
    if meta.get("namespace"):
        return "%s/%s" % (meta["namespace"], meta.get("name"))
    return meta.get("name")
