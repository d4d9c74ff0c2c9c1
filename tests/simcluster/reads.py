# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The read verbs of the simulated apiserver: get (and a pod's log), list with pages and continue tokens, watch.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import json

from tests.simcluster.errors import bad_request
from tests.simcluster.faults import CONTINUE_EXPIRED_MESSAGE, too_large_rv
from tests.simcluster.http_front import Streamed
from tests.simcluster.store import StoreError, api_version, kind_of, not_found


class ReadVerbsMixin:
    """get, list and watch of ApiServer. Needs ``self.store``, ``self._lock`` and ``self._list_snapshots``
    (continue token -> (items, resourceVersion, offset of the next page)).
    """

    def _do_get(self, req, resource, namespace, name, sub):
        obj = self.store.get(resource, namespace, name)
        if obj is None:
            raise not_found(resource, name)
        if sub == "log":
            return self._pod_log(obj)
        return (200, obj, {})

    @staticmethod
    def _pod_log(pod):
        """A simulated container prints nothing; one that never started has no log, as on a kubelet."""
        statuses = (pod.get("status") or {}).get("containerStatuses") or []
        container = ((pod.get("spec") or {}).get("containers") or [{}])[0].get("name")
        started = any("running" in (st.get("state") or {}) or "terminated" in (st.get("state") or {})
                      for st in statuses)
        if not started:
            reason = "ContainerCreating"
            for st in statuses:
                reason = ((st.get("state") or {}).get("waiting") or {}).get("reason") or reason
            raise StoreError(400, "BadRequest", 'container "%s" in pod "%s" is waiting to start: %s' % (
                container, pod["metadata"]["name"], reason))
        return (200, "", {})

    def _do_list(self, req, resource, namespace, name, sub):
        token = req.q("continue")
        asked_rv = req.q("resourceVersion")
        try:
            limit = int(req.q("limit") or 0)
        except ValueError:
            raise bad_request("invalid limit %r" % req.q("limit"))
        if token:
            if asked_rv not in (None, "", "0"):
                raise bad_request("specifying resource version is not allowed when using continue")
            items, rv, offset = self._continued_list(token)
        else:
            if asked_rv not in (None, "", "0"):
                try:
                    ahead = int(asked_rv) > int(self.store.resource_version)
                except ValueError:
                    raise bad_request('invalid resource version: strconv.ParseUint: parsing "%s": invalid syntax'
                                      % asked_rv)
                if ahead:
                    raise too_large_rv(asked_rv, self.store.resource_version)
            items, rv = self.store.list(resource, namespace, req.q("labelSelector"), req.q("fieldSelector"))
            offset = 0
        for item in items:
            # list items carry no type meta on the wire
            item.pop("kind", None)
            item.pop("apiVersion", None)
        metadata = {"resourceVersion": rv}
        if limit > 0 and len(items) - offset > limit:
            page = items[offset:offset + limit]
            next_offset = offset + limit
            last = page[-1]["metadata"]
            start = "%s/%s" % (last.get("namespace") or "", last["name"])
            # the apiserver's token is base64 JSON {"v", "rv", "start"}; the rest of this snapshot is kept here
            metadata["continue"] = base64.urlsafe_b64encode(json.dumps(
                {"v": "meta.k8s.io/v1", "rv": int(rv), "start": start + "\u0000"}).encode("utf-8")).decode("ascii")
            with self._lock:
                self._list_snapshots[metadata["continue"]] = (items, rv, next_offset)
                while len(self._list_snapshots) > 64:
                    self._list_snapshots.pop(next(iter(self._list_snapshots)))
            if not req.q("labelSelector") and not req.q("fieldSelector"):
                # remainingItemCount is left out when the list has a selector (ListMeta docs)
                metadata["remainingItemCount"] = len(items) - next_offset
            items = page
        else:
            items = items[offset:]
        return (200, {"kind": kind_of(resource) + "List", "apiVersion": api_version(resource),
                      "metadata": metadata, "items": items}, {})

    def _continued_list(self, token):
        """(all items of the first page's snapshot, its resourceVersion, offset of the next page)."""
        try:
            decoded = json.loads(base64.urlsafe_b64decode(token.encode("ascii")).decode("utf-8"))
            token_rv = int(decoded["rv"])
        except (ValueError, KeyError, TypeError, UnicodeError):
            raise bad_request("continue key is not valid: incorrect encoded start resourceVersion (version "
                              "meta.k8s.io/v1)")
        with self._lock:
            snapshot = self._list_snapshots.get(token)
        if snapshot is None or token_rv <= self.store.compacted_resource_version:
            # etcd no longer has the revision the list started at
            raise StoreError(410, "Expired", CONTINUE_EXPIRED_MESSAGE)
        items, rv, offset = snapshot
        # the snapshot's items are the store's copies, never changed after the first page: only the list
        # is copied (copying every item again made each page of a 5,000-node list cost as much as the first)
        return list(items), rv, offset

    def _do_watch(self, req, resource, namespace, name, sub):
        field_selector = req.q("fieldSelector")
        if name is not None:
            field_selector = ",".join(x for x in (field_selector, "metadata.name=%s" % name) if x)
        try:
            timeout = float(req.q("timeoutSeconds")) if req.q("timeoutSeconds") else 1800.0
        except ValueError:
            raise bad_request("invalid timeoutSeconds")
        try:
            watch = self.store.watch(resource, namespace, req.q("resourceVersion"), req.q("labelSelector"),
                                     field_selector)
        except StoreError as e:
            if e.code != 410:
                raise
            # the watch cache answers 200 and one ERROR event with the 410 Status
            return Streamed(None, resource, timeout, False, error=e)
        return Streamed(watch, resource, timeout, req.flag("allowWatchBookmarks"))
