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
import re
import threading
import uuid


# plural -> (group, version, kind, namespaced, short names)
RESOURCES = {
    "namespaces": ("", "v1", "Namespace", False, ["ns"]),
    "nodes": ("", "v1", "Node", False, ["no"]),
    "pods": ("", "v1", "Pod", True, ["po"]),
    "configmaps": ("", "v1", "ConfigMap", True, ["cm"]),
    "serviceaccounts": ("", "v1", "ServiceAccount", True, ["sa"]),
    "events": ("", "v1", "Event", True, ["ev"]),
    "secrets": ("", "v1", "Secret", True, []),
    "daemonsets": ("apps", "v1", "DaemonSet", True, ["ds"]),
    "clusterroles": ("rbac.authorization.k8s.io", "v1", "ClusterRole", False, []),
    "clusterrolebindings": ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", False, []),
    "roles": ("rbac.authorization.k8s.io", "v1", "Role", True, []),
    "rolebindings": ("rbac.authorization.k8s.io", "v1", "RoleBinding", True, []),
    "runtimeclasses": ("node.k8s.io", "v1", "RuntimeClass", False, []),
    # Dynamic Resource Allocation, stored as v1; tests/simcluster/dra_versions.py serves the other versions
    "deviceclasses": ("resource.k8s.io", "v1", "DeviceClass", False, []),
    "resourceslices": ("resource.k8s.io", "v1", "ResourceSlice", False, []),
    "resourceclaims": ("resource.k8s.io", "v1", "ResourceClaim", True, []),
    "resourceclaimtemplates": ("resource.k8s.io", "v1", "ResourceClaimTemplate", True, []),
    "poddisruptionbudgets": ("policy", "v1", "PodDisruptionBudget", True, ["pdb"]),
    # the node heartbeats a kubelet (the kubelet stand-in) renews in kube-node-lease
    "leases": ("coordination.k8s.io", "v1", "Lease", True, []),
}

# Resources whose metadata.generation tracks spec changes (as the real registry strategies do).
GENERATION_RESOURCES = frozenset(["daemonsets", "deviceclasses"])

# Resources with a /status subresource.
STATUS_RESOURCES = frozenset(["nodes", "pods", "daemonsets", "namespaces", "resourceclaims"])


def api_version(resource):
    group, version = RESOURCES[resource][0], RESOURCES[resource][1]
    return "%s/%s" % (group, version) if group else version


def kind_of(resource):
    return RESOURCES[resource][2]


def is_namespaced(resource):
    return RESOURCES[resource][3]


def now_rfc3339():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class StoreError(Exception):
    """A failure that the server turns into a Kubernetes Status answer as is."""

    def __init__(self, code, reason, message, details=None):
        super(StoreError, self).__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self):
        body = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def group_resource(resource):
    """nodes, daemonsets.apps: how the apiserver names a resource in messages."""
    group = RESOURCES[resource][0] if resource in RESOURCES else ""
    return "%s.%s" % (resource, group) if group else resource


def _details(resource, name):
    details = {"name": name}
    group = RESOURCES[resource][0] if resource in RESOURCES else ""
    if group:
        details["group"] = group
    details["kind"] = resource
    return details


def not_found(resource, name):
    return StoreError(404, "NotFound", '%s "%s" not found' % (group_resource(resource), name),
                      _details(resource, name))


def conflict(resource, name):
    return StoreError(
        409, "Conflict",
        'Operation cannot be fulfilled on %s "%s": the object has been modified; '
        "please apply your changes to the latest version and try again" % (group_resource(resource), name),
        _details(resource, name))


def missing_runtime_class(store, pod):
    """The RuntimeClass admission plugin's refusal of a pod whose runtimeClassName names no RuntimeClass, or None.

    kube-apiserver v1.32 plugin/pkg/admission/runtimeclass/admission.go (prepareObjects) answers
    admission.NewForbidden(pod rejected: RuntimeClass %q not found): 403 Forbidden, the pod named by its name,
    else its generateName (k8s.io/apiserver/pkg/admission/errors.go extractResourceName). FACTS.md, RuntimeClass.
    """
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    wanted = spec.get("runtimeClassName")
    if not isinstance(wanted, str) or not wanted or store.get("runtimeclasses", None, wanted) is not None:
        return None
    meta = pod.get("metadata") if isinstance(pod.get("metadata"), dict) else {}
    name = meta.get("name") or meta.get("generateName") or "Unknown"
    return StoreError(403, "Forbidden", 'pods "%s" is forbidden: pod rejected: RuntimeClass "%s" not found'
                      % (name, wanted), {"name": name, "kind": "pods"})


def missing_service_account(store, pod):
    """The ServiceAccount admission plugin's refusal of a pod whose service account does not exist, or None.

    plugin/pkg/admission/serviceaccount/admission.go: admission.NewForbidden(error looking up service account
    <ns>/<name>: serviceaccount "<name>" not found), measured on v1.36.2. Simplified: `default` always exists (the
    service account controller makes it in every namespace; there is none here).
    """
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    meta = pod.get("metadata") if isinstance(pod.get("metadata"), dict) else {}
    account = spec.get("serviceAccountName") or "default"
    if account == "default" or not isinstance(account, str) or store.get(
            "serviceaccounts", meta.get("namespace"), account) is not None:
        return None
    name = meta.get("name") or meta.get("generateName") or "Unknown"
    return StoreError(403, "Forbidden", 'pods "%s" is forbidden: error looking up service account %s/%s: '
                      'serviceaccount "%s" not found' % (name, meta.get("namespace"), account, account),
                      {"name": name, "kind": "pods"})


def already_exists(resource, name):
    return StoreError(409, "AlreadyExists", '%s "%s" already exists' % (group_resource(resource), name),
                      _details(resource, name))


# ---------------------------------------------------------------- selectors

_LABEL_REQ = re.compile(
    r"^\s*(?P<neg>!)?\s*(?P<key>[A-Za-z0-9_./-]+)\s*"
    r"(?:(?P<op>==|!=|=|\s+in\s+|\s+notin\s+)\s*(?P<val>\([^)]*\)|[^,()\s]*))?\s*$")


def _split_selector(text):
    """Split on commas that are not inside parentheses."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [p for p in parts if p.strip()]


def parse_label_selector(text):
    """Return a list of (key, op, values); op in =, !=, in, notin, exists, !exists."""
    reqs = []
    if not text:
        return reqs
    for part in _split_selector(text):
        m = _LABEL_REQ.match(part)
        if not m:
            raise StoreError(400, "BadRequest",
                             "unable to parse requirement: found '%s', expected: identifier" % part.strip())
        key, op, val = m.group("key"), (m.group("op") or "").strip(), m.group("val")
        if m.group("neg"):
            if op:
                raise StoreError(400, "BadRequest", "unable to parse requirement: %s" % part.strip())
            reqs.append((key, "!exists", None))
        elif not op:
            reqs.append((key, "exists", None))
        elif op in ("in", "notin"):
            if not val or not val.startswith("("):
                raise StoreError(400, "BadRequest",
                                 "unable to parse requirement: found '%s', expected: '('" % (val or ""))
            values = [v.strip() for v in val[1:-1].split(",") if v.strip()]
            reqs.append((key, op, values))
        else:
            reqs.append((key, "!=" if op == "!=" else "=", [val or ""]))
    return reqs


def label_match(reqs, labels):
    labels = labels or {}
    for key, op, values in reqs:
        if op == "exists" and key not in labels:
            return False
        if op == "!exists" and key in labels:
            return False
        if op in ("=", "in") and labels.get(key) not in values:
            return False
        if op in ("!=", "notin") and key in labels and labels[key] in values:
            return False
    return True


FIELD_PATHS = {
    "metadata.name": ("metadata", "name"),
    "metadata.namespace": ("metadata", "namespace"),
    "spec.nodeName": ("spec", "nodeName"),
    "status.phase": ("status", "phase"),
    "spec.unschedulable": ("spec", "unschedulable"),
    "involvedObject.name": ("involvedObject", "name"),
    "involvedObject.kind": ("involvedObject", "kind"),
    "reason": ("reason",),
}


# Field selectors a kind adds to the common ones (ResourceSlice: spec.driver; its API reference, resource.k8s.io/v1).
RESOURCE_FIELD_PATHS = {"resourceslices": {"spec.driver": ("spec", "driver")}}


def parse_field_selector(text, resource=None):
    paths = dict(FIELD_PATHS, **RESOURCE_FIELD_PATHS.get(resource, {}))
    reqs = []
    if not text:
        return reqs
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        m = re.match(r"^([A-Za-z0-9_.]+)\s*(==|!=|=)\s*(.*)$", part)
        if not m:
            raise StoreError(400, "BadRequest", "invalid selector: '%s'; can't understand '%s'" % (text, part))
        field, op, value = m.group(1), m.group(2), m.group(3)
        if field not in paths:
            kind = kind_of(resource) if resource in RESOURCES else resource
            raise StoreError(400, "BadRequest",
                             'field label not supported: %s' % field if kind is None else
                             '"%s" is not a known field selector: only "metadata.name", "metadata.namespace"'
                             % field)
        reqs.append((paths[field], op != "!=", value))
    return reqs


def _field_value(obj, path):
    cur = obj
    for p in path:
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(p)
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def field_match(reqs, obj):
    for path, equal, value in reqs:
        if (_field_value(obj, path) == value) != equal:
            return False
    return True


# ---------------------------------------------------------------- watch

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
