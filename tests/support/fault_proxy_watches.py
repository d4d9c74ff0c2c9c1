# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The watches the fault proxy relays and its compaction point (test equipment); the interface is in
tests/support/fault_proxy.py's docstring (open_watches, compact).

- ``Watch``: one watch being relayed; ``interrupt()`` shuts its upstream socket down, which ends the relay;
- ``WatchTable``: the watches being relayed, the compaction point and what it makes old requests answer
  (``compaction_answer``), and the reaper (``reap``) that ends the upstream side of a watch whose client went away.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import itertools
import json
import select
import socket
import threading
import time

from tests.support.faults import CONTINUE_EXPIRED_MESSAGE, ApiError

# numbers the watches of a process, so a test tells a new watch from an old one even when both start at the same
# resourceVersion (nothing was written between them)
_WATCH_IDS = itertools.count(1)

__all__ = ["Watch", "WatchTable", "numeric_rv"]


def numeric_rv(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _continue_rv(token):
    """The resourceVersion a continue token was issued at (base64 of {"v", "rv", "start"}), or None."""
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode("utf-8"))
        return int(data["rv"])
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None


class Watch:
    """A watch being relayed; compact() and the reaper end it by shutting its upstream socket down."""

    def __init__(self, path, resource, query, since, client_sock):
        # what open_watches shows; since follows the events relayed
        self.id = next(_WATCH_IDS)
        self.path, self.resource, self.query, self.since = path, resource, query, since
        self.client_sock = client_sock
        self.upstream_sock = None   # set by the handler once the watch is forwarded
        self.expired_at = None      # set by compact(expire_watches=True): end with ERROR 410
        self.gone = False           # the client went away

    def interrupt(self):
        sock = self.upstream_sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class WatchTable:
    """The watches being relayed and the compaction point."""

    def __init__(self):
        self._lock = threading.Lock()
        self._watches = set()
        self._compacted_rv = None

    def register(self, watch):
        with self._lock:
            self._watches.add(watch)

    def unregister(self, watch):
        with self._lock:
            self._watches.discard(watch)

    def open_watches(self):
        with self._lock:
            return [{"id": w.id, "path": w.path, "resource": w.resource, "query": dict(w.query), "since": w.since}
                    for w in self._watches if w.expired_at is None and not w.gone]

    def end_all(self):
        """The proxy stops: end every watch as if its client had gone."""
        with self._lock:
            watches = list(self._watches)
        for watch in watches:
            watch.gone = True
            watch.interrupt()

    def compact(self, current, expire_watches=False):
        """Compact at current; with expire_watches, end every watch with ERROR 410 Expired."""
        with self._lock:
            self._compacted_rv = max(current, self._compacted_rv or 0)
            watches = list(self._watches) if expire_watches else []
        for watch in watches:
            watch.expired_at = current
            watch.interrupt()

    def compaction_answer(self, info, query):
        """A fault the compaction point makes: ("watch", Status) / ("list", Status), or None."""
        with self._lock:
            compacted = self._compacted_rv
        if compacted is None or info is None:
            return None
        verb = info[4]
        if verb == "watch":
            since = numeric_rv((query.get("resourceVersion") or [""])[-1])
            if since and since < compacted:
                return "watch", ApiError(410, "Expired", "too old resource version: %d (%d)" % (since, compacted + 1))
        if verb == "list" and query.get("continue"):
            issued = _continue_rv(query["continue"][-1])
            if issued is not None and issued <= compacted:
                return "list", ApiError(410, "Expired", CONTINUE_EXPIRED_MESSAGE)
        return None

    def reap(self, running):
        """End the upstream side of watches whose client went away (a watch client sends nothing while it
        reads, so a readable socket means a close), so no upstream watch outlives its client; while running()."""
        while running():
            with self._lock:
                watches = [w for w in self._watches if not w.gone]
            by_fd = {}
            # poll, not select: a long test session's descriptors go past select's limit of 1024
            poller = select.poll()
            for w in watches:
                try:
                    fd = w.client_sock.fileno()
                except OSError:
                    continue
                if fd >= 0:
                    by_fd[fd] = w
                    poller.register(fd, select.POLLIN | select.POLLPRI)
            if not by_fd:
                time.sleep(0.2)
                continue
            ready = poller.poll(200)
            for fd, _event in ready:
                by_fd[fd].gone = True
                by_fd[fd].interrupt()
            if ready:
                time.sleep(0.05)
