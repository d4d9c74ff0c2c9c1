#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: device_plugin_deploy
short_description: Roll out a device-plugin DaemonSet and wait until its resource reaches the nodes
version_added: 1.0.0
description:
  - Builds a device-plugin DaemonSet from a O(preset) (NVIDIA, AMD, Intel GPU, generic devices) or from
    your own image, compares it with the live object semantically, and writes only when it differs.
    A second run with the same input sends no write.
  - The comparison applies the defaults the apiserver fills in (C(terminationMessagePath), C(dnsPolicy),
    C(schedulerName), C(revisionHistoryLimit), the update strategy, the image pull policy and so on)
    and ignores server-populated fields, so only a real change triggers a write.
  - Changing a setting changes the pod template, which starts a rollout; the module reports the
    generation before and after and, with O(wait=rollout) or O(wait=resource), returns only when the
    rollout is done. Waiting watches the API; it does not poll.
  - The DaemonSet and its pods carry the annotation C(devices.kubehw.io/resources) listing the
    resources the plugin serves, and the label C(app.kubernetes.io/managed-by=kubehw.devices).
  - For the NVIDIA preset, the plugin's settings are written to a ConfigMap (C(<name>-config)) in the
    plugin's configuration file format and mounted into the pod; a hash of the file in the pod template
    rolls the pods when the settings change. The ConfigMap is owned by the DaemonSet (an ownerReference added
    to those it already has). A ConfigMap of that name this module did not create is refused before any write,
    naming it and its owner, unless O(adopt_configmap=true).
  - A DaemonSet O(name) in O(namespace) that this module did not create (without the label
    C(app.kubernetes.io/managed-by=kubehw.devices)), for example a plugin installed by Helm or an operator, is
    refused before any write, naming it and its owner, with V(present) (its template would be replaced) and
    V(absent) (it would be deleted), unless O(adopt_daemonset=true).
  - Labels and annotations the module set on the DaemonSet earlier (listed in its annotation
    C(devices.kubehw.io/managed-keys)) and since dropped from O(labels) or O(annotations) are removed on the next
    update; keys other tools added stay.
  - When the DaemonSet no longer needs that ConfigMap (it is switched to another preset), the ConfigMap this
    module created for it is deleted, after the DaemonSet has been written and once no pod in O(namespace)
    mounts it any more, so a running plugin pod never loses a volume it may remount. With O(wait=rollout) or
    O(wait=resource) that is in the same run, after the rollout; otherwise, or while old pods remain
    (C(OnDelete)), it is kept with a warning and deleted by a later run. A ConfigMap of that name that this
    module did not create (neither owned by the DaemonSet nor labelled C(app.kubernetes.io/managed-by=kubehw.devices)
    with C(app.kubernetes.io/name) of the DaemonSet) is never deleted.
  - Every input is validated before the first request; a bad value fails with a message naming it
    and no write is made.
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
      - Reads the DaemonSet, the ConfigMap and, when a ConfigMap is no longer needed, the pods that mount it;
        reports what would change, including the ConfigMap's deletion; sends no write and does not wait.
  diff_mode:
    support: full
    details:
      - The DaemonSet (and the NVIDIA ConfigMap) before and after, without status and server-populated metadata.
        A ConfigMap that is deleted shows as before and an empty after.
  idempotent:
    support: full
options:
  state:
    description:
      - V(present) creates or updates the DaemonSet (and its ConfigMap).
      - V(absent) deletes the DaemonSet and the ConfigMap this module created for it. Objects that are
        already gone are not an error.
    type: str
    choices: [present, absent]
    default: present
  preset:
    description:
      - Which device plugin to deploy. Each preset supplies image, resource names, arguments, mounts,
        security context, tolerations, priority class, runtime class and node affinity; see the preset table in
        C(docs/device_plugin_deploy.md) for the upstream file and release each default comes from.
      - V(nvidia) is NVIDIA/k8s-device-plugin v0.20.0 (C(nvidia.com/gpu)), V(amd) is ROCm/k8s-device-plugin 1.31.0.10
        (C(amd.com/gpu)), V(intel_gpu) is the Intel GPU plugin 0.36.0 (C(gpu.intel.com/i915) and C(gpu.intel.com/xe),
        one per kernel driver), V(generic) is squat/generic-device-plugin 0.1.0 (resources from O(devices)),
        V(custom) is your own O(image) serving O(resource_names).
      - The default node affinity accepts any of the vendor's labels as alternatives (Node Feature Discovery's
        vendor-only and class+vendor PCI labels, and for NVIDIA GPU Feature Discovery's and Tegra's labels).
      - Required with O(state=present).
    type: str
    choices: [nvidia, amd, intel_gpu, generic, custom]
  name:
    description:
      - Name of the DaemonSet. Defaults to the preset's name (C(nvidia-device-plugin), C(amdgpu-device-plugin),
        C(intel-gpu-plugin), C(generic-device-plugin)); required for O(preset=custom).
    type: str
  namespace:
    description:
      - Namespace of the DaemonSet. It must exist; the task fails naming it when it does not.
      - The default is a namespace of its own, not C(kube-system), so the identity that deploys device plugins
        needs no write access where kube-proxy, the CNI or CoreDNS run. The collection's C(playbooks/rbac.yml)
        creates it with the RBAC the deployment needs. Priority class C(system-node-critical) is allowed outside
        C(kube-system) since Kubernetes 1.17.
    type: str
    default: kubehw-device-plugins
  image:
    description: Container image, replacing the preset's.
    type: str
  image_pull_policy:
    description: Image pull policy. Left out, the apiserver's default applies (V(Always) for C(:latest) or no tag).
    type: str
    choices: [Always, IfNotPresent, Never]
  args:
    description:
      - Container arguments, replacing the preset's (the AMD naming-strategy flag, the generic --device specs).
    type: list
    elements: str
  env:
    description:
      - Environment variables added to (or replacing those of) the preset, as name to value. A value that is
        a dictionary is used as the variable's definition (for example C(valueFrom)).
    type: dict
  resources:
    description: Container resource requests and limits, as in a pod spec.
    type: dict
  security_context:
    description: Container security context, replacing the preset's.
    type: dict
  host_paths:
    description: Extra host directories or files to mount into the plugin container.
    type: list
    elements: dict
    suboptions:
      path:
        description: Absolute path on the host.
        type: str
        required: true
      mount_path:
        description: Path in the container; defaults to O(host_paths[].path).
        type: str
      read_only:
        description: Mount read-only.
        type: bool
        default: false
      type:
        description: The hostPath type check.
        type: str
        choices: ['', Directory, DirectoryOrCreate, File, FileOrCreate, Socket, CharDevice, BlockDevice]
      name:
        description: Volume name; defaults to C(host-path-<index>).
        type: str
  node_selector:
    description:
      - Node labels the plugin pods require. When set (and O(affinity) is not), it replaces the preset's
        default node affinity, so a label of your choice selects the nodes.
    type: dict
  affinity:
    description: Pod affinity, replacing the preset's default node affinity.
    type: dict
  tolerations:
    description:
      - Tolerations, replacing the preset's. Those tolerate the vendor's base taint (for example
        C(nvidia.com/gpu:NoSchedule), also when time-slicing or MIG serve other names), each served resource's own
        taint, and C(CriticalAddonsOnly) where upstream does (NVIDIA, AMD). An empty list removes them.
    type: list
    elements: dict
  priority_class_name:
    description: Priority class of the plugin pods. Defaults to C(system-node-critical); an empty string sets none.
    type: str
  runtime_class_name:
    description:
      - Runtime class of the plugin pods (C(runtimeClassName)).
      - Left out, the preset's default applies. For V(nvidia) that is V(nvidia), the RuntimeClass the
        C(kubehw.devices.nvidia_container_toolkit) role creates, because the plugin loads NVML, which only the NVIDIA
        runtime injects; under runc it cannot start. Other presets set none.
      - An empty string sets none, for nodes whose default runtime is the NVIDIA runtime.
      - The RuntimeClass must exist, or the apiserver refuses the pods and the rollout times out.
    type: str
  service_account:
    description: Service account of the plugin pods.
    type: str
  update_strategy:
    description: How a template change reaches the pods.
    type: dict
    suboptions:
      type:
        description:
          - V(RollingUpdate) replaces pods node by node. V(OnDelete) replaces a pod only when it is deleted;
            the module then reports the old pods instead of waiting for them, unless O(delete_old_pods=true).
        type: str
        choices: [RollingUpdate, OnDelete]
        default: RollingUpdate
      max_unavailable:
        description:
          - How many nodes may be without a ready plugin during a rolling update (a number or a percentage).
          - With V(OnDelete), the batch size of O(delete_old_pods) (which it needs).
        type: raw
      max_surge:
        description: How many nodes may run an old and a new pod at the same time (a number or a percentage).
        type: raw
  delete_old_pods:
    description:
      - With O(update_strategy.type=OnDelete), delete the pods of the old template after a change and wait
        for their replacements.
      - They are deleted in batches of O(update_strategy.max_unavailable) (default 1; a percentage is of the
        scheduled pods, rounded up), in node name order; the next batch is deleted only once every node of the
        previous one runs a ready pod of the new template, so at most that many nodes are without a working
        plugin at a time. With C(OnDelete), O(update_strategy.max_unavailable) is only this batch size; it is not
        written to the DaemonSet.
    type: bool
    default: false
  allow_dra_overlap:
    description:
      - Before any write, the module lists the ResourceSlices of the DRA drivers that hand out the same devices
        (V(gpu.nvidia.com) for C(nvidia.com/*) resources, V(gpu.intel.com) for C(gpu.intel.com/*), AMD's
        V(gpu.amd.com) for C(amd.com/*)) and refuses when
        one publishes devices on a node the plugin would run on (joining nodes included), naming the driver and the
        nodes, since both would hand out the same devices. Set V(true) only when that is meant, for example while moving
        nodes between the two one by one (the migration in the collection's C(docs/dra.md)).
      - On a cluster that serves no C(resource.k8s.io/v1), or for an identity that may not list ResourceSlices, there
        is nothing to check (the latter with a warning).
    type: bool
    default: false
  adopt_configmap:
    description:
      - Let the V(nvidia) preset take over a ConfigMap C(<name>-config) that this module did not create (one neither
        owned by the DaemonSet nor labelled C(app.kubernetes.io/managed-by=kubehw.devices) with
        C(app.kubernetes.io/name) of the DaemonSet). Its data is replaced, the module's labels and an ownerReference
        are added, and O(state=absent) deletes it later.
      - When false, such a ConfigMap makes the task fail before any write, naming the ConfigMap and its owner.
    type: bool
    default: false
  labels:
    description: Labels added to the DaemonSet and its pods.
    type: dict
  annotations:
    description: Annotations added to the DaemonSet and its pods (a change rolls the pods).
    type: dict
  definition:
    description:
      - A DaemonSet manifest fragment merged over the built manifest, for anything the options do not cover.
        Maps merge key by key; C(containers), C(volumes), C(env) and C(volumeMounts) merge by name (or mount path);
        other lists are replaced; a C(null) value removes the key.
      - It must not change C(kind), C(apiVersion), the name, the namespace or C(spec.selector).
    type: dict
  resource_names:
    description:
      - The extended resources the plugin registers, when the preset's are not right (for example MIG
        profiles with O(mig_strategy=mixed)). Required for O(preset=custom).
      - Each name has exactly one C(/), a DNS-subdomain domain other than C(kubernetes.io), and a name part
        of at most 63 letters, digits, C(-), C(_) or C(.).
    type: list
    elements: str
  mig_strategy:
    description: NVIDIA only. How MIG devices are exposed (the plugin's C(migStrategy)).
    type: str
    choices: [none, single, mixed]
  device_list_strategy:
    description: NVIDIA only. How devices are passed to containers (the plugin's C(deviceListStrategy)).
    type: list
    elements: str
    choices: [envvar, volume-mounts, cdi-annotations, cdi-cri]
  device_id_strategy:
    description: NVIDIA only. How devices are identified (the plugin's C(deviceIDStrategy)).
    type: str
    choices: [uuid, index]
  time_slicing:
    description: NVIDIA only. CUDA time-slicing (the plugin's C(sharing.timeSlicing)).
    type: dict
    suboptions:
      replicas:
        description: Resource name to the number of replicas each device is advertised as.
        type: dict
        required: true
      rename_by_default:
        description: Advertise shared replicas as C(<resource>.shared), for example C(nvidia.com/gpu.shared).
        type: bool
        default: false
      fail_requests_greater_than_one:
        description: Refuse pods that ask for more than one replica of a shared device.
        type: bool
        default: false
  resource_naming_strategy:
    description: AMD only. V(single) advertises C(amd.com/gpu); V(mixed) names resources after GPU partitions.
    type: str
    choices: [single, mixed]
  devices:
    description:
      - Generic only. Device specs of squat/generic-device-plugin, one per resource, each with C(name) and
        C(groups) (C(paths) or C(usb) entries, optional C(count)). Each becomes a C(--device) argument.
      - As the plugin requires, a C(name) is lowercase letters, digits and C(-), at least two characters, starting and
        ending with a letter or digit, and a group holds C(paths) or C(usb), not both; anything else is refused before
        the write (the plugin would crash-loop on it).
    type: list
    elements: dict
  device_domain:
    description: Generic only. Domain of the advertised resources; the plugin's default is C(squat.ai).
    type: str
  wait:
    description:
      - V(none) returns after the write.
      - V(rollout) waits until the DaemonSet controller has observed the new generation and every scheduled
        pod is updated and available, and no node the template selects is still joining (registered but not Ready
        yet, or still tainted C(node.kubernetes.io/not-ready)). Zero scheduled pods fails the task unless
        O(allow_empty_rollout=true).
      - A refusal of the DaemonSet controller to create the pods (C(FailedCreate) events of a quota, Pod Security, a missing
        RuntimeClass, an admission webhook) fails the wait within seconds once it persists (reported again over
        10 s while pods are missing, also when reported before this run); one the controller gets past does not.
      - A rolling update held up by nodes that are down (their pods, unavailable for good, use up
        O(update_strategy.max_unavailable), so the controller replaces no pod on the Ready nodes) fails once the
        DaemonSet's status has not changed for 10 s, naming those nodes.
      - V(resource) also waits until every node running a plugin pod has each resource in C(status.capacity)
        with at least O(min_count) (for V(intel_gpu) without O(resource_names), one of C(gpu.intel.com/i915) and
        C(gpu.intel.com/xe)). The result reports C(allocatable) too, which the scheduler uses.
      - On timeout the task fails naming the nodes without a ready plugin pod, their containers' waiting
        reasons (such as C(ImagePullBackOff)), and the nodes lacking the resource.
    type: str
    choices: [none, rollout, resource]
    default: rollout
  min_count:
    description: With O(wait=resource), the smallest count of each resource a node must advertise.
    type: int
    default: 1
notes:
  - The identity needs C(get), C(list), C(watch), C(create), C(update), C(patch) and C(delete) on C(daemonsets)
    and C(configmaps) in O(namespace), C(list) and C(delete) on C(pods) there, and C(get), C(list), C(watch) on C(nodes).
  - The selector of a DaemonSet is immutable. An existing DaemonSet of the same name with another selector
    (for example one created from vendor YAML) is reported as an error; delete it first.
seealso:
  - name: Device plugins
    description: How the kubelet learns about devices.
    link: https://kubernetes.io/docs/concepts/extend-kubernetes/compute-storage-net/device-plugins/
  - module: kubehw.devices.k8s_node_extended_resource
"""

EXAMPLES = r"""
- name: Deploy the NVIDIA device plugin and wait until the GPUs are schedulable
  kubehw.devices.device_plugin_deploy:
    preset: nvidia
    wait: resource
    wait_timeout: 600

- name: Share each GPU four ways with time-slicing, from an air-gapped mirror
  kubehw.devices.device_plugin_deploy:
    preset: nvidia
    image_registry: registry.internal:5000
    time_slicing:
      replicas:
        nvidia.com/gpu: 4
    node_selector:
      accelerator: nvidia

- name: Advertise USB serial adapters with the generic device plugin
  kubehw.devices.device_plugin_deploy:
    preset: generic
    device_domain: devices.example.com
    devices:
      - name: serial
        groups:
          - paths:
              - path: /dev/ttyUSB*
    node_selector:
      example.com/has-serial: "true"

- name: Deploy your own plugin, replacing pods by hand-picked deletion
  kubehw.devices.device_plugin_deploy:
    preset: custom
    name: dongle-plugin
    image: registry.example.com/dongle-plugin:1.4.0
    resource_names: [example.com/dongle]
    update_strategy:
      type: OnDelete
    delete_old_pods: true

- name: Remove the NVIDIA device plugin and its ConfigMap
  kubehw.devices.device_plugin_deploy:
    preset: nvidia
    state: absent
"""

RETURN = r"""
changed:
  description: Whether a write was made (or, in check mode, would be made).
  returned: always
  type: bool
daemonset:
  description: The DaemonSet as the server last returned it (predicted in check mode); none when absent.
  returned: always
  type: dict
configmap:
  description: The ConfigMap holding the NVIDIA plugin's configuration; none for other presets.
  returned: always
  type: dict
deleted_configmap:
  description:
    - Name of the ConfigMap this module created for an earlier preset and deleted (in check mode, would delete)
      because the DaemonSet no longer uses it.
  returned: when such a ConfigMap was deleted, or would be in check mode
  type: str
  sample: nvidia-device-plugin-config
generation:
  description: C(metadata.generation) of the DaemonSet before and after the task (none where it did not exist).
  returned: always
  type: dict
  sample: {"before": 3, "after": 4}
resources:
  description: The extended resources the plugin serves (what the C(devices.kubehw.io/resources) annotation lists).
  returned: when state is present
  type: list
  elements: str
  sample: ["nvidia.com/gpu"]
rollout:
  description: Rollout state from the DaemonSet status; absent counts are reported as 0.
  returned: when state is present and the DaemonSet exists
  type: dict
  contains:
    done:
      description: observedGeneration >= generation and updated == available == desired (or desired is 0).
      type: bool
    reason:
      description: The rollout state in words.
      type: str
    desired:
      description: desiredNumberScheduled.
      type: int
    updated:
      description: updatedNumberScheduled.
      type: int
    available:
      description: numberAvailable.
      type: int
    ready:
      description: numberReady.
      type: int
    old_pods_pending:
      description: With OnDelete, pods of the old template remain and must be deleted for the change to apply.
      type: bool
    old_pods:
      description: Names of those pods.
      type: list
      elements: str
  sample: {"done": true, "desired": 2, "updated": 2, "available": 2, "ready": 2, "generation": 4,
           "observed_generation": 4, "reason": "all 2 pods are updated and available"}
nodes:
  description: Per node running (or due to run) a plugin pod; the pod's readiness and each served resource's
    C(capacity) and C(allocatable) counts (null where the node does not list it).
  returned: when state is present and the DaemonSet exists
  type: dict
  sample: {"gpu-1": {"pod": "nvidia-device-plugin-x2b9k", "pod_ready": true, "waiting_reasons": [],
           "capacity": {"nvidia.com/gpu": 4}, "allocatable": {"nvidia.com/gpu": 4}, "resource_ready": true}}
selected_nodes:
  description:
    - The nodes the DaemonSet's pod template admits (its node selector, required node affinity, and the taints it
      tolerates), Ready or still joining, by name, sorted; in check mode those of the template the task would write.
      Read before any write, from the task's one list of the nodes the template can select.
    - The drift playbook compares them with the inventory's hosts, so a node relabelled out of the selection is named.
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
changed_paths:
  description: JSON pointers of the DaemonSet fields that differed from what the task wants.
  returned: when an existing DaemonSet is changed
  type: list
  elements: str
  sample: ["/spec/template/spec/containers/0/image"]
deleted_pods:
  description: Pods of the old template deleted because of O(delete_old_pods=true).
  returned: when pods were deleted
  type: list
  elements: str
waited_for:
  description: What the task waited for (V(none) in check mode or when nothing was waited for).
  returned: always
  type: str
diff:
  description: The DaemonSet and ConfigMap before and after, when run with C(--diff).
  returned: when diff mode is on and something changed
  type: list
  elements: dict
"""


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
)
from ansible_collections.kubehw.devices.plugins.module_utils._images import image_source_spec
from ansible_collections.kubehw.devices.plugins.module_utils import _device_plugin_manifest as manifest
from ansible_collections.kubehw.devices.plugins.module_utils import _daemonset_task as ds_task
from ansible_collections.kubehw.devices.plugins.module_utils import _device_plugin_presets as presets
from ansible_collections.kubehw.devices.plugins.module_utils import _k8s_objects as objects
from ansible_collections.kubehw.devices.plugins.module_utils._waiting import Deadline
from ansible_collections.kubehw.devices.plugins.module_utils._device_plugin_task import DevicePluginDeploy


def argument_spec():
    spec = dict(
        state=dict(type="str", default="present", choices=["present", "absent"]),
        preset=dict(type="str", choices=list(presets.PRESET_NAMES)),
        name=dict(type="str"),
        namespace=dict(type="str", default=manifest.DEFAULT_NAMESPACE),
        image=dict(type="str"),
        image_pull_policy=dict(type="str", choices=["Always", "IfNotPresent", "Never"]),
        args=dict(type="list", elements="str"),
        env=dict(type="dict"),
        resources=dict(type="dict"),
        security_context=dict(type="dict"),
        host_paths=dict(type="list", elements="dict", options=dict(
            path=dict(type="str", required=True),
            mount_path=dict(type="str"),
            read_only=dict(type="bool", default=False),
            type=dict(type="str", choices=["", "Directory", "DirectoryOrCreate", "File", "FileOrCreate",
                                           "Socket", "CharDevice", "BlockDevice"]),
            name=dict(type="str"),
        )),
        node_selector=dict(type="dict"),
        affinity=dict(type="dict"),
        tolerations=dict(type="list", elements="dict"),
        priority_class_name=dict(type="str"),
        runtime_class_name=dict(type="str"),
        service_account=dict(type="str"),
        update_strategy=dict(type="dict", options=dict(
            type=dict(type="str", default="RollingUpdate", choices=["RollingUpdate", "OnDelete"]),
            max_unavailable=dict(type="raw"),
            max_surge=dict(type="raw"),
        )),
        delete_old_pods=dict(type="bool", default=False),
        adopt_configmap=dict(type="bool", default=False),
        allow_dra_overlap=dict(type="bool", default=False),
        labels=dict(type="dict"),
        annotations=dict(type="dict"),
        definition=dict(type="dict"),
        resource_names=dict(type="list", elements="str"),
        mig_strategy=dict(type="str", choices=list(presets.MIG_STRATEGIES)),
        device_list_strategy=dict(type="list", elements="str", choices=list(presets.DEVICE_LIST_STRATEGIES)),
        device_id_strategy=dict(type="str", choices=list(presets.DEVICE_ID_STRATEGIES)),
        time_slicing=dict(type="dict", options=dict(
            replicas=dict(type="dict", required=True),
            rename_by_default=dict(type="bool", default=False),
            fail_requests_greater_than_one=dict(type="bool", default=False),
        )),
        resource_naming_strategy=dict(type="str", choices=list(presets.AMD_NAMING_STRATEGIES)),
        devices=dict(type="list", elements="dict"),
        device_domain=dict(type="str"),
        wait=dict(type="str", default="rollout", choices=list(manifest.WAIT_MODES)),
        min_count=dict(type="int", default=1),
    )
    spec.update(image_source_spec())
    spec.update(ds_task.deployment_spec())
    spec.update(AUTH_ARG_SPEC)
    return spec


def main():
    module = AnsibleModule(
        argument_spec=argument_spec(),
        required_if=[("state", "present", ("preset",))],
        supports_check_mode=True,
    )
    protect_kubeconfig_secrets(module)  # before any failure can echo a kubeconfig dict
    params = module.params
    problem = None
    built = None
    try:
        manifest.validate(params)
        built = manifest.build(params) if params["state"] == "present" else None
    except InputRefused as err:
        problem = "Invalid input: %s" % err
    if problem is None:
        problem = timeout_problem("wait_timeout", params["wait_timeout"], zero_allowed=True)
        problem = problem and "Invalid input: %s" % problem
    if problem:
        # failed outside the except block: ansible-core 2.19 would attach the active exception's traceback
        module.fail_json(msg=problem)

    task = None
    error = None
    try:
        client = KubeClient(module)
        task = DevicePluginDeploy(module, client)
        task.deadline = Deadline(params["wait_timeout"])
        if built is None:
            task.absent()
        else:
            task.present(*built)
    except (KubeHwError, TaskFailed) as err:
        error = err
    objects.report_task(module, task, error)


if __name__ == "__main__":
    main()
