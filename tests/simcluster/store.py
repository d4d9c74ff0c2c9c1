# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""In-memory object store of the simulated cluster: etcd plus the generic registry logic.

Thread-safe. One global, increasing resourceVersion (as a string) is bumped on every write,
like etcd's revision. Objects are always handed out as deep copies.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import collections
import copy
import datetime
import queue
import threading
import uuid

# the resource table, errors and selectors live in their own modules; their names stay importable from here
from tests.simcluster.resources import (  # noqa: F401 pylint: disable=unused-import
    GENERATION_RESOURCES, RESOURCES, STATUS_RESOURCES, StoreError, already_exists, api_version, conflict, group_resource,
    is_namespaced, kind_of, missing_runtime_class, missing_service_account, not_found,
)
from tests.simcluster.selectors import (  # noqa: F401 pylint: disable=unused-import
    FIELD_PATHS, RESOURCE_FIELD_PATHS, field_match, label_match, parse_field_selector, parse_label_selector,
)


def now_rfc3339():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Watch:
    """A registered watcher: events arrive in .queue as (type, obj); None means closed."""

    def __init__(self, store, resource, namespace, label_reqs, field_reqs):
        self.store = store
        self.resource = resource
        self.namespace = namespace
        self.label_reqs = label_reqs
        self.field_reqs = field_reqs
        self.queue = queue.Queue()

    def matches(self, resource, obj):
        if resource != self.resource:
            return False
        meta = obj.get("metadata", {})
        if self.namespace is not None and meta.get("namespace") != self.namespace:
            return False
        return label_match(self.label_reqs, meta.get("labels")) and field_match(self.field_reqs, obj)

    def stop(self):
        self.store._remove_watch(self)
        self.queue.put(None)


# ---------------------------------------------------------------- store

class Store:
    def __init__(self, history_size=2000):
        self._lock = threading.RLock()
        self._objects = {}          # (resource, namespace, name) -> obj
        self._rv = 0
        self._history = collections.deque()   # (rv, type, resource, obj)
        self._history_size = history_size
        self._evicted_rv = 0        # highest rv no longer in history
        self._subscribers = []
        self._watches = []
        # Whether DELETE of a pod bound to a node only marks it Terminating (deletionTimestamp)
        # and leaves the final removal to a simulated kubelet. Set by controllers that do that.
        # a DELETE of a bound pod with a grace period leaves it Terminating until its kubelet removes it, with or
        # without controllers: kube-apiserver v1.36.2 with no kubelet keeps it so (measured by test_facts.py)
        self.graceful_pod_delete = True

    # -- helpers
    def _key(self, resource, namespace, name):
        if resource not in RESOURCES:
            raise StoreError(404, "NotFound", "the server could not find the requested resource")
        return (resource, namespace if is_namespaced(resource) else None, name)

    def _next_rv(self):
        self._rv += 1
        return str(self._rv)

    def _record(self, pending, event_type, resource, obj):
        rv = int(obj["metadata"]["resourceVersion"])
        snapshot = copy.deepcopy(obj)
        self._history.append((rv, event_type, resource, snapshot))
        while len(self._history) > self._history_size:
            self._evicted_rv = self._history.popleft()[0]
        for w in list(self._watches):
            if w.matches(resource, snapshot):
                w.queue.put((event_type, copy.deepcopy(snapshot)))
        pending.append((event_type, resource, snapshot))

    def _notify(self, pending):
        for event_type, resource, obj in pending:
            for cb in list(self._subscribers):
                try:
                    cb(event_type, resource, copy.deepcopy(obj))
                except Exception:  # pylint: disable=broad-except
                    # a broken subscriber must not break the writer
                    pass

    @property
    def resource_version(self):
        with self._lock:
            return str(self._rv)

    # -- interface
    def get(self, resource, namespace, name):
        with self._lock:
            obj = self._objects.get(self._key(resource, namespace, name))
            return copy.deepcopy(obj) if obj is not None else None

    def list(self, resource, namespace=None, label_selector=None, field_selector=None):
        label_reqs = parse_label_selector(label_selector) if isinstance(label_selector, str) else (label_selector or [])
        field_reqs = parse_field_selector(field_selector, resource) if isinstance(field_selector, str) else (field_selector or [])
        with self._lock:
            self._key(resource, namespace, "")
            items = []
            for (res, ns, _name), obj in self._objects.items():
                if res != resource:
                    continue
                if namespace is not None and is_namespaced(resource) and ns != namespace:
                    continue
                if not label_match(label_reqs, obj["metadata"].get("labels")):
                    continue
                if not field_match(field_reqs, obj):
                    continue
                items.append(copy.deepcopy(obj))
            items.sort(key=lambda o: (o["metadata"].get("namespace") or "", o["metadata"]["name"]))
            return items, str(self._rv)

    def create(self, resource, obj):
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        pending = []
        with self._lock:
            if is_namespaced(resource):
                ns = meta.get("namespace") or "default"
                meta["namespace"] = ns
                if resource != "events" and self._objects.get(("namespaces", None, ns)) is None:
                    raise not_found("namespaces", ns)
            else:
                meta.pop("namespace", None)
            if not meta.get("name"):
                if meta.get("generateName"):
                    meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
                else:
                    raise StoreError(422, "Invalid", "%s \"\" is invalid: metadata.name: Required value: name or "
                                     "generateName is required" % kind_of(resource),
                                     {"kind": kind_of(resource),
                                      "causes": [{"reason": "FieldValueRequired",
                                                  "message": "Required value: name or generateName is required",
                                                  "field": "metadata.name"}]})
            key = self._key(resource, meta.get("namespace"), meta["name"])
            if key in self._objects:
                raise already_exists(resource, meta["name"])
            obj["apiVersion"] = api_version(resource)
            obj["kind"] = kind_of(resource)
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = now_rfc3339()
            meta["resourceVersion"] = self._next_rv()
            for dropped in ("deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
                meta.pop(dropped, None)
            if resource in GENERATION_RESOURCES:
                meta["generation"] = 1
            else:
                meta.pop("generation", None)
            self._objects[key] = obj
            self._record(pending, "ADDED", resource, obj)
            result = copy.deepcopy(obj)
        self._notify(pending)
        return result

    def mutate(self, resource, namespace, name, fn):
        """fn(obj) edits a copy in place (it may raise StoreError to abort).

        If the object changed, resourceVersion is bumped (and generation when .spec changed
        for GENERATION_RESOURCES) and a MODIFIED event is sent. An object marked for deletion
        whose finalizers become empty is removed (DELETED event). Returns the new object,
        or None if the object does not exist.
        """
        pending = []
        with self._lock:
            key = self._key(resource, namespace, name)
            old = self._objects.get(key)
            if old is None:
                return None
            new = copy.deepcopy(old)
            fn(new)
            meta = new.setdefault("metadata", {})
            # identity fields are owned by the store
            for field in ("name", "namespace", "uid", "creationTimestamp"):
                if field in old["metadata"]:
                    meta[field] = old["metadata"][field]
                else:
                    meta.pop(field, None)
            meta["resourceVersion"] = old["metadata"]["resourceVersion"]
            if "deletionTimestamp" in old["metadata"]:
                meta["deletionTimestamp"] = old["metadata"]["deletionTimestamp"]
            if resource in GENERATION_RESOURCES:
                meta["generation"] = old["metadata"].get("generation", 1)
            new["apiVersion"] = api_version(resource)
            new["kind"] = kind_of(resource)
            if new == old:
                return copy.deepcopy(old)
            if resource in GENERATION_RESOURCES and new.get("spec") != old.get("spec"):
                meta["generation"] = old["metadata"].get("generation", 1) + 1
            meta["resourceVersion"] = self._next_rv()
            if meta.get("deletionTimestamp") and not meta.get("finalizers"):
                del self._objects[key]
                self._record(pending, "DELETED", resource, new)
            else:
                self._objects[key] = new
                self._record(pending, "MODIFIED", resource, new)
            result = copy.deepcopy(new)
        self._notify(pending)
        return result

    def delete(self, resource, namespace, name):
        """Remove the object at once (no finalizers, no grace). Returns the removed object."""
        pending = []
        with self._lock:
            key = self._key(resource, namespace, name)
            obj = self._objects.pop(key, None)
            if obj is None:
                return None
            # the DELETED event carries a fresh resourceVersion, like etcd's delete revision
            obj["metadata"]["resourceVersion"] = self._next_rv()
            self._record(pending, "DELETED", resource, obj)
            result = copy.deepcopy(obj)
        self._notify(pending)
        return result

    def mark_deleting(self, resource, namespace, name, grace_seconds=None):
        """Set deletionTimestamp (graceful delete / finalizers pending). Returns the object."""
        def _mark(obj):
            meta = obj["metadata"]
            if not meta.get("deletionTimestamp"):
                meta["deletionTimestamp"] = now_rfc3339()
                if grace_seconds is not None:
                    meta["deletionGracePeriodSeconds"] = grace_seconds
        pending = []
        with self._lock:
            key = self._key(resource, namespace, name)
            old = self._objects.get(key)
            if old is None:
                return None
            if old["metadata"].get("deletionTimestamp"):
                return copy.deepcopy(old)
            new = copy.deepcopy(old)
            _mark(new)
            new["metadata"]["resourceVersion"] = self._next_rv()
            self._objects[key] = new
            self._record(pending, "MODIFIED", resource, new)
            result = copy.deepcopy(new)
        self._notify(pending)
        return result

    def dependents(self, uid):
        """(resource, namespace, name) of objects with an ownerReference to uid."""
        with self._lock:
            out = []
            for (res, ns, name), obj in self._objects.items():
                for ref in obj["metadata"].get("ownerReferences") or []:
                    if ref.get("uid") == uid:
                        out.append((res, ns, name))
                        break
            return out

    def subscribe(self, callback):
        with self._lock:
            self._subscribers.append(callback)

    def unsubscribe(self, callback):
        with self._lock:
            if callback in self._subscribers:
                self._subscribers.remove(callback)

    def watch(self, resource, namespace=None, resource_version=None, label_selector=None, field_selector=None):
        """Register a watcher. resource_version None/"0"/"": synthetic ADDED for current objects first.

        Otherwise, replay the kept history after that version; 410 Gone if it is older than it.
        """
        label_reqs = parse_label_selector(label_selector) if isinstance(label_selector, str) else (label_selector or [])
        field_reqs = parse_field_selector(field_selector, resource) if isinstance(field_selector, str) else (field_selector or [])
        with self._lock:
            self._key(resource, namespace, "")
            w = Watch(self, resource, namespace if is_namespaced(resource) else None, label_reqs, field_reqs)
            if resource_version in (None, "", "0"):
                for (res, _ns, _name), obj in sorted(self._objects.items()):
                    if w.matches(res, obj):
                        w.queue.put(("ADDED", copy.deepcopy(obj)))
            else:
                try:
                    since = int(resource_version)
                except ValueError:
                    raise StoreError(400, "BadRequest",
                                     'invalid resource version: strconv.ParseUint: parsing "%s": invalid syntax'
                                     % resource_version)
                if since < self._evicted_rv:
                    raise StoreError(410, "Expired", "too old resource version: %d (%d)" % (since, self._evicted_rv + 1))
                for rv, event_type, res, obj in self._history:
                    if rv > since and w.matches(res, obj):
                        w.queue.put((event_type, copy.deepcopy(obj)))
            self._watches.append(w)
            return w

    def _remove_watch(self, w):
        with self._lock:
            if w in self._watches:
                self._watches.remove(w)

    def close_watches(self):
        with self._lock:
            watches, self._watches = self._watches, []
        for w in watches:
            w.queue.put(None)

    @property
    def compacted_resource_version(self):
        """Lists and watches that start at or below this resourceVersion are answered 410 Expired."""
        with self._lock:
            return self._evicted_rv

    def compact(self, expire_watches=False):
        """Forget all kept history (tests use it to provoke 410 Gone).

        expire_watches=True also ends every open watch the way the apiserver does when the
        revision it follows is compacted away: one ERROR event with a 410 Expired Status.
        """
        with self._lock:
            if self._history:
                self._evicted_rv = self._history[-1][0]
            self._history.clear()
            watches = []
            if expire_watches:
                watches, self._watches = self._watches, []
            evicted = self._evicted_rv
        for w in watches:
            error = StoreError(410, "Expired", "too old resource version: %d (%d)" % (evicted, evicted + 1))
            w.queue.put(("ERROR", error.status()))
            w.queue.put(None)
