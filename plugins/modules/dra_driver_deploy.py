#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: dra_driver_deploy
short_description: Roll out a Dynamic Resource Allocation driver and wait until its devices are published
version_added: 1.0.0
description:
  - Deploys a DRA driver from a O(preset) the way M(kubehw.devices.device_plugin_deploy) deploys device plugins,
    sharing its rollout code. It writes the kubelet-plugin DaemonSet (plugin registration and DRA sockets under
    C(/var/lib/kubelet/plugins) and C(/var/lib/kubelet/plugins_registry)), the ServiceAccount, ClusterRole and
    ClusterRoleBinding the driver needs (O(rbac=create)), and the driver's DeviceClasses (O(device_classes)).
  - Every object is read first and compared semantically with what the task describes (the DaemonSet with the
    defaults the apiserver fills in); only what differs is written, so a second run sends no write.
  - With O(wait=devices) the task returns when every node running a ready kubelet-plugin pod has published
    ResourceSlices of the driver with at least O(min_count) devices. It watches ResourceSlices (a field selector on
    C(spec.driver)), it does not poll. Only the slices of each pool's newest generation count, and a pool counts once
    all its C(resourceSliceCount) slices are there. On timeout it names every node and what is missing.
  - The objects carry the label C(app.kubernetes.io/managed-by=kubehw.devices). A ServiceAccount, ClusterRole or
    ClusterRoleBinding of the same name made by someone else fails the task before any write; a DeviceClass made by
    someone else (for example by the driver's Helm chart) is left alone with a warning.
  - Speaks C(resource.k8s.io/v1) (Kubernetes 1.34 and later). Discovery checks that the cluster serves it before
    any write; where it does not (the betas of 1.32 and 1.33 are not supported) the task fails naming what the
    cluster offers and needs.
  - Every input is validated before the first request; a bad value fails with a message naming it.
author:
  - kubehw.devices contributors (@kubehw)
extends_documentation_fragment:
  - kubehw.devices.k8s_auth_options
  - kubehw.devices.daemonset_deployment
  - kubehw.devices.attributes.action_group
  - kubehw.devices.image_source
  - kubehw.devices.attributes
attributes:
  check_mode:
    support: full
    details:
      - Reads every object and reports what would change, and does not wait. The only requests with a write verb
        are the DeviceClasses' server-side dry runs (C(dryRun=All), nothing is stored), as
        M(kubehw.devices.dra_device_class) sends them in check mode.
  diff_mode:
    support: full
    details:
      - Each object that changes, before and after, without status and server-populated metadata.
  idempotent:
    support: full
options:
  preset:
    description:
      - Which DRA driver to deploy. V(example) is kubernetes-sigs/dra-example-driver v0.4.0 (driver
        C(gpu.example.com), simulated GPUs for test clusters), V(nvidia) is the GPU part of kubernetes-sigs/dra-driver-nvidia-gpu
        v0.4.1, the successor of NVIDIA/k8s-dra-driver-gpu (C(gpu.nvidia.com); ComputeDomains are not deployed), V(intel) is Intel's GPU resource driver
        gpu-v0.11.0 (C(gpu.intel.com)), V(amd) is AMD's GPU DRA driver ROCm/k8s-gpu-dra-driver v0.1.0
        (C(gpu.amd.com)), V(kubernetes_test) is Kubernetes' own DRA test driver
        (C(test-driver.cdi.k8s.io), the kubelet plugin of its end-to-end tests, with simulated devices and claims
        prepared through CDI) to prove a node's DRA stack without hardware; it has no published image, so O(image)
        is required. See C(docs/dra.md) for the upstream file of every default.
      - Required with O(state=present); with O(state=absent) it gives the default O(name) and the DeviceClasses to remove.
    type: str
    required: true
    choices: [example, nvidia, intel, amd, kubernetes_test]
  state:
    description:
      - V(present) creates or updates the driver's objects.
      - V(absent) deletes the DaemonSet, the RBAC objects and the DeviceClasses this module created (those labelled
        C(app.kubernetes.io/managed-by=kubehw.devices)); objects already gone are not an error. Unless O(wait=none),
        the task then waits until they are gone from the nodes (see O(wait)).
    type: str
    choices: [present, absent]
    default: present
  namespace:
    description:
      - Namespace of the DaemonSet and the ServiceAccount. It must exist; the task fails naming it when it does not.
    type: str
    default: kubehw-dra-drivers
  name:
    description:
      - Name of the DaemonSet, and of the ServiceAccount, ClusterRole and ClusterRoleBinding made for it.
      - Defaults to the upstream DaemonSet name of the preset (C(dra-example-driver-kubeletplugin),
        C(nvidia-dra-driver-gpu-kubelet-plugin), C(intel-gpu-resource-driver-kubelet-plugin),
        C(k8s-gpu-dra-driver-kubeletplugin), C(dra-test-driver-kubelet-plugin)).
    type: str
  image:
    description: Container image, replacing the preset's (all containers of the kubelet plugin use it).
    type: str
  env:
    description:
      - Environment variables of the kubelet-plugin container, added to or replacing the preset's, as name to value
        (for example C(NUM_DEVICES) of the example driver). A dictionary value is the variable's definition.
    type: dict
  node_selector:
    description:
      - Node labels the kubelet-plugin pods require. When set it replaces the preset's default node affinity.
    type: dict
  tolerations:
    description:
      - Tolerations of the kubelet-plugin pods, replacing the preset's. The preset's are upstream's
        (V(nvidia) tolerates C(nvidia.com/gpu:NoSchedule), the taint GPU nodes commonly carry; V(example), V(intel)
        and V(amd) none).
    type: list
    elements: dict
  rbac:
    description:
      - V(create) creates (and updates) the ServiceAccount, the ClusterRole with the preset's rules and its
        ClusterRoleBinding. The identity running the task then needs the permissions it grants, or C(escalate) and
        C(bind) on C(clusterroles).
      - V(existing) writes no RBAC object and only checks that the ServiceAccount O(name) exists in O(namespace);
        the collection's C(playbooks/rbac.yml) (or an administrator) created it, the ClusterRole and the binding.
        The deploying identity then needs no RBAC rights at all.
    type: str
    choices: [create, existing]
    default: create
  device_classes:
    description:
      - Create (and with O(state=absent) remove) the preset's DeviceClasses, with the code of
        M(kubehw.devices.dra_device_class) (a class made by others is left alone with a warning).
    type: bool
    default: true
  extended_resource_name:
    description:
      - Set C(spec.extendedResourceName) on the preset's main DeviceClass (C(gpu.example.com), C(gpu.nvidia.com),
        C(gpu.intel.com), C(gpu.amd.com)), so pods asking for that extended resource are served by the driver (KEP-5004, the
        C(DRAExtendedResource) feature gate). For the migration from a device plugin; see C(docs/dra.md).
      - A dry run checks first that the apiserver keeps the field; the task fails naming the gate when it drops it.
    type: str
  wait:
    description:
      - V(none) returns after the writes.
      - V(rollout) waits until the DaemonSet's rollout is done (every scheduled pod updated and available).
      - V(devices) also waits until every node running a ready kubelet-plugin pod has published ResourceSlices of the
        driver with at least O(min_count) devices (complete pools of the newest generation).
      - A rollout over zero nodes fails the task (the driver runs nowhere) unless O(allow_empty_rollout=true).
      - With O(state=absent), V(rollout) waits until the DaemonSet is deleted, and V(devices) also until none of the
        nodes its kubelet-plugin pods ran on publishes a ResourceSlice of the driver any more (the kubelet removes
        them once the driver's plugin there has stopped), by watching the driver's slices; a timeout names each node
        and what it still publishes. A run that deletes no DaemonSet does not wait; with V(devices) it reads the
        driver's ResourceSlices once and warns naming each node that still publishes some (for example one whose
        kubelet was down when an earlier run removed the driver).
    type: str
    choices: [none, rollout, devices]
    default: devices
  min_count:
    description: With O(wait=devices), the smallest number of devices each node must publish.
    type: int
    default: 1
  update_strategy:
    description:
      - How a template change reaches the kubelet-plugin pods, in place of the preset's rolling update (the
        presets' sources name theirs in the module's docs). Always a rolling update; give one or both numbers.
      - Raise O(update_strategy.max_unavailable) where nodes that are down hold a rolling update up (the rollout's
        message names them); keep O(update_strategy.max_surge) where a new plugin must start before the old stops.
    type: dict
    version_added: 1.1.0
    suboptions:
      max_unavailable:
        description: How many nodes may be without a ready kubelet plugin during the update (a number or a percentage).
        type: raw
      max_surge:
        description: How many nodes may run an old and a new kubelet plugin at the same time (a number or a percentage).
        type: raw
  nvidia_driver_root:
    description:
      - With O(preset=nvidia), where the NVIDIA driver is installed on the nodes (the chart's C(nvidiaDriverRoot)).
        V(/) when the driver is installed on the host, as the C(kubehw.devices.nvidia_driver) role does;
        V(/run/nvidia/driver) when the NVIDIA GPU Operator's driver container installs it. An absolute path in
        normal form.
      - Not set, the module looks for the GPU Operator's driver DaemonSet (labelled
        C(app.kubernetes.io/component=nvidia-driver) or C(app=nvidia-driver-daemonset)) before any write, and uses
        V(/run/nvidia/driver) where it runs on every node the driver runs on, V(/) where it runs on none of them, and
        the task fails before any write, naming the nodes, where it runs on only some (one path cannot serve both).
      - It is mounted as upstream does (the root as C(/driver-root), its parent as C(/driver-root-parent) for the
        init container, read-only for V(/), with C(HostToContainer) propagation otherwise) and set as
        C(NVIDIA_DRIVER_ROOT) in the init container and the plugin container.
    type: str
  allow_device_plugin_overlap:
    description:
      - The V(nvidia), V(intel) and V(amd) drivers hand out the same GPUs as the vendor's device plugin. The task fails before
        any write, naming the DaemonSets and the nodes, when a device plugin serving them runs, or will run once the
        node has joined, on a node the driver would run on. A device plugin is recognised by what it is, as one of
        M(kubehw.devices.device_plugin_deploy)'s serving a resource of the vendor's domain (MIG and time-sliced names
        included), one carrying the vendor's upstream labels on itself, its selector or its pod template (NVIDIA's
        static manifest, Helm chart, GPU Operator; AMD's static manifest and Helm chart), one running the vendor's
        device-plugin image (the AMD GPU Operator's), in any namespace;
        or a node whose allocatable already shows the resource. A second installation of the same driver (another
        namespace or name, a Helm release) on the same nodes is refused the same way, for every preset.
      - Set this to true only when both are meant to run there (upstream's C(gpuResourcesEnabledOverride)); the
        migration in C(docs/dra.md) keeps them on different nodes instead.
    type: bool
    default: false
notes:
  - The identity needs C(get), C(list), C(watch), C(create), C(update) and C(delete) on C(daemonsets) and C(get),
    C(create), C(update), C(delete) on C(serviceaccounts) in O(namespace), C(list) on C(pods) there, C(get), C(list),
    C(watch) on C(nodes) and on C(resourceslices), C(get), C(create), C(update), C(delete) on C(deviceclasses), and
    with O(rbac=create) the same on C(clusterroles) and C(clusterrolebindings) plus the rights the ClusterRole grants
    (or C(escalate)/C(bind)). See C(docs/dra.md).
  - The identity also needs C(list) on C(daemonsets) in all namespaces for the device-plugin check (V(nvidia),
    V(intel), V(amd)), C(list) on C(events) in O(namespace) for the rollout wait, and with O(preset=nvidia) and O(rbac=create)
    C(get), C(create), C(update), C(delete) on C(roles) and C(rolebindings) in O(namespace).
  - Each preset's Kubernetes floor is checked before any write (the server version), and the task refuses naming
    it.
  - The rollout wait fails within seconds, with the controller's message, when the DaemonSet controller's refusal
    to create the pods persists (C(FailedCreate) events of a quota, PodSecurity or an admission webhook reported again
    over 10 s while pods are missing, also when reported before this run); one the controller gets past does not
    stop the rollout. See C(docs/dra.md), "The rollout, shared with device_plugin_deploy".
seealso:
  - module: kubehw.devices.dra_device_class
  - module: kubehw.devices.device_plugin_deploy
  - name: Dynamic Resource Allocation
    description: The Kubernetes documentation.
    link: https://kubernetes.io/docs/concepts/scheduling-eviction/dynamic-resource-allocation/
"""

EXAMPLES = r"""
- name: Roll out the DRA example driver and wait until every node publishes at least 2 devices
  kubehw.devices.dra_driver_deploy:
    preset: example
    min_count: 2
    wait_timeout: 600
  register: dra

- name: Show what each node published
  ansible.builtin.debug:
    msg: "{{ item.name }}: {{ item.devices | join(', ') }}"
  loop: "{{ dra.nodes }}"
  loop_control:
    label: "{{ item.name }}"

- name: NVIDIA's GPU DRA driver on the nodes moved to DRA, its RBAC made by playbooks/rbac.yml
  kubehw.devices.dra_driver_deploy:
    preset: nvidia
    rbac: existing
    node_selector:
      kubehw.devices/gpu-allocation: dra
    extended_resource_name: nvidia.com/gpu

- name: Remove the example driver, its RBAC and its DeviceClass, and wait until its nodes no longer publish its devices
  kubehw.devices.dra_driver_deploy:
    preset: example
    state: absent
"""

RETURN = r"""
changed:
  description: Whether a write was made (or, in check mode, would be made).
  returned: always
  type: bool
daemonset:
  description: The kubelet-plugin DaemonSet as the server last returned it (predicted in check mode); none when absent.
  returned: always
  type: dict
driver:
  description: The DRA driver name of the preset.
  returned: always
  type: str
  sample: gpu.example.com
api_version:
  description: The version of C(resource.k8s.io) used.
  returned: when the group is served
  type: str
  sample: resource.k8s.io/v1
device_classes:
  description: Names of the preset's DeviceClasses this task manages (empty with O(device_classes=false)).
  returned: always
  type: list
  elements: str
  sample: ["gpu.example.com"]
rbac:
  description: Names of the ServiceAccount, ClusterRole and ClusterRoleBinding, and whether the module manages them.
  returned: always
  type: dict
  sample: {"mode": "create", "service_account": "kubehw-dra-drivers/dra-example-driver-kubeletplugin",
           "cluster_role": "dra-example-driver-kubeletplugin", "cluster_role_binding": "dra-example-driver-kubeletplugin"}
nvidia_driver_root:
  description: With O(preset=nvidia), the driver root the DaemonSet uses (O(nvidia_driver_root), or else
    V(/run/nvidia/driver) on nodes of the GPU Operator's driver container and V(/) on others).
  returned: with O(preset=nvidia) and O(state=present)
  type: str
  sample: /run/nvidia/driver
changed_objects:
  description: The objects written (or, in check mode, that would be written or deleted), as C(Kind/name).
  returned: always
  type: list
  elements: str
  sample: ["ServiceAccount/dra-example-driver-kubeletplugin", "DaemonSet/dra-example-driver-kubeletplugin"]
rollout:
  description: Rollout state of the DaemonSet, as M(kubehw.devices.device_plugin_deploy) reports it.
  returned: when state is present and the DaemonSet exists
  type: dict
selected_nodes:
  description: The nodes the DaemonSet's pod template admits, as M(kubehw.devices.device_plugin_deploy) returns them.
  returned: when state is present
  type: list
  elements: str
  sample: ["gpu-1", "gpu-2"]
  version_added: 1.1.0
node_outcome:
  description:
    - After a rollout wait, each node the pod template selects, joins or runs a pod on, and how it ended
      (V(ready) a ready pod of the current template; V(outdated) a ready pod of an older one, C(OnDelete);
      V(joining) registered but not schedulable yet; V(not-ready) a pod that is not ready, or a node that is not
      Ready, or stuck NotReady (its kubelet reported C(Ready=False) for 5 minutes or more, not
      waited for); V(pending) no pod yet; V(refused) no pod, and the DaemonSet controller's refusal stands;
      V(missing-devices) the pod runs but the node lacks what O(wait) asked for).
  returned: when O(wait) is not V(none) and the rollout was waited for, also when it failed
  type: dict
  sample: {"gpu-1": "ready", "gpu-2": "joining"}
nodes:
  description:
    - With O(wait=devices), per node running a ready kubelet-plugin pod, what the driver published there (complete
      pools of the newest generation), sorted by node name.
  returned: when O(wait=devices) succeeded
  type: list
  elements: dict
  contains:
    name:
      description: The node.
      type: str
    driver:
      description: The DRA driver.
      type: str
    pools:
      description: The pools the node's devices are in (one per node for every preset, named after the node).
      type: list
      elements: str
    devices:
      description: The device names published for the node.
      type: list
      elements: str
    device_count:
      description: How many devices.
      type: int
  sample: [{"name": "gpu-1", "driver": "gpu.example.com", "pools": ["gpu-1"], "devices": ["gpu-0", "gpu-1"],
            "device_count": 2}]
waited_for:
  description:
    - What the task waited for (V(none) in check mode or when nothing was waited for). With O(state=absent),
      V(deletion) (the DaemonSet deleted) or V(devices) (also the driver's ResourceSlices gone from its nodes).
  returned: always
  type: str
diff:
  description: The objects before and after, when run with C(--diff).
  returned: when diff mode is on and something changed
  type: list
  elements: dict
"""

import copy
import functools
import json

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.kubehw.devices.plugins.module_utils._client import KubeClient
from ansible_collections.kubehw.devices.plugins.module_utils._connection import (
    AUTH_ARG_SPEC,
    protect_kubeconfig_secrets,
    timeout_problem,
)
from ansible_collections.kubehw.devices.plugins.module_utils._errors import (
    InputRefused,
    KubeHwError,
    TaskFailed,
    WaitTimedOut,
    timed_out,
)
from ansible_collections.kubehw.devices.plugins.module_utils import _images as images
from ansible_collections.kubehw.devices.plugins.module_utils._images import image_source_spec
from ansible_collections.kubehw.devices.plugins.module_utils import _daemonset_compare as compare
from ansible_collections.kubehw.devices.plugins.module_utils import _daemonset_rollout as ds_rollout
from ansible_collections.kubehw.devices.plugins.module_utils import _daemonset_guard as guard
from ansible_collections.kubehw.devices.plugins.module_utils import _daemonset_task as ds_task
from ansible_collections.kubehw.devices.plugins.module_utils import _daemonset_wait as ds_wait
from ansible_collections.kubehw.devices.plugins.module_utils import _dra as dra
from ansible_collections.kubehw.devices.plugins.module_utils import _dra_device_class as dra_device_class
from ansible_collections.kubehw.devices.plugins.module_utils import _dra_driver_manifest as dra_manifest
from ansible_collections.kubehw.devices.plugins.module_utils import _dra_driver_presets as presets
from ansible_collections.kubehw.devices.plugins.module_utils import _dra_validation as dra_validation
from ansible_collections.kubehw.devices.plugins.module_utils import _k8s_objects as objects
from ansible_collections.kubehw.devices.plugins.module_utils._pod_spec import (
    NAME_LABEL,
    check_dns_label,
    check_env_names,
)
from ansible_collections.kubehw.devices.plugins.module_utils._pod_spec import positive_int as whole_number
from ansible_collections.kubehw.devices.plugins.module_utils._pod_spec import rolling_update
from ansible_collections.kubehw.devices.plugins.module_utils._waiting import Deadline
from ansible_collections.kubehw.devices.plugins.module_utils._dra_report import (
    describe_published,
    node_results,
    nodes_missing_devices,
    published_by_node,
    still_published,
)
from ansible_collections.kubehw.devices.plugins.module_utils._dra_driver_manifest import (
    DEFAULT_NAMESPACE,
    build_daemonset,
    build_namespace_rbac,
    build_rbac,
    device_class_params,
    object_names,
    placement,
)

WAIT_MODES = ("none", "rollout", "devices")
OVERLAP_OPTION = "allow_device_plugin_overlap"


# -- validation and building (pure functions; the builders are _dra_driver_manifest's) --------------------

def validate(params):
    """Everything that can be checked without a cluster; raises InputRefused naming the value and the rule."""
    preset = params.get("preset")
    if preset not in presets.PRESETS:
        raise InputRefused("preset %r must be one of %s" % (preset, ", ".join(presets.PRESET_NAMES)))
    check_dns_label(params.get("name") or presets.PRESETS[preset]["name"], "name")
    # an empty namespace is refused, never read as the default one
    check_dns_label(DEFAULT_NAMESPACE if params.get("namespace") is None else params["namespace"], "namespace")
    images.check_image(params.get("image"), InputRefused)
    images.check_image_registry(params.get("image_registry"), InputRefused)
    objects.check_pull_secrets(params.get("image_pull_secrets"), InputRefused)
    if params.get("state", "present") == "present" and not (params.get("image") or presets.PRESETS[preset]["image"]):
        raise InputRefused("preset %s has no default image (its upstream publishes none): set image" % preset)
    objects.label_map(params.get("node_selector"), "node_selector", InputRefused)
    objects.check_tolerations(params.get("tolerations"), InputRefused)
    check_env_names(params.get("env"))
    if params.get("nvidia_driver_root") is not None:
        if "driver_root" not in presets.PRESETS[preset]:
            raise InputRefused("nvidia_driver_root is an option of the nvidia preset, not of %s" % preset)
        dra_manifest.check_driver_root(params["nvidia_driver_root"])
    if params.get("update_strategy"):
        rolling_update(params["update_strategy"])
    if params.get("min_count") is not None:
        params["min_count"] = whole_number(params["min_count"], "min_count", minimum=0)
    problem = params.get("wait_timeout") is not None and timeout_problem("wait_timeout", params["wait_timeout"], True)
    if problem:
        raise InputRefused(problem)
    extended = params.get("extended_resource_name")
    if extended is not None:
        if not params.get("device_classes", True):
            raise InputRefused("extended_resource_name is set on the preset's DeviceClass: it needs "
                               "device_classes: true")
        problem = dra_validation.extended_name_problem(extended)
        if problem:
            raise InputRefused("extended_resource_name %r %s" % (extended, problem))
    for class_params in device_class_params(params):
        try:
            dra_device_class.build_device_class(class_params)
        except InputRefused as err:
            raise InputRefused("DeviceClass %s: %s" % (class_params["name"], err))


def _labels_differ(desired, live):
    have = (live.get("metadata") or {}).get("labels") or {}
    return [k for k, v in sorted((desired["metadata"].get("labels") or {}).items()) if have.get(k) != v]


def rbac_differences(desired, live):
    """JSON-pointer-ish paths where a live RBAC object or ServiceAccount differs from the desired one."""
    if live is None:
        return ["/"]
    paths = ["/metadata/labels/%s" % k for k in _labels_differ(desired, live)]
    for field in ("rules", "roleRef", "subjects"):
        if field in desired and _canonical_rbac(desired[field]) != _canonical_rbac(live.get(field)):
            paths.append("/" + field)
    return paths


def _canonical_rbac(value):
    # The apiserver stores rules and subjects as sent, dropping empty lists (omitempty) and defaulting nothing
    # else the module sends; compare as data.
    def strip(item):
        if isinstance(item, dict):
            return dict((k, strip(v)) for k, v in item.items() if v not in (None, [], {}))
        if isinstance(item, list):
            return [strip(v) for v in item]
        return item
    return json.dumps(strip(value), sort_keys=True)


def bound_elsewhere(binding, name, namespace):
    """The namespaces, other than ``namespace``, whose ServiceAccount ``name`` the module's ClusterRoleBinding
    ``name`` binds: a driver of the same name deployed there owns the cluster-wide ClusterRole and binding."""
    if binding is None or not managed_here(binding, name):
        return []
    return sorted(set(s.get("namespace") for s in binding.get("subjects") or []
                      if s.get("kind") == "ServiceAccount" and s.get("name") == name
                      and s.get("namespace") and s.get("namespace") != namespace))


def managed_here(obj, name=None):
    """True when the collection made ``obj`` (_daemonset_task.managed_here) and, given ``name``, for this driver."""
    labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
    return ds_task.managed_here(obj) and (name is None or labels.get(NAME_LABEL) == name)


# -- the task --------------------------------------------------------------------------------------

class DraDriverDeploy(ds_task.DaemonSetTask):
    """One task: read, compare, write what differs, wait; every request through self.client. The steps both deploy
    modules share are _daemonset_task.DaemonSetTask's; RBAC, DeviceClasses, the guard and the devices wait are this
    one's."""

    def __init__(self, module, client, dra_api=None):
        name, namespace = object_names(module.params)
        super(DraDriverDeploy, self).__init__(module, client, namespace, name)
        self.preset = presets.PRESETS[self.params["preset"]]
        self.driver = self.preset["driver"]
        self.api = dra_api or dra.DraApi(client)
        self._daemonsets = None     # every DaemonSet of the cluster, listed once for the checks before any write
        self.result.update(driver=self.driver, device_classes=[], changed_objects=[],
                           rbac={"mode": self.params["rbac"],
                                 "service_account": "%s/%s" % (self.namespace, self.name),
                                 "cluster_role": self.name, "cluster_role_binding": self.name})

    def namespace_hint(self):
        return " (playbooks/rbac.yml creates %s)" % DEFAULT_NAMESPACE

    def record_change(self, kind, name):
        super(DraDriverDeploy, self).record_change(kind, name)
        self.result["changed_objects"].append("%s/%s" % (kind, name))

    # -- reads -------------------------------------------------------------------------------------
    def read_rbac(self):
        account = self.read(self.client.core.read_namespaced_service_account, self.name, self.namespace,
                            what='read ServiceAccount "%s/%s"' % (self.namespace, self.name))
        if self.params["rbac"] != "create":
            return account, None, None
        role = self.read(self.client.rbac.read_cluster_role, self.name, what='read ClusterRole "%s"' % self.name)
        binding = self.read(self.client.rbac.read_cluster_role_binding, self.name,
                            what='read ClusterRoleBinding "%s"' % self.name)
        return account, role, binding

    def read_namespace_rbac(self):
        role = self.read(self.client.rbac.read_namespaced_role, self.name, self.namespace,
                         what='read Role "%s/%s"' % (self.namespace, self.name))
        binding = self.read(self.client.rbac.read_namespaced_role_binding, self.name, self.namespace,
                            what='read RoleBinding "%s/%s"' % (self.namespace, self.name))
        return role, binding

    def _check_device_plugin_overlap(self, desired_ds):
        """Refuse before any write when something else would hand out the same devices on a node the driver runs on,
        or will once it has joined: a device plugin serving the preset's devices (recognised by its labels, selector
        or image, or as the collection's; upstream: gpuResourcesEnabledOverride), a node whose allocatable shows
        that a plugin serves them, or a second installation of the same driver."""
        if self.params.get(OVERLAP_OPTION):
            return
        plugin = self.preset.get("device_plugin")
        daemonsets = self.all_daemonsets()
        pod_spec = desired_ds["spec"]["template"]["spec"]
        nodes = self.nodes()
        # the driver's images by name, not by registry: NVIDIA's chart, kubernetes-sigs' chart or a mirror of either
        images = [image for image in (self.preset["image"], self.params.get("image")) if image]
        images += list(self.preset.get("previous_images") or ())
        twins = guard.same_driver_daemonsets(daemonsets, self.driver, sorted(set(guard.image_name(i) for i in images)),
                                             (self.namespace, self.name))
        twin_overlap = guard.overlapping_nodes(pod_spec, twins, nodes)
        if twin_overlap:
            raise TaskFailed(guard.same_driver_message(self.driver, twin_overlap, OVERLAP_OPTION))
        if not plugin:
            return
        overlap = guard.overlapping_nodes(pod_spec, guard.device_plugin_daemonsets(daemonsets, plugin), nodes)
        explained = set(node for shared in overlap.values() for node in shared)
        serving = dict((node, held) for node, held in guard.nodes_serving(pod_spec, nodes, plugin["resources"]).items()
                       if node not in explained)
        if overlap or serving:
            raise TaskFailed(guard.overlap_message(self.driver, overlap, plugin["resources"], OVERLAP_OPTION,
                                                   serving))

    def all_daemonsets(self):
        """Every DaemonSet of the cluster, listed once per task."""
        if self._daemonsets is None:
            listing = self.client.list_all(self.client.apps.list_daemon_set_for_all_namespaces,
                                           what="list DaemonSets in all namespaces (device plugins, other installations "
                                                "of %s, the GPU Operator's driver)" % self.driver)
            self._daemonsets = listing.get("items") or []
        return self._daemonsets

    def _driver_root_of_the_operator(self):
        """With the nvidia preset and nvidia_driver_root not set: /run/nvidia/driver where the GPU Operator's driver
        container installs the driver on every node the driver runs on (as accelerator_node finds it on the hosts),
        None where it runs on none of them; refused when it covers only some."""
        if "driver_root" not in self.preset or self.params.get("nvidia_driver_root") is not None:
            return None
        operator = guard.operator_driver_daemonsets(self.all_daemonsets())
        if not operator:
            return None
        pod_spec = self.node_selection
        nodes = self.nodes()
        covered = guard.overlapping_nodes(pod_spec, operator, nodes)
        if not covered:
            return None
        uncovered = guard.eligible_nodes(pod_spec, nodes) - set(n for shared in covered.values() for n in shared)
        if uncovered:
            raise TaskFailed(guard.operator_driver_root_message(covered, uncovered, presets.NVIDIA_OPERATOR_DRIVER_ROOT))
        return presets.NVIDIA_OPERATOR_DRIVER_ROOT

    # -- present -----------------------------------------------------------------------------------
    def present(self):
        version = self._served_version_the_preset_runs_on()
        self.select_nodes(placement(self.params))
        operator_root = self._driver_root_of_the_operator()
        if operator_root is not None:
            self.params["nvidia_driver_root"] = operator_root
        desired_ds = build_daemonset(self.params)
        if "driver_root" in self.preset:
            self.result["nvidia_driver_root"] = self.params.get("nvidia_driver_root") or presets.NVIDIA_DEFAULT_DRIVER_ROOT
        classes = device_class_params(self.params)
        self.result["device_classes"] = [c["name"] for c in classes]
        # Every read and every refusal before the first write.
        live_ds = self.daemonset_to_replace(desired_ds)
        self._check_device_plugin_overlap(desired_ds)
        self.report_selected_nodes()
        rbac_plan = self._rbac_plan()
        ds_diffs = compare.differences(desired_ds, live_ds)
        self._add_planned_diffs(rbac_plan, desired_ds, live_ds, ds_diffs)
        if self.check_mode:
            self._predict(rbac_plan, classes, desired_ds, live_ds, ds_diffs)
            return
        current = self._write_all(rbac_plan, classes, desired_ds, live_ds, ds_diffs)
        self._wait(current, version)

    def _served_version_the_preset_runs_on(self):
        """Checks that the cluster serves resource.k8s.io/v1 and is new enough for the preset's driver, before anything
        else: such a driver would only hang a rollout."""
        version = self.api.discover()
        self.result["api_version"] = "%s/%s" % (dra.GROUP, version)
        problem = dra_manifest.version_problem(self.params["preset"], self.api.server_version())
        if problem:
            raise TaskFailed("Refusing to deploy: %s. Nothing was written." % problem)
        return version

    def _rbac_plan(self):
        """[(kind, desired, live)] of the ServiceAccount and RBAC objects to create or replace. With rbac: existing
        nothing, but the ServiceAccount must exist; with rbac: create, refuses objects another driver or someone
        else owns."""
        live_account, live_role, live_binding = self.read_rbac()
        if self.params["rbac"] == "existing":
            if live_account is None:
                raise TaskFailed(
                    'ServiceAccount "%s/%s" does not exist, and rbac is existing: create it, the ClusterRole "%s" and '
                    'its ClusterRoleBinding "%s" first (playbooks/rbac.yml does), or set rbac: create. Nothing was '
                    "written." % (self.namespace, self.name, self.name, self.name))
            return []
        elsewhere = bound_elsewhere(live_binding, self.name, self.namespace)
        if elsewhere:
            raise TaskFailed(
                'ClusterRoleBinding "%s" binds the ServiceAccount of the driver "%s" in namespace %s: the ClusterRole '
                "and binding are cluster-wide and named after the driver, so a driver of the same name in "
                "namespace %s would take them over. Give this driver another name. Nothing was written."
                % (self.name, self.name, ", ".join(elsewhere), self.namespace))
        account, role, binding = build_rbac(self.params)
        wanted = [("ServiceAccount", account, live_account), ("ClusterRole", role, live_role),
                  ("ClusterRoleBinding", binding, live_binding)]
        namespace_rbac = build_namespace_rbac(self.params)
        if namespace_rbac is not None:
            live_ns_role, live_ns_binding = self.read_namespace_rbac()
            wanted += [("Role", namespace_rbac[0], live_ns_role), ("RoleBinding", namespace_rbac[1], live_ns_binding)]
        for kind, desired, live in wanted:
            if live is not None and not managed_here(live, self.name):
                raise TaskFailed(
                    "%s %s exists and was not created by this module (%s): it would be replaced and deleted with "
                    "the driver. Remove it, choose another name, or set rbac: existing to use it as it is. "
                    "Nothing was written." % (kind, self._display(desired), objects.owner_description(live)))
        return [(kind, desired, live) for kind, desired, live in wanted if rbac_differences(desired, live)]

    def _add_planned_diffs(self, rbac_plan, desired_ds, live_ds, ds_diffs):
        for kind, desired, live in rbac_plan:
            self.add_diff(kind, self._display(desired), live, desired if live is None else self._update(desired, live))
        if ds_diffs:
            self.add_diff("DaemonSet", "%s/%s" % (self.namespace, self.name), live_ds,
                          desired_ds if live_ds is None else objects.update_body(desired_ds, live_ds))
            if live_ds is not None:
                self.result["changed_paths"] = ds_diffs

    def _predict(self, rbac_plan, classes, desired_ds, live_ds, ds_diffs):
        """Check mode: what a run would change, nothing written."""
        for kind, desired, _live in rbac_plan:
            self.record_change(kind, desired["metadata"]["name"])
        # dra_device_class's check mode: creates and updates as server-side dry runs, which store nothing
        self._device_classes(classes)
        if ds_diffs:
            self.record_change("DaemonSet", self.name)
        self.result["daemonset"] = live_ds if not ds_diffs else (
            desired_ds if live_ds is None else objects.update_body(desired_ds, live_ds))
        if live_ds is not None:
            self.result["rollout"] = ds_rollout.rollout_status(live_ds)

    def _write_all(self, rbac_plan, classes, desired_ds, live_ds, ds_diffs):
        """Write what differs; returns the DaemonSet as stored."""
        # DeviceClasses first: one whose extendedResourceName the apiserver would drop fails (after a dry run)
        # before anything else is written. Then RBAC: the DaemonSet's pods need their ServiceAccount, and the
        # plugin its rights, when they start.
        self._device_classes(classes)
        for kind, desired, live in rbac_plan:
            self._write_rbac(kind, desired, live)
        current = live_ds
        if ds_diffs:
            current = self.write_daemonset(desired_ds, live_ds)
        self.result["daemonset"] = current
        return current

    def _wait(self, current, version):
        """The wait asked for: none (report the rollout), the rollout, or the rollout and the devices published."""
        wait = self.params["wait"]
        if wait == "none":
            self.result["rollout"] = ds_rollout.rollout_status(current)
            return
        current = self.wait_rollout(current, "the DRA driver", "Label the nodes, set node_selector",
                                    timeout_hint=self._driver_root_hint)
        self.result["daemonset"] = current
        if wait == "devices":
            self._wait_devices(current, version)

    def _display(self, obj):
        meta = obj["metadata"]
        return '"%s/%s"' % (meta["namespace"], meta["name"]) if meta.get("namespace") else '"%s"' % meta["name"]

    @staticmethod
    def _update(desired, live):
        body = objects.update_body(desired, live)
        for field in ("rules", "roleRef", "subjects", "spec"):
            if field in desired:
                body[field] = copy.deepcopy(desired[field])
        return body

    def _write_rbac(self, kind, desired, live):
        name = desired["metadata"]["name"]
        core, rbac = self.client.core, self.client.rbac
        calls = {
            "ServiceAccount": (core.create_namespaced_service_account, core.replace_namespaced_service_account,
                               core.read_namespaced_service_account, (self.namespace,)),
            "ClusterRole": (rbac.create_cluster_role, rbac.replace_cluster_role, rbac.read_cluster_role, ()),
            "ClusterRoleBinding": (rbac.create_cluster_role_binding, rbac.replace_cluster_role_binding,
                                   rbac.read_cluster_role_binding, ()),
            "Role": (rbac.create_namespaced_role, rbac.replace_namespaced_role, rbac.read_namespaced_role,
                     (self.namespace,)),
            "RoleBinding": (rbac.create_namespaced_role_binding, rbac.replace_namespaced_role_binding,
                            rbac.read_namespaced_role_binding, (self.namespace,)),
        }
        create_fn, replace_fn, read_fn, scope = calls[kind]
        find = self.client.finder(read_fn, name, *scope, what="read %s %s again" % (kind, self._display(desired)))
        if live is None:
            self.create(create_fn, scope, desired, "create %s %s" % (kind, self._display(desired)), find)
        elif kind in ("ClusterRoleBinding", "RoleBinding") and live.get("roleRef") != desired["roleRef"]:
            # roleRef is immutable: a binding of ours pointing elsewhere is replaced by delete and create.
            delete_fn = rbac.delete_cluster_role_binding if kind == "ClusterRoleBinding" else \
                rbac.delete_namespaced_role_binding
            self.client.call_json(delete_fn, name, *scope, what="delete %s %s" % (kind, self._display(desired)))
            self.create(create_fn, scope, desired, "create %s %s" % (kind, self._display(desired)), find)
        else:
            self.client.replace_json(replace_fn, name, *(scope + (self._update(desired, live),)),
                                     what="replace %s %s" % (kind, self._display(desired)), find=find)
        self.record_change(kind, name)

    def _device_classes(self, class_params):
        """Each DeviceClass through dra_device_class's own task (_dra_device_class.manage_device_class): read,
        compare, a class made by others left alone with a warning, the DRAExtendedResource dry run, write or delete."""
        for params in class_params:
            task = dra_device_class.manage_device_class(self.api, params, self.check_mode)
            self.warnings.extend(task.warnings)
            if task.diff:
                self.diff.append(task.diff)
            if task.result.get("changed"):
                self.record_change("DeviceClass", params["name"])

    # -- waiting -----------------------------------------------------------------------------------
    def _driver_root_hint(self, daemonset, pods):
        """The nvidia preset's init container waits, without end, until it finds the driver under the driver root: a
        pod still initializing at the timeout most likely looks in the wrong place."""
        if "driver_root" not in self.preset:
            return ""
        waiting = sorted(p["metadata"]["name"] for p in pods if ds_rollout.initializing(p))
        if not waiting:
            return ""
        root = self.params.get("nvidia_driver_root") or presets.NVIDIA_DEFAULT_DRIVER_ROOT
        return ("; pod(s) %s are still in their init container, which waits until it finds the NVIDIA driver under "
                "nvidia_driver_root (%s here): where the GPU Operator's driver container installs the driver set "
                "nvidia_driver_root: %s, where the driver is installed on the host (the nvidia_driver role) keep %s"
                % (", ".join(waiting), root, presets.NVIDIA_OPERATOR_DRIVER_ROOT, presets.NVIDIA_DEFAULT_DRIVER_ROOT))

    def _slices_fn(self, version):
        return functools.partial(self.api.custom.list_cluster_custom_object, dra.GROUP, version, "resourceslices")

    def _wait_devices(self, current, version):
        min_count = self.params["min_count"]
        pods = [p for p in self.rollout_wait().pods(current) if not p["metadata"].get("deletionTimestamp")]
        ready = sorted(set(ds_rollout.pod_node(p) for p in pods if ds_rollout.pod_node(p) and ds_rollout.pod_ready(p)))
        not_ready = sorted(set(ds_rollout.pod_node(p) for p in pods if ds_rollout.pod_node(p)) - set(ready))

        def enough(found):
            return not nodes_missing_devices(published_by_node(found.values(), self.driver), ready, min_count)

        try:
            found = self.client.watch(
                self._slices_fn(version), enough, timeout=self.remaining(),
                what="see ResourceSlices of driver %s with at least %d device(s) on %d node(s)"
                % (self.driver, min_count, len(ready)),
                field_selector="spec.driver=%s" % self.driver)
        except WaitTimedOut as err:
            published = published_by_node((err.objects or {}).values(), self.driver)
            self._record_devices(published, ready, min_count)
            raise TaskFailed(self._devices_timeout(published, ready, not_ready, pods, min_count))
        self._record_devices(published_by_node(found.values(), self.driver), ready, min_count)

    def _record_devices(self, published, ready, min_count):
        self.result["nodes"] = node_results(published, ready, self.driver)
        outcome = self.result.get("node_outcome") or {}
        for node in nodes_missing_devices(published, ready, min_count):
            outcome[node] = ds_wait.MISSING_DEVICES

    def _devices_timeout(self, published, ready, not_ready, pods, min_count):
        parts = [timed_out(self.params["wait_timeout"], "waiting for the nodes running DaemonSet %s/%s to publish "
                           "ResourceSlices of driver %s with at least %d device(s) each"
                           % (self.namespace, self.name, self.driver, min_count))]
        missing = nodes_missing_devices(published, ready, min_count)
        if missing:
            parts.append("nodes without enough devices: %s" % ", ".join(
                "%s (%s)" % (node, text) for node, text in sorted(missing.items())))
        if not_ready:
            reasons = {}
            for pod in pods:
                node = ds_rollout.pod_node(pod)
                if node in not_ready:
                    reasons[node] = "; ".join(ds_rollout.pod_waiting_reasons(pod)) or "not ready"
            parts.append("nodes whose kubelet-plugin pod is not ready: %s" % ", ".join(
                "%s (%s)" % (node, reasons.get(node, "not ready")) for node in not_ready))
        return "; ".join(parts)

    # -- absent ------------------------------------------------------------------------------------
    def absent(self):
        # Discovery first: a cluster without resource.k8s.io/v1 has no DeviceClasses of ours to remove.
        served = dra.VERSION if dra.VERSION in self.api.served_versions() else None
        self.api.version = served
        if served:
            self.result["api_version"] = "%s/%s" % (dra.GROUP, served)
        plan = []
        live_ds = self.read_daemonset()
        self.refuse_foreign_daemonset(live_ds, "delete it", " Nothing was deleted.")
        if live_ds is not None:
            plan.append(("DaemonSet", live_ds))
        if self.params["rbac"] == "create":
            live_rbac = self.read_rbac()
            elsewhere = bound_elsewhere(live_rbac[2], self.name, self.namespace)
            for kind, live in zip(("ServiceAccount", "ClusterRole", "ClusterRoleBinding"), live_rbac):
                if live is not None and elsewhere and kind != "ServiceAccount":
                    self.warnings.append("%s %s is also the driver's in namespace %s: left alone"
                                         % (kind, self._display(live), ", ".join(elsewhere)))
                elif live is not None and managed_here(live, self.name):
                    plan.append((kind, live))
                elif live is not None:
                    self.warnings.append("%s %s was not created by this module: left alone"
                                         % (kind, self._display(live)))
            if "namespace_rules" in self.preset and self.preset["namespace_rules"]:
                for kind, live in zip(("Role", "RoleBinding"), self.read_namespace_rbac()):
                    if live is not None and managed_here(live, self.name):
                        plan.append((kind, live))
                    elif live is not None:
                        self.warnings.append("%s %s was not created by this module: left alone"
                                             % (kind, self._display(live)))
        classes = device_class_params(self.params, state="absent") if served else []
        self.result["device_classes"] = [c["name"] for c in classes]
        # The DaemonSet first (its pods stop publishing), then the DeviceClasses, the binding before the role,
        # the account last.
        order = ("DaemonSet", "RoleBinding", "Role", "ClusterRoleBinding", "ClusterRole", "ServiceAccount")
        plan.sort(key=lambda item: order.index(item[0]))
        waiting = live_ds is not None and self.params["wait"] != "none" and not self.check_mode
        # the nodes whose devices the driver's pods publish, read before the DaemonSet goes (its pods go with it)
        plugin_nodes = self._plugin_nodes(live_ds) if waiting and served and self.params["wait"] == "devices" else []
        for kind, live in [item for item in plan if item[0] == "DaemonSet"]:
            self._remove(kind, live)
        self._device_classes(classes)
        for kind, live in [item for item in plan if item[0] != "DaemonSet"]:
            self._remove(kind, live)
        if waiting:
            self.wait_deleted()
        if plugin_nodes:
            self._wait_unpublished(plugin_nodes, served)
        elif live_ds is None and served and self.params["wait"] == "devices":
            self._warn_still_published(served)

    def _plugin_nodes(self, live_ds):
        """The nodes the DaemonSet's pods run on (or are bound to)."""
        return sorted(set(ds_rollout.pod_node(p) for p in self.rollout_wait().pods(live_ds) if ds_rollout.pod_node(p)))

    def _wait_unpublished(self, nodes, version):
        """Until none of ``nodes`` publishes a ResourceSlice of the driver (the kubelet removes a node's slices once
        the driver's plugin there has stopped), by watching the driver's slices, within wait_timeout."""
        self.result["waited_for"] = "devices"
        try:
            self.client.watch(self._slices_fn(version), lambda found: not still_published(found.values(), nodes),
                              timeout=self.remaining(),
                              what="see the ResourceSlices of driver %s gone from %d node(s)" % (self.driver, len(nodes)),
                              field_selector="spec.driver=%s" % self.driver)
        except WaitTimedOut as err:
            left = still_published((err.objects or {}).values(), nodes)
            raise TaskFailed(timed_out(
                self.params["wait_timeout"], "waiting for the nodes that ran DaemonSet %s/%s to stop publishing "
                "ResourceSlices of driver %s: %s. The kubelet removes a node's slices once the driver's plugin there has "
                "stopped; a node whose kubelet is down keeps them (set wait: rollout not to wait for them)"
                % (self.namespace, self.name, self.driver, describe_published(left))))

    def _warn_still_published(self, version):
        """A run that found no DaemonSet to delete waits for nothing; it says which nodes still publish ResourceSlices of
        the driver (those of a node whose kubelet was down when an earlier run removed the driver, or of another
        deployment of the same driver), read once."""
        slices = self.client.list_all(self._slices_fn(version), what="list the ResourceSlices of driver %s" % self.driver,
                                      field_selector="spec.driver=%s" % self.driver).get("items") or []
        left = still_published(slices)
        if left:
            self.warnings.append(
                "No DaemonSet %s/%s was left to delete, so nothing was waited for, but nodes still publish ResourceSlices "
                "of driver %s: %s. A node's kubelet removes them once the driver's plugin there has stopped (a node whose "
                "kubelet was down keeps them until it runs again); another deployment of the driver publishes its own"
                % (self.namespace, self.name, self.driver, describe_published(left)))

    def _remove(self, kind, live):
        self.add_diff(kind, self._display(live), live, None)
        if self.check_mode or self._delete(kind, live):
            self.record_change(kind, live["metadata"]["name"])

    def _delete(self, kind, live):
        """Delete one object of the plan; False when it was gone already."""
        name = live["metadata"]["name"]
        calls = {
            "DaemonSet": (self.client.apps.delete_namespaced_daemon_set, (name, self.namespace)),
            "ServiceAccount": (self.client.core.delete_namespaced_service_account, (name, self.namespace)),
            "ClusterRole": (self.client.rbac.delete_cluster_role, (name,)),
            "ClusterRoleBinding": (self.client.rbac.delete_cluster_role_binding, (name,)),
            "Role": (self.client.rbac.delete_namespaced_role, (name, self.namespace)),
            "RoleBinding": (self.client.rbac.delete_namespaced_role_binding, (name, self.namespace)),
        }
        fn, args = calls[kind]
        return self.delete(fn, args, "delete %s %s" % (kind, self._display(live)))


def argument_spec():
    spec = dict(
        preset=dict(type="str", required=True, choices=list(presets.PRESET_NAMES)),
        state=dict(type="str", default="present", choices=["present", "absent"]),
        namespace=dict(type="str", default=DEFAULT_NAMESPACE),
        name=dict(type="str"),
        image=dict(type="str"),
        env=dict(type="dict"),
        node_selector=dict(type="dict"),
        tolerations=dict(type="list", elements="dict"),
        rbac=dict(type="str", default="create", choices=["create", "existing"]),
        device_classes=dict(type="bool", default=True),
        extended_resource_name=dict(type="str"),
        wait=dict(type="str", default="devices", choices=list(WAIT_MODES)),
        min_count=dict(type="int", default=1),
        update_strategy=dict(type="dict", options=dict(max_unavailable=dict(type="raw"), max_surge=dict(type="raw"))),
        nvidia_driver_root=dict(type="str"),
        allow_device_plugin_overlap=dict(type="bool", default=False),
    )
    spec.update(image_source_spec())
    spec.update(ds_task.deployment_spec())
    spec.update(AUTH_ARG_SPEC)
    return spec


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    protect_kubeconfig_secrets(module)  # before any failure can echo a kubeconfig dict
    problem = None
    try:
        validate(module.params)
    except InputRefused as err:
        problem = "Invalid input: %s. Nothing was sent to the cluster." % err
    if problem:
        # failed outside the except block: ansible-core 2.19 would attach the active exception's traceback
        module.fail_json(msg=problem, changed=False)

    task = None
    error = None
    try:
        task = DraDriverDeploy(module, KubeClient(module))
        task.deadline = Deadline(module.params["wait_timeout"])
        if module.params["state"] == "present":
            task.present()
        else:
            task.absent()
    except (KubeHwError, TaskFailed) as err:
        error = err
    objects.report_task(module, task, error)


if __name__ == "__main__":
    main()
