# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What device_plugin_deploy and dra_driver_deploy do alike with the DaemonSet they manage, once each has built its
own manifest: DaemonSetTask, the base of both tasks (reads, the adoption rule for a DaemonSet someone else made,
a RuntimeClass the pods name, the write, the diff, the rollout wait of _daemonset_wait with its per-node outcome,
the deletion), and the rules it applies as functions. What only one module does is in that module's task:
_device_plugin_task (the ConfigMap, the OnDelete batches), _dra_driver_task (the RBAC, DeviceClasses and the devices
wait); the guards of both are _daemonset_guard.

Private to the collection. Every request goes through the module's KubeClient."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


from ansible_collections.kubehw.devices.plugins.module_utils import _daemonset_compare as compare
from ansible_collections.kubehw.devices.plugins.module_utils import _daemonset_rollout as ds_rollout
from ansible_collections.kubehw.devices.plugins.module_utils import _daemonset_wait as ds_wait
from ansible_collections.kubehw.devices.plugins.module_utils import _k8s_objects as objects
from ansible_collections.kubehw.devices.plugins.module_utils._errors import KubeHwError, TaskFailed, WaitTimedOut, timed_out
from ansible_collections.kubehw.devices.plugins.module_utils._k8s_objects import (
    MANAGED_BY,
    MANAGED_BY_LABEL,
    owner_description,
    update_body,
)


# -- ownership and adoption -------------------------------------------------------------------------------

def managed_here(obj):
    """True when the collection made ``obj`` (its managed-by label)."""
    return (((obj or {}).get("metadata") or {}).get("labels") or {}).get(MANAGED_BY_LABEL) == MANAGED_BY


def foreign_daemonset_refusal(live, namespace, name, adopt, action):
    """The refusal for a DaemonSet of that name someone else made (Helm, an operator, by hand), or None: it is
    theirs unless the task sets adopt_daemonset, in both modules."""
    if live is None or managed_here(live) or adopt:
        return None
    return ("DaemonSet %s/%s exists and was not created by this module (%s, no label %s=%s); this task would %s. "
            "Choose another name, remove that DaemonSet, or set adopt_daemonset: true to let this module take it "
            "over." % (namespace, name, owner_description(live), MANAGED_BY_LABEL, MANAGED_BY, action))


def adoption_warning(live, namespace, name):
    if live is not None and not managed_here(live):
        return ("DaemonSet %s/%s was not created by this module; it is now managed by it (adopt_daemonset)"
                % (namespace, name))
    return None


def daemonset_to_replace(live, desired, namespace, name, adopt, warnings):
    """The live DaemonSet both deploy modules go on with (None when there is none), after the checks they share:
    one whose selector differs (immutable) or that someone else made (unless ``adopt``) is refused with TaskFailed;
    an adopted one adds a warning to ``warnings``."""
    conflict = compare.selector_conflict(desired, live)
    if conflict:
        raise TaskFailed(conflict)
    refusal = foreign_daemonset_refusal(live, namespace, name, adopt, "replace its pod template")
    if refusal:
        raise TaskFailed(refusal + " Nothing was written.")
    adopted = adoption_warning(live, namespace, name)
    if adopted:
        warnings.append(adopted)
    return live


# -- the write ------------------------------------------------------------------------------------------------

def write_daemonset(client, namespace, name, desired, live, create, read):
    """Create (``create(body)``, the module's own, which names a missing namespace) or replace the DaemonSet.
    On 409 Conflict (someone wrote in between, or created it first) it reads again (``read()``) and recomputes,
    three times at most. Returns (stored DaemonSet, whether this call wrote it)."""
    for _attempt in range(3):
        try:
            if live is None:
                return create(desired), True
            return client.replace_json(client.apps.replace_namespaced_daemon_set, name, namespace,
                                       update_body(desired, live),
                                       what='replace DaemonSet "%s/%s"' % (namespace, name)), True
        except KubeHwError as err:
            if err.status != 409:
                raise
            live = read()
            if live is not None and not compare.differences(desired, live):
                return live, False
    raise KubeHwError('Failed to write DaemonSet "%s/%s": it kept changing under us (409 Conflict three times)'
                      % (namespace, name), status=409, reason="Conflict")


# -- checks before any write ---------------------------------------------------------------------------------

def missing_runtime_class(client, pod_spec):
    """The RuntimeClass the pod template names when it does not exist (the apiserver then refuses every pod), else
    None. Not readable (403) counts as present: the rollout wait still reports the refusal."""
    runtime_class = (pod_spec or {}).get("runtimeClassName")
    if not runtime_class:
        return None
    read = getattr(client.node_api, "read_runtime_class", None)
    if read is None:
        return None
    try:
        client.call_json(read, runtime_class, what='read RuntimeClass "%s"' % runtime_class)
    except KubeHwError as err:
        if err.status == 404:
            return runtime_class
        if err.status in (401, 403):
            return None
        raise
    return None


def deployment_spec():
    """The argument spec of the doc fragment kubehw.devices.daemonset_deployment: the options this task base reads."""
    return dict(adopt_daemonset=dict(type="bool", default=False),
                allow_empty_rollout=dict(type="bool", default=False),
                wait_timeout=dict(type="int", default=300))


# -- the task both deploy modules are ----------------------------------------------------------------------------

class DaemonSetTask(object):
    """One deploy task of the DaemonSet ``namespace/name``: what device_plugin_deploy and dra_driver_deploy share after
    building their manifest. Subclasses fill ``result`` and call these steps; options read here: adopt_daemonset,
    wait_timeout, allow_empty_rollout. Nodes are listed by the guard and once more by the wait (``node_watch``), then
    followed by watching: the nodes the desired template can select, where a label selector can say which
    (daemonset_to_replace() records the template before the first read of the nodes)."""

    def __init__(self, module, client, namespace, name):
        self.module = module
        self.client = client
        self.params = module.params
        self.check_mode = module.check_mode
        self.namespace = namespace
        self.name = name
        self.key = "%s/%s" % (namespace, name)
        self.result = dict(changed=False, daemonset=None, waited_for="none")
        self.diff = []          # one entry per object written (or to be), as _k8s_objects.report_task shows them
        self.warnings = []
        self.deadline = None
        self.since = None       # apiserver time of this run's DaemonSet write (its managedFields), for the events
        self.node_selection = None  # the desired pod template's spec: which nodes node_watch lists and follows
        self._node_watch = None
        self.waiter = None

    @property
    def node_watch(self):
        """The task's ListWatch of the nodes (made at first use, for the template recorded in node_selection)."""
        if self._node_watch is None:
            self._node_watch = ds_wait.node_list_watch(self.client, self.node_selection)
        return self._node_watch

    def remaining(self):
        """Seconds left of wait_timeout (the Deadline main() set when the task started)."""
        return self.deadline.left()

    # -- reads
    def read(self, fn, *args, **kwargs):
        """The object, or None when it does not exist (404)."""
        try:
            return self.client.call_json(fn, *args, **kwargs)
        except KubeHwError as err:
            if err.status == 404:
                return None
            raise

    def read_daemonset(self):
        return self.read(self.client.apps.read_namespaced_daemon_set, self.name, self.namespace,
                         what='read DaemonSet "%s"' % self.key)

    def nodes(self):
        """Every node: listed at the first call, then what the task's node watch holds."""
        return ds_wait.node_list(self.node_watch)

    def report_selected_nodes(self):
        """result selected_nodes: the nodes the desired template admits (recorded by select_nodes()), from the task's
        one list of the nodes."""
        self.result["selected_nodes"] = ds_rollout.admitted_nodes(self.node_selection, self.nodes())

    def select_nodes(self, pod_spec):
        """Records which nodes the task's DaemonSet runs on (a pod spec holding at least its tolerations, nodeSelector
        and affinity), once, before the node watch is made."""
        if self.node_selection is None:
            self.node_selection = pod_spec

    def daemonset_to_replace(self, desired):
        """The live DaemonSet (None when there is none) after the shared checks (daemonset_to_replace())."""
        self.select_nodes(desired["spec"]["template"].get("spec"))
        return daemonset_to_replace(self.read_daemonset(), desired, self.namespace, self.name,
                                    self.params.get("adopt_daemonset"), self.warnings)

    def refuse_foreign_daemonset(self, live, action, then=""):
        """TaskFailed for a DaemonSet of that name someone else made, unless adopt_daemonset (``then``: a sentence
        the refusal ends with)."""
        refusal = foreign_daemonset_refusal(live, self.namespace, self.name, self.params.get("adopt_daemonset"),
                                            action)
        if refusal:
            raise TaskFailed(refusal + then)

    # -- writes
    def record_change(self, kind, name):
        """A write this task made (or, in check mode, would make)."""
        self.result["changed"] = True

    def add_diff(self, kind, display, before, after):
        """A diff entry headed "<kind> <display>" (``after`` None: a deletion)."""
        header = "%s %s" % (kind, display)
        self.diff.append(dict(before_header=header, after_header=header,
                              before=objects.clean(before) or {}, after=objects.clean(after) or {}))

    def create(self, fn, args, body, what, find=None):
        """Create an object in the task's namespace (``args``: the positional arguments before the body); a namespace
        that does not exist is refused with its name and the way to create it."""
        try:
            return self.client.create_json(fn, *(tuple(args) + (body,)), what=what, find=find)
        except KubeHwError as err:
            details = (err.body or {}).get("details") or {}
            if err.status == 404 and (details.get("kind") == "namespaces" or 'namespaces "' in (err.msg or "")):
                raise TaskFailed('Namespace "%s" does not exist: create it first%s, or set namespace to an existing '
                                 'one. Nothing was written.' % (self.namespace, self.namespace_hint()))
            raise

    def namespace_hint(self):
        """How a refusal for a missing namespace names the way to create it ("" for none); a subclass says its own."""
        return ""

    def write_daemonset(self, desired, live):
        """Create or replace the DaemonSet (write_daemonset()); returns it as stored and notes the write's time."""
        written, wrote = write_daemonset(
            self.client, self.namespace, self.name, desired, live, read=self.read_daemonset,
            create=lambda body: self.create(self.client.apps.create_namespaced_daemon_set, (self.namespace,), body,
                                            'create DaemonSet "%s"' % self.key))
        if wrote:
            self.record_change("DaemonSet", self.name)
            self.since = ds_rollout.latest_write_time(written)
        return written

    def delete(self, fn, args, what):
        """Delete (background propagation: the pods go after the object); False when it was gone already."""
        try:
            self.client.call_json(fn, *args, propagation_policy="Background", what=what)
        except KubeHwError as err:
            if err.status == 404:
                return False
            raise
        return True

    def delete_daemonset(self):
        return self.delete(self.client.apps.delete_namespaced_daemon_set, (self.name, self.namespace),
                           'delete DaemonSet "%s"' % self.key)

    # -- waits
    def rollout_wait(self):
        """The task's RolloutWait (made at first use, after the write: it reads events from the write's time)."""
        if self.waiter is None:
            self.waiter = ds_wait.RolloutWait(self.client, self.namespace, self.name, self.deadline, self.since,
                                              self.node_watch)
        return self.waiter

    def wait_rollout(self, current, runs, fix_selection, done=ds_rollout.rollout_done, timeout_hint=None):
        """The rollout wait both modules run (RolloutWait.rollout()): every selected node covered, joining ones
        included, refusals and a spent budget named; fills result's daemonset, rollout and node_outcome."""
        self.result["waited_for"] = self.params["wait"]
        return self.rollout_wait().rollout(current, self.result, runs, fix_selection, self.params["wait_timeout"],
                                           self.params["allow_empty_rollout"], self.warnings, done=done,
                                           timeout_hint=timeout_hint)

    def wait_deleted(self):
        """Until the DaemonSet is gone (its finalizers done), within wait_timeout."""
        self.result["waited_for"] = "deletion"
        try:
            self.client.watch(self.client.apps.list_namespaced_daemon_set, lambda objs: self.key not in objs,
                              timeout=self.remaining(), what="see DaemonSet %s deleted" % self.key,
                              namespace=self.namespace, field_selector="metadata.name=%s" % self.name)
        except WaitTimedOut:
            raise TaskFailed(timed_out(self.params["wait_timeout"],
                                       "waiting for DaemonSet %s to be deleted (finalizers?)" % self.key))
