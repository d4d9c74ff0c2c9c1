# -*- coding: utf-8 -*-
# Copyright: kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Kubernetes client of every kubehw.devices module and of the inventory plugin.

Private to the collection: the interface may change without notice.

One client factory (``KubeClient``), bounded retries with backoff for 429/5xx/connection resets
(creates only when the request certainly did not reach the server), fast failure on an address that never
answered (refused, unknown host, no connection within ``connect_timeout``), paginated
lists (``list_all``), and the two doors to ``_waiting.ListWatch`` (``watch``, ``list_watch``), which lists once and
then follows watch streams through ``call``. The connection settings are in ``_connection.py``, the errors in
``_errors.py``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import gc
import json
import random
import socket
import time

from ansible.module_utils.basic import missing_required_lib
from ansible.module_utils.common.text.converters import to_native, to_text
from ansible_collections.kubehw.devices.plugins.module_utils import _kubernetes_library
from ansible_collections.kubehw.devices.plugins.module_utils._connection import (
    build_configuration,
    check_timeouts,
    protect_kubeconfig_secrets,
    resolve_auth_params,
)
from ansible_collections.kubehw.devices.plugins.module_utils._errors import KubeHwError, error_from_api_exception
from ansible_collections.kubehw.devices.plugins.module_utils._kubernetes_library import import_kubernetes
from ansible_collections.kubehw.devices.plugins.module_utils._rest_api import RestApi, Requests
from ansible_collections.kubehw.devices.plugins.module_utils._waiting import Deadline, ListWatch, backoff

RETRY_STATUSES = frozenset([429, 500, 502, 503, 504])
# A connection that was made and then dropped: worth asking again even before the server's first answer.
DROPPED = (ConnectionResetError, ConnectionAbortedError, BrokenPipeError)
# Page size of every list, as kubectl and client-go's pager use.
PAGE_SIZE = 500


def _jittered_backoff(attempt):
    """backoff, spread by a quarter either way so that clients retrying together do not stay in step."""
    return backoff(attempt) * random.uniform(0.75, 1.25)


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

    def __init__(self, module=None, params=None, sleep=time.sleep):
        if not import_kubernetes():
            if module is not None:
                module.fail_json(msg=missing_required_lib("kubernetes"),
                                 exception=_kubernetes_library.KUBERNETES_IMPORT_ERROR)
            raise KubeHwError(missing_required_lib("kubernetes"), reason="MissingLibrary")
        if params is None:
            protect_kubeconfig_secrets(module)
            params = module.params
        self.auth = resolve_auth_params(params)
        check_timeouts(self.auth)
        self.request_timeout = self.auth["request_timeout"]
        self.connect_timeout = self.auth["connect_timeout"]
        # retry_timeout: how long 429, 5xx and dropped connections are retried, in all, for one request
        self.retry_deadline = self.auth["retry_timeout"]
        # Whether the server has answered this client at least once (any HTTP status). Until it has, a refused
        # connection, an unknown host or a connection or answer that does not come in time is the address's fault
        # (a typo, a wrong port, a closed network) and is reported at once; after it, the same failures are an
        # apiserver restarting or a load balancer's hiccup, and are retried within retry_timeout.
        self.answered = False
        self._sleep = sleep
        self.configuration = build_configuration(self.auth)
        self.api_client = _kubernetes_library.kubernetes.client.ApiClient(configuration=self.configuration)
        self.api_client.user_agent = "kubehw.devices/ansible"
        if self.auth.get("impersonate_user"):
            self.api_client.set_default_header("Impersonate-User", self.auth["impersonate_user"])
        # The requests go through the library's pool and credentials, without its generated API classes
        # (_rest_api.py says why): client.core.read_node and the like are called as the generated methods are.
        self.requests = Requests(self.api_client, self.auth.get("impersonate_groups"))
        for api in ("core", "apps", "node_api", "rbac", "custom", "apis", "version"):
            setattr(self, api, RestApi(self.requests, api))
        # The kubernetes package builds a large object graph; without this the module spends
        # about a second collecting it at exit, after its work is done (measured in benchmarks/).
        gc.freeze()

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
        kwargs.setdefault("_request_timeout", self.timeouts())
        budget = Deadline(self.retry_deadline)
        attempt = 0
        # whether an earlier attempt may have been applied although its answer was lost
        lost_answer = False
        while True:
            attempt += 1
            delay = None
            try:
                answer = fn(*args, **kwargs)
                self.answered = True
                return answer
            except _kubernetes_library.ApiException as exc:
                if not exc.status and "SSLError" in to_native(exc.reason or ""):
                    # The generated client reports a TLS failure as an ApiException with status 0.
                    raise self._tls_error(what, to_native(exc.reason).replace("SSLError", "", 1).strip())
                self.answered = self.answered or bool(exc.status)
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
            except _kubernetes_library.urllib3.exceptions.SSLError as exc:
                raise self._tls_error(what, to_native(exc))
            except _kubernetes_library.CONNECTION_ERRORS as exc:
                if isinstance(exc, _kubernetes_library.urllib3.exceptions.MaxRetryError) and isinstance(
                        exc.reason, _kubernetes_library.urllib3.exceptions.SSLError):
                    raise self._tls_error(what, to_native(exc.reason))
                address_problem = self._address_problem(exc)
                if address_problem:
                    error = KubeHwError("Failed to %s: %s" % (what, address_problem), reason="ConnectionError")
                    # a read timeout comes after the request was sent: a create may have been stored
                    error.ambiguous = create and not _never_sent(exc)
                    raise error
                error = KubeHwError(
                    "Failed to %s: connection to %s failed: %s" % (what, self.configuration.host, to_native(exc)),
                    reason="ConnectionError")
                if create and not _never_sent(exc):
                    error.ambiguous = True
                    raise error
                lost_answer = lost_answer or not _never_sent(exc)
            if delay is None:
                delay = _jittered_backoff(attempt)
            if delay > budget.left():
                error.msg += " (gave up after %d attempts in %.1fs)" % (attempt, budget.spent())
                raise error
            self._sleep(delay)

    def timeouts(self, read=None):
        """The ``_request_timeout`` of a request: (connect_timeout, seconds to wait for the answer; request_timeout
        unless ``read`` is given)."""
        return (self.connect_timeout, self.request_timeout if read is None else read)

    def _address_problem(self, exc):
        """What is wrong with the address, for a connection failure that no retry can mend: the host name does not
        resolve, the connection is refused, or neither a connection nor an answer comes in time, while the server has
        not answered this client yet. None for a failure worth retrying (a reset, or any failure after an answer)."""
        if self.answered:
            return None
        server = self.configuration.host
        cause = _root_cause(exc)
        urllib3_errors = _kubernetes_library.urllib3.exceptions
        if isinstance(cause, socket.gaierror):
            problem = "the host name of the API server %s does not resolve (%s)" % (server, to_native(cause))
        elif isinstance(cause, ConnectionRefusedError):
            problem = "the API server %s refused the connection (nothing listens on that address and port)" % server
        elif isinstance(_unwrap(exc), urllib3_errors.ReadTimeoutError):
            problem = ("the API server %s accepted the connection but sent no answer in time (connect_timeout %ss for "
                       "the TLS handshake, request_timeout %ss for the answer)"
                       % (server, self.connect_timeout, self.request_timeout))
        elif isinstance(_unwrap(exc), urllib3_errors.ConnectTimeoutError) and not isinstance(
                _unwrap(exc), urllib3_errors.NewConnectionError):
            problem = "no connection to the API server %s within connect_timeout (%ss)" % (
                server, self.connect_timeout)
        elif isinstance(cause, OSError) and not isinstance(cause, DROPPED):
            problem = "cannot connect to the API server %s: %s" % (server, to_native(cause))
        else:
            return None
        return ("%s. Check host, or the server of the kubeconfig's context; an address that never answered is not "
                "retried" % problem)

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

    def call_text(self, fn, *args, **kwargs):
        """Like call() but returns the body the server sent as text (a pod's log), undecodable bytes replaced."""
        response = self.call(fn, *args, **kwargs)
        return to_text(response.data or b"", errors="replace")

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
        budget = Deadline(self.retry_deadline)
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
            if delay > budget.left():
                ambiguous.msg += (" (the object was not found after %d attempts in %.1fs)"
                                  % (attempt, budget.spent()))
                raise ambiguous
            self._sleep(delay)

    def _find_by_name(self, body, namespace=None):
        meta = (body.get("metadata") or {}) if isinstance(body, dict) else {}
        # (API, method) that reads an object of this kind again
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
        budget = Deadline(self.retry_deadline)
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
                if budget.passed():
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
        Returns the objects that satisfied the predicate; raises WaitTimedOut
        (``.objects`` holding the last state) when ``timeout`` seconds pass
        first. See ListWatch for how the stream is read.
        """
        return ListWatch(self, list_fn, what, **list_kwargs).until(predicate, timeout)

    def list_watch(self, list_fn, what="watch", **list_kwargs):
        """A ListWatch over ``list_fn``: one list, then watches that go on from where the last one stopped."""
        return ListWatch(self, list_fn, what, **list_kwargs)


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


def _unwrap(exc):
    """The error behind urllib3's MaxRetryError (the error itself otherwise)."""
    if isinstance(exc, _kubernetes_library.urllib3.exceptions.MaxRetryError) and exc.reason is not None:
        return exc.reason
    return exc


def _root_cause(exc):
    """The innermost exception a connection failure was raised from (socket.gaierror, ConnectionRefusedError...):
    urllib3 wraps it once or twice, as the cause or the context of its own error."""
    seen = set()
    exc = _unwrap(exc)
    while id(exc) not in seen:
        seen.add(id(exc))
        inner = exc.__cause__ or exc.__context__
        if inner is None:
            break
        exc = _unwrap(inner)
    return exc


def _never_sent(exc):
    """Whether a connection error proves the request never reached the server."""
    if isinstance(exc, _kubernetes_library.urllib3.exceptions.MaxRetryError):
        exc = exc.reason
    # NewConnectionError is a ConnectTimeoutError in urllib3 1.26 and 2.x: no connection, no request
    return isinstance(exc, (_kubernetes_library.urllib3.exceptions.ConnectTimeoutError, ConnectionRefusedError))
