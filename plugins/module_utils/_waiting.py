# -*- coding: utf-8 -*-
# Copyright: kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Waiting, for every kubehw.devices module and the inventory plugin.

Private to the collection: the interface may change without notice.

``Deadline`` is a wait's time budget (started once, read as seconds left, spent into one ``WaitTimedOut``);
``ListWatch`` is the one watch-or-list loop (one list, then watch streams read here, until a named predicate holds);
``backoff`` is the delay between attempts. A timeout's wording is ``_errors.timed_out``; a timeout option's rule is
``_connection.timeout_problem``. The requests themselves go through ``_client.KubeClient``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import time

from ansible.module_utils.common.text.converters import to_native
from ansible_collections.kubehw.devices.plugins.module_utils import _kubernetes_library
from ansible_collections.kubehw.devices.plugins.module_utils._errors import KubeHwError, WaitTimedOut

BACKOFF_BASE_DELAY = 0.2
BACKOFF_MAX_DELAY = 5.0


def backoff(attempt):
    """Seconds before retry number ``attempt`` (1, 2, ...): doubling from BACKOFF_BASE_DELAY up to BACKOFF_MAX_DELAY."""
    return min(BACKOFF_MAX_DELAY, BACKOFF_BASE_DELAY * (2 ** (attempt - 1)))


class Deadline(object):
    """A time budget of ``seconds``, started when made. ``clock`` is ``time.monotonic`` unless a test gives its own."""

    def __init__(self, seconds, clock=None):
        self.seconds = seconds
        self.clock = clock or time.monotonic
        self.started = self.clock()

    def spent(self):
        """Seconds since the budget started."""
        return self.clock() - self.started

    def left(self):
        """Seconds left, never below 0."""
        return max(0.0, self.seconds - self.spent())

    def passed(self):
        return self.spent() >= self.seconds

    def timed_out(self, doing, objects=None):
        """The WaitTimedOut of this budget: "Timed out after <seconds>s <doing>"."""
        return WaitTimedOut(self.seconds, doing, objects)


def object_key(obj):
    """How a ListWatch keys an object: ``namespace/name``, or ``name`` for a cluster-scoped one."""
    meta = obj.get("metadata") or {}
    if meta.get("namespace"):
        return "%s/%s" % (meta["namespace"], meta.get("name"))
    return meta.get("name")


class ListWatch(object):
    """One list, then a watch, in turns: each ``until()`` goes on from the resourceVersion the previous one reached,
    so a wait that looks at several resources in turns reads each of them once and then only its changes (what an
    informer's cache does, without a thread).

    The stream is read line by line here (not through the client library's Watch, whose ERROR handling differs
    between releases): an ERROR event (410 Expired/Gone after a compaction, 504 "Too large resource version",
    anything else) relists and resumes within the same deadline; a stream that ends or drops resumes from the last
    resourceVersion seen. ``objects`` maps ``namespace/name`` (or ``name``) to the object as a dict."""

    def __init__(self, client, list_fn, what="watch", **list_kwargs):
        self.client = client
        self.list_fn = list_fn
        self.what = what
        self.list_kwargs = list_kwargs
        self.objects = {}
        self.resource_version = None
        self.listed = False

    def relist(self):
        """The objects as they are now: one list, from which later ``until()`` calls go on. For a verdict that must
        not rest on what the watch held at its last look (a watch only reads changes while someone waits on it, and
        the apiserver never says when a resumed stream has caught up)."""
        self.listed = False
        return self.until(lambda _objects: True, 1.0)

    def until(self, predicate, timeout):
        """The objects once ``predicate(objects)`` is true (at once when it already is); raises WaitTimedOut
        (``.objects``: the last state) when ``timeout`` seconds pass first."""
        deadline = Deadline(timeout)
        need_list = not self.listed
        errors = 0
        last_problem = None
        if self.listed and predicate(self.objects):
            return self.objects
        while True:
            if need_list:
                listing = self.client.list_all(self.list_fn, what=self.what, **self.list_kwargs)
                self.objects = dict((object_key(obj), obj) for obj in listing.get("items") or [])
                self.resource_version = (listing.get("metadata") or {}).get("resourceVersion")
                self.listed = True
                need_list = False
                if predicate(self.objects):
                    return self.objects
            if deadline.passed():
                doing = "waiting to %s" % self.what
                if last_problem:
                    doing += " (last watch problem: %s)" % last_problem
                raise deadline.timed_out(doing, self.objects)
            try:
                outcome = self._read_stream(predicate, deadline)
            except KubeHwError as err:
                if err.status != 410 and err.reason != "ConnectionError":
                    raise
                # an apiserver before v1.11's watch cache answered 410 to the watch request itself
                outcome = ("relist", err.msg, None)
            kind, value, delay = outcome
            if kind == "done":
                self.resource_version = value or self.resource_version
                return self.objects
            if kind == "resume":
                self.resource_version = value
                continue
            # relist: an ERROR event, a broken stream
            need_list = True
            last_problem = value
            errors += 1
            if delay is None:
                delay = backoff(errors)
            self.client._sleep(min(delay, deadline.left()))

    def _read_stream(self, predicate, deadline):
        """Read one watch stream. Returns ("done", rv, None) once the predicate holds, ("resume", rv, None) when the
        stream ended or dropped, or ("relist", problem, delay) after an ERROR event."""
        client, what, objects = self.client, self.what, self.objects
        resource_version = self.resource_version
        remaining = max(1.0, deadline.left())
        response = client.call(
            self.list_fn, watch=True, resource_version=resource_version, allow_watch_bookmarks=True,
            timeout_seconds=int(remaining + 0.999), _preload_content=False,
            _request_timeout=client.timeouts(remaining + client.request_timeout), what=what, **self.list_kwargs)
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
                    objects.pop(object_key(obj), None)
                else:
                    objects[object_key(obj)] = obj
                if predicate(objects):
                    return ("done", resource_version, None)
                if deadline.passed():
                    break
        except (_kubernetes_library.urllib3.exceptions.HTTPError, ConnectionError, OSError):
            # A watch that drops is normal (apiserver restart, load balancer idle timeout).
            pass
        finally:
            response.close()
            response.release_conn()
        return ("resume", resource_version, None)


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
