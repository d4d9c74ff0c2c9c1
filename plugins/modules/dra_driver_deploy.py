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


from ansible.module_utils.basic import AnsibleModule
from ansible_collections.kubehw.devices.plugins.module_utils._client import KubeClient
from ansible_collections.kubehw.devices.plugins.module_utils._connection import (
    AUTH_ARG_SPEC,
    protect_kubeconfig_secrets,
)
from ansible_collections.kubehw.devices.plugins.module_utils._errors import (
    InputRefused,
    KubeHwError,
    TaskFailed,
)
from ansible_collections.kubehw.devices.plugins.module_utils._images import image_source_spec
from ansible_collections.kubehw.devices.plugins.module_utils import _daemonset_task as ds_task
from ansible_collections.kubehw.devices.plugins.module_utils import _dra_driver_presets as presets
from ansible_collections.kubehw.devices.plugins.module_utils import _k8s_objects as objects
from ansible_collections.kubehw.devices.plugins.module_utils._waiting import Deadline
from ansible_collections.kubehw.devices.plugins.module_utils._dra_driver_manifest import (
    DEFAULT_NAMESPACE,
    WAIT_MODES,
    validate,
)
from ansible_collections.kubehw.devices.plugins.module_utils._dra_driver_task import DraDriverDeploy


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
