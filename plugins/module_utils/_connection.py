# -*- coding: utf-8 -*-
# Copyright: kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Connection settings of every kubehw.devices module and of the inventory plugin.

Private to the collection: the interface may change without notice.

One option set (``AUTH_ARG_SPEC``) with kubernetes.core's names and environment variables, the kubeconfig
credentials kept out of every result (``protect_kubeconfig_secrets``), and the options resolved
(``resolve_auth_params``) and turned into a kubernetes.client.Configuration (``build_configuration``): kubeconfig,
in-cluster service account, server and credentials, TLS and proxy.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from ansible.module_utils.basic import missing_required_lib
from ansible.module_utils.common.text.converters import to_native
from ansible_collections.kubehw.devices.plugins.module_utils import _kubernetes_library
from ansible_collections.kubehw.devices.plugins.module_utils._errors import KubeHwError
from ansible_collections.kubehw.devices.plugins.module_utils._kubernetes_library import import_kubernetes

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
    connect_timeout=dict(type="float", default=5.0),
    retry_timeout=dict(type="float", default=45.0),
)

# The timeout options: the smallest value each takes, and whether that value itself is allowed.
TIMEOUT_FLOORS = (("request_timeout", False), ("connect_timeout", False), ("retry_timeout", True))

FALSE_STRINGS = ("0", "false", "no", "off", "n", "f")


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
    for option, _zero_allowed in TIMEOUT_FLOORS:
        if resolved.get(option) is None:
            resolved[option] = AUTH_ARG_SPEC[option]["default"]
    return resolved


def timeout_problem(option, value, zero_allowed=None):
    """Why a timeout option's value cannot work (None when it can): a number of seconds above 0, or 0 and above for
    retry_timeout (0: no retry) and for an option given ``zero_allowed`` (a wait_timeout of 0: look once). The one
    wording of this rule for every timeout option of every module and of the inventory plugin."""
    if zero_allowed is None:
        zero_allowed = dict(TIMEOUT_FLOORS)[option]
    if not isinstance(value, bool) and isinstance(value, (int, float)) and (value >= 0 if zero_allowed else value > 0):
        return None
    return "%s %r must be a number of seconds %s" % (option, value, "0 or more" if zero_allowed else "above 0")


def check_timeouts(auth):
    """Raise a KubeHwError (ConfigError) naming the first timeout option whose value cannot work."""
    for option, _zero_allowed in TIMEOUT_FLOORS:
        problem = timeout_problem(option, auth.get(option))
        if problem:
            raise KubeHwError(problem, reason="ConfigError")


def build_configuration(auth):
    """Turn resolved options into a kubernetes.client.Configuration.

    A kubeconfig (given or from ``K8S_AUTH_KUBECONFIG``) is loaded first and
    explicit host/credential options override it; with neither a kubeconfig
    nor a host, the in-cluster service account is tried (AWX running inside
    Kubernetes), then the default kubeconfig (``$KUBECONFIG`` or ``~/.kube/config``).
    """
    if not import_kubernetes():
        raise KubeHwError(missing_required_lib("kubernetes"), reason="MissingLibrary")
    cfg = _kubernetes_library.kubernetes.client.Configuration()
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
    except _kubernetes_library.ConfigException as exc:
        raise KubeHwError(
            "Could not load Kubernetes connection settings: %s. Set kubeconfig, or host with "
            "api_key, or the K8S_AUTH_* environment variables." % to_native(exc).rstrip("."), reason="ConfigError")
    except (IOError, OSError, ValueError, TypeError) as exc:
        raise KubeHwError("Could not read the kubeconfig: %s" % to_native(exc), reason="ConfigError")


def _load_kubeconfig_or_in_cluster(cfg, auth):
    kubeconfig = auth.get("kubeconfig")
    if isinstance(kubeconfig, dict):
        _kubernetes_library.kubernetes.config.load_kube_config_from_dict(
            kubeconfig, context=auth.get("context"), client_configuration=cfg, persist_config=False)
    elif kubeconfig:
        path = os.path.expanduser(to_native(kubeconfig))
        if not os.path.exists(path):
            raise KubeHwError("kubeconfig file %s does not exist" % path, reason="ConfigError")
        _kubernetes_library.kubernetes.config.load_kube_config(
            config_file=path, context=auth.get("context"), client_configuration=cfg, persist_config=False)
    elif not auth.get("host"):
        try:
            _kubernetes_library.kubernetes.config.load_incluster_config(client_configuration=cfg)
        except _kubernetes_library.ConfigException:
            # The client reads $KUBECONFIG at import time; read it now instead.
            default = os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
            _kubernetes_library.kubernetes.config.load_kube_config(
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
        cfg.proxy_headers = _kubernetes_library.urllib3.util.make_headers(**headers)
