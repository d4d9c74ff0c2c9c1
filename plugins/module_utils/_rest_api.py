# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Kubernetes API requests of the collection, sent without the kubernetes library's generated API classes.

Private to the collection: the interface may change without notice.

``RestApi(client, "core")`` answers the names of the generated methods the collection calls (``read_node``,
``list_namespaced_pod``, ``create_cluster_custom_object``...) with the same positional arguments and the
keyword arguments the collection passes (``label_selector``, ``_continue``, ``watch``, ``_preload_content``,
``_request_timeout``, ``_content_type``...), so ``KubeClient.call`` and its callers treat them alike. A request
goes through the connection pool the library's ``ApiClient`` built from the configuration (TLS, client
certificates, proxy), with the library's own token lookup (``Configuration.auth_settings``, which runs the
kubeconfig's refresh hook) and its default headers (User-Agent, Impersonate-User). The answer is urllib3's
response (``.status``, ``.data``; streamed when ``_preload_content=False``); a status outside 2xx raises the
library's ``ApiException`` with the status, reason, body and headers, as the generated methods do.

Design choice: the collection sends and reads JSON (dicts) only, and never used the generated model classes;
but making a generated API class imports all of its models (pydantic classes in kubernetes 35 and later):
``CoreV1Api`` costs about 0.4 CPU-seconds, ``AppsV1Api`` 0.2, on every task that talks to the cluster
(kubernetes 37): a task that reads one node cost 0.99 CPU-seconds with them and 0.48 without
(benchmarks/task_overhead). The paths below are the Kubernetes API's, the same for every
client release, so this also sends any patch content type with every supported client release.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from urllib.parse import quote, urlencode
from ansible_collections.kubehw.devices.plugins.module_utils import _kubernetes_library

JSON = "application/json"
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"       # RFC 7386: maps merge key by key, null removes a key

# API name -> (path prefix, {kind as in the method names: (plural, namespaced)}): the typed APIs' kinds the
# collection reads or writes; every verb of a kind is answered (read, list, create, replace, patch, delete).
_TYPED = {
    "core": ("/api/v1", {
        "node": ("nodes", False),
        "pod": ("pods", True),
        "config_map": ("configmaps", True),
        "service_account": ("serviceaccounts", True),
        "event": ("events", True),
        "namespace": ("namespaces", False),
    }),
    "apps": ("/apis/apps/v1", {"daemon_set": ("daemonsets", True)}),
    "node_api": ("/apis/node.k8s.io/v1", {"runtime_class": ("runtimeclasses", False)}),
    "rbac": ("/apis/rbac.authorization.k8s.io/v1", {
        "cluster_role": ("clusterroles", False),
        "cluster_role_binding": ("clusterrolebindings", False),
        "role": ("roles", True),
        "role_binding": ("rolebindings", True),
    }),
}
# Subresources, named as the generated methods name them: (method suffix, path suffix, verbs).
_SUBRESOURCES = {
    ("core", "node"): (("_status", "/status", ("read", "patch", "replace")),),
    ("core", "pod"): (("_log", "/log", ("read",)), ("_eviction", "/eviction", ("create",))),
}
# The custom-objects API (any group and version: the DRA kinds) and discovery:
# method -> (HTTP method, path template, positional parameters in the generated method's order).
_GENERIC = {
    "custom": {
        "list_cluster_custom_object": ("GET", "/apis/{group}/{version}/{plural}", ("group", "version", "plural")),
        "get_cluster_custom_object": ("GET", "/apis/{group}/{version}/{plural}/{name}",
                                      ("group", "version", "plural", "name")),
        "create_cluster_custom_object": ("POST", "/apis/{group}/{version}/{plural}",
                                         ("group", "version", "plural", "body")),
        "replace_cluster_custom_object": ("PUT", "/apis/{group}/{version}/{plural}/{name}",
                                          ("group", "version", "plural", "name", "body")),
        "delete_cluster_custom_object": ("DELETE", "/apis/{group}/{version}/{plural}/{name}",
                                         ("group", "version", "plural", "name")),
        "list_namespaced_custom_object": ("GET", "/apis/{group}/{version}/namespaces/{namespace}/{plural}",
                                          ("group", "version", "namespace", "plural")),
        "get_namespaced_custom_object": ("GET", "/apis/{group}/{version}/namespaces/{namespace}/{plural}/{name}",
                                         ("group", "version", "namespace", "plural", "name")),
        "create_namespaced_custom_object": ("POST", "/apis/{group}/{version}/namespaces/{namespace}/{plural}",
                                            ("group", "version", "namespace", "plural", "body")),
        "delete_namespaced_custom_object": ("DELETE",
                                            "/apis/{group}/{version}/namespaces/{namespace}/{plural}/{name}",
                                            ("group", "version", "namespace", "plural", "name")),
    },
    "apis": {"get_api_versions": ("GET", "/apis/", ())},
    "version": {"get_code": ("GET", "/version/", ())},
}
# Keyword arguments that are not query parameters.
_CONTROL = ("body", "_preload_content", "_request_timeout", "_content_type")


def _typed_operations(prefix, kinds, subresources):
    """method name -> (HTTP method, path template, positional parameters) for every verb of the typed kinds."""
    operations = {}
    for kind, (plural, namespaced) in kinds.items():
        if namespaced:
            collection = prefix + "/namespaces/{namespace}/" + plural
            scope, one = "namespaced_", ("name", "namespace")
            operations["list_%s_for_all_namespaces" % kind] = ("GET", prefix + "/" + plural, ())
        else:
            collection = prefix + "/" + plural
            scope, one = "", ("name",)
        item = collection + "/{name}"
        operations.update({
            "list_%s%s" % (scope, kind): ("GET", collection, one[1:]),
            "create_%s%s" % (scope, kind): ("POST", collection, one[1:] + ("body",)),
            "read_%s%s" % (scope, kind): ("GET", item, one),
            "replace_%s%s" % (scope, kind): ("PUT", item, one + ("body",)),
            "patch_%s%s" % (scope, kind): ("PATCH", item, one + ("body",)),
            "delete_%s%s" % (scope, kind): ("DELETE", item, one),
        })
        for suffix, path_suffix, verbs in subresources.get(kind, ()):
            for verb in verbs:
                http = {"read": "GET", "patch": "PATCH", "replace": "PUT", "create": "POST"}[verb]
                params = one + (("body",) if verb != "read" else ())
                operations["%s_%s%s%s" % (verb, scope, kind, suffix)] = (http, item + path_suffix, params)
    return operations


OPERATIONS = dict(
    [(api, _typed_operations(prefix, kinds, dict((k, v) for (a, k), v in _SUBRESOURCES.items() if a == api)))
     for api, (prefix, kinds) in _TYPED.items()] + list(_GENERIC.items()))


def query_name(keyword):
    """The query parameter of a generated method's keyword: ``label_selector`` -> ``labelSelector``,
    ``_continue`` -> ``continue``."""
    head, _sep, tail = keyword.lstrip("_").partition("_")
    return head + "".join(word.capitalize() for word in tail.split("_") if word)


def query_value(value):
    """A query value as the apiserver reads it (booleans as true/false)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


class Operation(object):
    """One API method of ``RestApi``: called like the generated method of the same name."""

    def __init__(self, requests, name, http_method, template, params):
        self.requests = requests
        self.__name__ = name
        self.http_method = http_method
        self.template = template
        self.params = params

    def __repr__(self):
        return "<%s %s %s>" % (self.__name__, self.http_method, self.template)

    def __call__(self, *args, **kwargs):
        if len(args) > len(self.params):
            raise TypeError("%s() takes %d positional arguments, %d given"
                            % (self.__name__, len(self.params), len(args)))
        values = dict(zip(self.params, args))
        for name in self.params[len(args):]:
            # given by keyword, as the generated methods also take them
            if name not in kwargs and name != "body":
                raise TypeError("%s() is missing its argument %r" % (self.__name__, name))
            values[name] = kwargs.get(name)
        body = values.pop("body", None)
        if body is None:
            body = kwargs.get("body")
        path = self.template.format(**dict((k, quote(str(v), safe="")) for k, v in values.items()))
        query = [(query_name(k), query_value(v)) for k, v in sorted(kwargs.items())
                 if k not in _CONTROL and k not in self.params and v is not None]
        return self.requests.request(
            self.http_method, path + ("?" + urlencode(query) if query else ""), body=body,
            content_type=kwargs.get("_content_type") or (JSON_PATCH if self.http_method == "PATCH" else JSON),
            preload_content=kwargs.get("_preload_content", True), timeout=kwargs.get("_request_timeout"))


class RestApi(object):
    """The methods of one API (``core``, ``apps``, ``node_api``, ``rbac``, ``custom``, ``apis``, ``version``) as
    ``Operation`` objects; a name the table does not hold is an AttributeError, as on the generated class."""

    def __init__(self, requests, api):
        self._requests = requests
        self._operations = OPERATIONS[api]

    def __getattr__(self, name):
        operation = self.__dict__.get("_operations", {}).get(name)
        if operation is None:
            raise AttributeError(name)
        value = Operation(self._requests, name, *operation)
        setattr(self, name, value)
        return value


class Requests(object):
    """Sends a request through the pool of a kubernetes ``ApiClient`` with its configuration's credentials."""

    def __init__(self, api_client, impersonate_groups=()):
        self.api_client = api_client
        self.configuration = api_client.configuration
        self.pool = api_client.rest_client.pool_manager
        self.impersonate_groups = list(impersonate_groups or ())

    def headers(self, content_type=None):
        headers = _kubernetes_library.HTTPHeaderDict(self.api_client.default_headers)
        headers["Accept"] = JSON
        if content_type:
            headers["Content-Type"] = content_type
        for setting in (self.configuration.auth_settings() or {}).values():
            if setting.get("in") == "header" and setting.get("value"):
                headers[setting["key"]] = setting["value"]
        # The apiserver takes one group per Impersonate-Group header line.
        for group in self.impersonate_groups:
            headers.add("Impersonate-Group", group)
        return headers

    def request(self, method, path, body=None, content_type=JSON, preload_content=True, timeout=None):
        """urllib3's response to ``method path``; ApiException when the status is not 2xx."""
        urllib3 = _kubernetes_library.urllib3
        if isinstance(timeout, (int, float)):
            timeout = urllib3.Timeout(total=timeout)
        elif isinstance(timeout, tuple) and len(timeout) == 2:
            timeout = urllib3.Timeout(connect=timeout[0], read=timeout[1])
        kwargs = dict(headers=self.headers(content_type if body is not None else None),
                      preload_content=preload_content)
        if timeout is not None:
            kwargs["timeout"] = timeout
        if body is not None:
            kwargs["body"] = json.dumps(body)
        response = self.pool.request(method, self.configuration.host + path, **kwargs)
        if not 200 <= response.status <= 299:
            error = _kubernetes_library.ApiException(status=response.status, reason=response.reason)
            error.body = response.data
            error.headers = response.headers
            response.release_conn()
            raise error
        return response
