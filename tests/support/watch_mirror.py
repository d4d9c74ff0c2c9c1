# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A collection of the Kubernetes API kept in memory by list and watch, as client-go's informers keep theirs.

    mirror = WatchMirror("pods", core.list_pod_for_all_namespaces, on_change=wake.set).start()
    mirror.wait_synced(10)
    pods = mirror.objects()         # a snapshot: a list of dicts, never changed afterwards
    mirror.stop()

``list_call`` is a generated list method (or a function taking its keyword arguments: ``label_selector``,
``resource_version``, ``watch``, ``allow_watch_bookmarks``, ``timeout_seconds``, ``_preload_content``,
``_request_timeout``). The mirror lists once, then watches from the list's resourceVersion; each ADDED, MODIFIED
or DELETED event replaces or drops one object and calls ``on_change()``; a BOOKMARK moves the resourceVersion on.
A watch that ends (the apiserver's timeoutSeconds, a dropped connection) is opened again from the last
resourceVersion; one that ends with an ERROR event (410 Gone: that resourceVersion was compacted) or fails lists
again, so a change is never missed. Objects are the apiserver's JSON as dicts (no model classes).

``stop()`` shuts the watch's connection, so the thread ends at once and no watch lingers on the apiserver.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import socket
import threading

from kubernetes.watch.watch import iter_resp_lines

WATCH_SECONDS = 60      # the apiserver ends each watch after this long; the mirror opens the next one
RETRY_SECONDS = 0.5     # after a failed list or watch


def _key(obj):
    meta = obj.get("metadata") or {}
    return meta.get("namespace"), meta.get("name")


def shut_stream(response):
    """Shut the socket under an open streamed answer at once, so a read blocked on it (in another thread) ends and the
    server sees the client go: urllib3 2.3 and later have HTTPResponse.shutdown(); older ones (the floor's 1.24) keep
    the connection as _connection. A stream the mirror's own thread closed meanwhile (its watch ended as this stop
    came) has nothing left to shut: its socket is gone (EBADF, ENOTCONN), which is not an error of the test."""
    try:
        if hasattr(response, "shutdown"):
            response.shutdown()
            return
        sock = getattr(getattr(response, "_connection", None), "sock", None)
        if sock is not None:
            sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class WatchMirror:
    """One collection by list and watch (see the module docstring)."""

    def __init__(self, name, list_call, on_change=None, label_selector=None, errors=None, watch_seconds=WATCH_SECONDS):
        self.name = name
        self.watch_seconds = watch_seconds
        self.list_call = list_call
        self.on_change = on_change or (lambda: None)
        self.label_selector = label_selector
        # what went wrong (each failure is retried; a test may assert it stays empty); a list of the caller's, if given
        self.errors = [] if errors is None else errors
        self._items = {}
        self._lock = threading.Lock()
        self._synced = threading.Event()
        self._stop = threading.Event()
        self._response = None
        self._thread = None

    def start(self):
        self._thread = threading.Thread(target=self._run, name="watch-%s" % self.name, daemon=True)
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        response = self._response
        if response is not None:
            shut_stream(response)

    def wait_synced(self, timeout):
        return self._synced.wait(timeout)

    def objects(self):
        with self._lock:
            return list(self._items.values())

    # ------------------------------------------------------------ the thread

    def _selector(self):
        return {"label_selector": self.label_selector} if self.label_selector else {}

    def _run(self):
        version = None
        while not self._stop.is_set():
            try:
                if version is None:
                    version = self._list()
                version = self._watch(version)
            except Exception as err:  # pylint: disable=broad-except
                # test equipment: a failed request (the control plane going away at the end) must not end the mirror
                if self._stop.is_set():
                    return
                self.errors.append("%s: %r" % (self.name, err))
                del self.errors[:-20]
                version = None
                self._stop.wait(RETRY_SECONDS)

    def _list(self):
        answer = json.loads(self.list_call(_preload_content=False, **self._selector()).data)
        with self._lock:
            self._items = dict((_key(obj), obj) for obj in answer.get("items") or [])
        self._synced.set()
        self.on_change()
        return (answer.get("metadata") or {}).get("resourceVersion")

    def _watch(self, version):
        """Follow one watch from version; the version to go on from, or None to list again."""
        response = self.list_call(watch=True, resource_version=version, allow_watch_bookmarks=True,
                                  timeout_seconds=self.watch_seconds, _preload_content=False,
                                  _request_timeout=(10, self.watch_seconds + 30), **self._selector())
        self._response = response
        whole = False
        try:
            if self._stop.is_set():
                return None
            # the client library's reader of a watch's lines, as they arrive
            for line in iter_resp_lines(response):
                event = json.loads(line)
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    return None     # 410 Gone and the like: list again
                version = (obj.get("metadata") or {}).get("resourceVersion") or version
                if kind == "BOOKMARK":
                    continue
                with self._lock:
                    if kind == "DELETED":
                        self._items.pop(_key(obj), None)
                    else:
                        self._items[_key(obj)] = obj
                self.on_change()
            whole = True
            return version
        finally:
            self._response = None
            if not whole:
                response.close()    # a connection with part of a stream unread is never used again
            response.release_conn()
