#!/usr/bin/python
# -*- coding: utf-8 -*-

# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
---
module: device_facts
short_description: Discover GPUs, FPGAs, accelerator NICs and USB dongles on a Linux host
version_added: 1.0.0
description:
  - Reads PCI devices, USB devices, device nodes, loaded kernel modules and driver versions
    from sysfs, C(/dev) and C(/proc), without vendor tools such as C(nvidia-smi) or C(lspci).
  - PCI devices are reported only for known accelerator vendors and classes
    (NVIDIA C(10de), AMD C(1002), Intel C(8086) display and processing accelerators,
    Xilinx C(10ee) FPGAs, Mellanox C(15b3) network controllers); bridges, audio
    functions and other chipset devices of those vendors are left out.
  - USB devices are reported by vendor and product ID; interfaces and root hubs are left out.
  - Returns counts keyed by stable names (for example C(gpu:nvidia), C(pci:10de:2330),
    C(usb:0529:0001)) that O(resource_map) turns into extended-resource quantities ready for
    M(kubehw.devices.k8s_node_extended_resource).
  - Malformed sysfs entries (unreadable files, non-hexadecimal IDs) are skipped with a warning.
  - The module only reads; it never changes the host.
author:
  - kubehw.devices contributors (@kubehw)
options:
  sysfs_root:
    description:
      - Where sysfs is mounted. Point it at a copy of a sysfs tree to test or to inspect another root.
    type: path
    default: /sys
  dev_root:
    description:
      - Directory holding the device nodes.
    type: path
    default: /dev
  proc_root:
    description:
      - Where procfs is mounted; C(modules) and C(driver/nvidia/version) are read from it.
    type: path
    default: /proc
  vendors:
    description:
      - Only report PCI devices of these vendors. All known vendors when omitted.
    type: list
    elements: str
    choices: [nvidia, amd, intel, xilinx, mellanox]
  kinds:
    description:
      - Only report PCI devices of these kinds. All kinds when omitted.
      - V(gpu) is a display controller (PCI class C(03)), V(accelerator) a processing
        accelerator (class C(12)), V(fpga) a Xilinx function, V(nic) a Mellanox network controller (class C(02)).
    type: list
    elements: str
    choices: [gpu, accelerator, fpga, nic]
  resource_map:
    description:
      - 'Maps a key of RV(counts) to an extended-resource name, for example
        C({"usb:0529:0001": "example.com/dongle", "gpu:nvidia": "nvidia.com/gpu"}).'
      - The result RV(resources) holds the quantity for every mapped name; a key that
        matched no device maps to C(0).
      - Keys must have one of the forms documented for RV(counts); names must be valid
        extended-resource names (one C(/), a DNS-subdomain prefix outside C(kubernetes.io),
        a qualified name of at most 63 characters). Two keys must not map to the same name.
    type: dict
extends_documentation_fragment:
  - kubehw.devices.attributes
attributes:
  check_mode:
    support: full
    details: The module only reads; check mode returns the same result.
  diff_mode:
    support: none
  idempotent:
    support: full
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: linux
notes:
  - Counts are per PCI function. Cards that expose several functions (for example a
    management and a user function on Xilinx Alveo boards) are counted once per function;
    use the per-model key C(pci:<vendor>:<device>) to count only one of them.
seealso:
  - module: kubehw.devices.k8s_node_extended_resource
'''

EXAMPLES = r'''
- name: Discover devices
  kubehw.devices.device_facts:
  register: devices

- name: Count two USB dongles and the NVIDIA GPUs as extended resources
  kubehw.devices.device_facts:
    resource_map:
      "usb:0529:0001": example.com/dongle
      "gpu:nvidia": example.com/gpu
  register: devices

- name: Advertise them on the node
  kubehw.devices.k8s_node_extended_resource:
    name: "{{ inventory_hostname }}"
    resources: "{{ devices.resources }}"
  delegate_to: localhost

- name: Inspect only NVIDIA GPUs of a fixture tree
  kubehw.devices.device_facts:
    sysfs_root: /srv/fixtures/sys
    dev_root: /srv/fixtures/dev
    vendors: [nvidia]
    kinds: [gpu]
'''

RETURN = r'''
pci:
  description: Recognised PCI functions, sorted by address.
  returned: always
  type: list
  elements: dict
  contains:
    address:
      description: PCI address (domain:bus:device.function).
      type: str
      sample: "0000:17:00.0"
    vendor_id:
      description: Vendor ID, four lower-case hexadecimal digits.
      type: str
      sample: "10de"
    device_id:
      description: Device ID, four lower-case hexadecimal digits.
      type: str
      sample: "2330"
    class_id:
      description: PCI class code, six lower-case hexadecimal digits.
      type: str
      sample: "030200"
    vendor:
      description: Vendor name (V(nvidia), V(amd), V(intel), V(xilinx), V(mellanox)).
      type: str
      sample: nvidia
    kind:
      description: V(gpu), V(accelerator), V(fpga) or V(nic).
      type: str
      sample: gpu
    driver:
      description: Name of the bound kernel driver, or null when no driver is bound.
      type: str
      sample: nvidia
    numa_node:
      description: NUMA node of the device, or null when the platform reports none.
      type: int
      sample: 0
    virtual_function:
      description: Whether the function is an SR-IOV virtual function.
      type: bool
      sample: false
usb:
  description: USB devices (not interfaces, not root hubs), sorted by bus position.
  returned: always
  type: list
  elements: dict
  contains:
    bus_id:
      description: Position on the bus as named in sysfs.
      type: str
      sample: "1-1.2"
    vendor_id:
      description: idVendor, four lower-case hexadecimal digits.
      type: str
      sample: "0529"
    product_id:
      description: idProduct, four lower-case hexadecimal digits.
      type: str
      sample: "0001"
    manufacturer:
      description: Manufacturer string, or null.
      type: str
    product:
      description: Product string, or null.
      type: str
    serial:
      description: Serial number string, or null.
      type: str
device_nodes:
  description: Accelerator device nodes found under O(dev_root), sorted.
  returned: always
  type: list
  elements: str
  sample: ["/dev/dri/card0", "/dev/dri/renderD128", "/dev/nvidia0", "/dev/nvidiactl"]
kernel_modules:
  description: Loaded kernel modules among C(nvidia), C(nvidia_uvm), C(nvidia_modeset), C(amdgpu),
    C(i915), C(xe), C(nouveau), C(mlx5_core), C(vfio_pci), sorted.
  returned: always
  type: list
  elements: str
  sample: ["nvidia", "nvidia_uvm"]
driver_versions:
  description: Driver versions by kernel module name, when the kernel reports one.
  returned: always
  type: dict
  sample: {"nvidia": "550.54.15"}
counts:
  description:
    - Number of devices per key. Keys present only when at least one device matched.
    - C(pci:<vendor_id>) and C(pci:<vendor_id>:<device_id>) count recognised PCI functions,
      C(<kind>:<vendor>) (for example C(gpu:nvidia), C(gpu:amd), C(gpu:intel),
      C(accelerator:amd), C(fpga:xilinx), C(nic:mellanox)) count them by kind,
      C(usb:<vendor_id>:<product_id>) counts USB devices,
      C(dev:nvidia) counts C(/dev/nvidia<N>) nodes and C(dev:dri_render) C(/dev/dri/renderD*) nodes.
  returned: always
  type: dict
  sample: {"pci:10de": 2, "pci:10de:2330": 2, "gpu:nvidia": 2, "usb:0529:0001": 2}
resources:
  description: Extended-resource quantities computed with O(resource_map).
  returned: when O(resource_map) is set
  type: dict
  sample: {"example.com/dongle": 2}
ansible_facts:
  description: Facts set by the module.
  returned: always
  type: dict
  contains:
    kubehw_devices:
      description: The same keys as the top-level result (RV(pci), RV(usb), RV(device_nodes),
        RV(kernel_modules), RV(driver_versions), RV(counts), and RV(resources) when mapped).
      type: dict
'''

import os
import re

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.kubehw.devices.plugins.module_utils._extended_resources import (
    extended_resource_name_problem,
)

PCI_VENDORS = {
    '10de': 'nvidia',
    '1002': 'amd',
    '8086': 'intel',
    '10ee': 'xilinx',
    '15b3': 'mellanox',
}
VENDOR_IDS = dict((name, vid) for vid, name in PCI_VENDORS.items())

# Base classes (first byte of the 24-bit class code).
CLASS_NETWORK = 0x02
CLASS_DISPLAY = 0x03
CLASS_BRIDGE = 0x06
CLASS_ACCELERATOR = 0x12

WATCHED_MODULES = (
    'nvidia', 'nvidia_uvm', 'nvidia_modeset', 'amdgpu', 'i915', 'xe', 'nouveau',
    'mlx5_core', 'vfio_pci',
)

# HEX4, HEX6 and the *_NODE patterns are used with fullmatch only (no '$', which allows a final newline).
HEX4 = re.compile(r'(?:0x)?([0-9a-fA-F]{4})')
HEX6 = re.compile(r'(?:0x)?([0-9a-fA-F]{6})')
NVIDIA_PROC_VERSION = re.compile(r'Kernel Module(?:\s+for\s+\S+)?\s+([0-9]+(?:\.[0-9]+)+)')
NVIDIA_NODE = re.compile(r'nvidia(?:[0-9]+|ctl|-uvm|-uvm-tools|-modeset)')
NVIDIA_INDEXED_NODE = re.compile(r'nvidia[0-9]+')
DRI_NODE = re.compile(r'(?:card|renderD)[0-9]+')

COUNT_KEY = re.compile(
    r'^(?:pci:[0-9a-f]{4}(?::[0-9a-f]{4})?'
    r'|usb:[0-9a-f]{4}:[0-9a-f]{4}'
    r'|(?:gpu|accelerator|fpga|nic):(?:nvidia|amd|intel|xilinx|mellanox)'
    r'|dev:(?:nvidia|dri_render))$'
)


def classify(vendor, class_code):
    """Return the kind of a PCI function, or None when it is not an accelerator we report."""
    base = class_code >> 16
    if vendor == 'xilinx':
        # Alveo boards enumerate as processing accelerators or memory controllers; bridges are plumbing.
        return None if base == CLASS_BRIDGE else 'fpga'
    if vendor == 'mellanox':
        return 'nic' if base == CLASS_NETWORK else None
    if base == CLASS_DISPLAY:
        return 'gpu'
    if base == CLASS_ACCELERATOR:
        return 'accelerator'
    return None


class DeviceScanner(object):
    def __init__(self, sysfs_root, dev_root, proc_root, warn):
        self.sysfs_root = sysfs_root
        self.dev_root = dev_root
        self.proc_root = proc_root
        self.warn = warn

    def _read(self, path, what):
        """Read a small sysfs file; warn and return None when it cannot be read."""
        try:
            with open(path, 'rb') as f:
                return f.read(4096).decode('utf-8', 'replace').strip()
        except (IOError, OSError) as exc:
            self.warn('Skipping %s: cannot read %s (%s)' % (what, path, exc.strerror or exc))
            return None

    def _read_optional(self, path):
        try:
            with open(path, 'rb') as f:
                value = f.read(4096).decode('utf-8', 'replace').strip()
        except (IOError, OSError):
            return None
        return value or None

    @staticmethod
    def _listdir(path):
        try:
            return sorted(os.listdir(path))
        except (IOError, OSError):
            return []

    def _hex(self, path, pattern, what):
        raw = self._read(path, what)
        if raw is None:
            return None
        match = pattern.fullmatch(raw)
        if not match:
            self.warn('Skipping %s: %s holds %r, not a hexadecimal ID' % (what, path, raw))
            return None
        return match.group(1).lower()

    def pci(self, vendors=None, kinds=None):
        base = os.path.join(self.sysfs_root, 'bus', 'pci', 'devices')
        found = []
        for address in self._listdir(base):
            path = os.path.join(base, address)
            what = 'PCI device %s' % address
            vendor_id = self._hex(os.path.join(path, 'vendor'), HEX4, what)
            if vendor_id is None:
                continue
            vendor = PCI_VENDORS.get(vendor_id)
            if vendor is None or (vendors and vendor not in vendors):
                continue
            class_id = self._hex(os.path.join(path, 'class'), HEX6, what)
            if class_id is None:
                continue
            kind = classify(vendor, int(class_id, 16))
            if kind is None or (kinds and kind not in kinds):
                continue
            device_id = self._hex(os.path.join(path, 'device'), HEX4, what)
            if device_id is None:
                continue
            found.append({
                'address': address,
                'vendor_id': vendor_id,
                'device_id': device_id,
                'class_id': class_id,
                'vendor': vendor,
                'kind': kind,
                'driver': self._link_name(os.path.join(path, 'driver')),
                'numa_node': self._numa_node(os.path.join(path, 'numa_node')),
                'virtual_function': os.path.lexists(os.path.join(path, 'physfn')),
            })
        return found

    @staticmethod
    def _link_name(path):
        try:
            return os.path.basename(os.readlink(path).rstrip('/')) or None
        except (IOError, OSError):
            return None

    def _numa_node(self, path):
        raw = self._read_optional(path)
        if raw is None:
            return None
        try:
            node = int(raw)
        except ValueError:
            self.warn('Ignoring numa_node %r in %s: not an integer' % (raw, path))
            return None
        # The kernel writes -1 when the platform has no NUMA information.
        return node if node >= 0 else None

    def usb(self):
        base = os.path.join(self.sysfs_root, 'bus', 'usb', 'devices')
        found = []
        for bus_id in self._listdir(base):
            # "usbN" are root hubs and "1-1:1.0" are interfaces of a device, not devices.
            if bus_id.startswith('usb') or ':' in bus_id:
                continue
            path = os.path.join(base, bus_id)
            what = 'USB device %s' % bus_id
            vendor_id = self._hex(os.path.join(path, 'idVendor'), HEX4, what)
            if vendor_id is None:
                continue
            product_id = self._hex(os.path.join(path, 'idProduct'), HEX4, what)
            if product_id is None:
                continue
            found.append({
                'bus_id': bus_id,
                'vendor_id': vendor_id,
                'product_id': product_id,
                'manufacturer': self._read_optional(os.path.join(path, 'manufacturer')),
                'product': self._read_optional(os.path.join(path, 'product')),
                'serial': self._read_optional(os.path.join(path, 'serial')),
            })
        return found

    def device_nodes(self):
        nodes = []
        for name in self._listdir(self.dev_root):
            if NVIDIA_NODE.fullmatch(name) or name == 'kfd':
                nodes.append(os.path.join(self.dev_root, name))
        dri = os.path.join(self.dev_root, 'dri')
        for name in self._listdir(dri):
            if DRI_NODE.fullmatch(name):
                nodes.append(os.path.join(dri, name))
        return sorted(nodes)

    def kernel_modules(self):
        text = self._read_optional(os.path.join(self.proc_root, 'modules'))
        if text is not None:
            loaded = set(line.split(None, 1)[0] for line in text.splitlines() if line.strip())
            return sorted(loaded.intersection(WATCHED_MODULES))
        # Without /proc/modules (a restricted container), sysfs still says which modules are live.
        live = []
        for name in WATCHED_MODULES:
            state = self._read_optional(os.path.join(self.sysfs_root, 'module', name, 'initstate'))
            if state == 'live':
                live.append(name)
        return sorted(live)

    def driver_versions(self):
        versions = {}
        text = self._read_optional(os.path.join(self.proc_root, 'driver', 'nvidia', 'version'))
        if text:
            match = NVIDIA_PROC_VERSION.search(text)
            if match:
                versions['nvidia'] = match.group(1)
        for name in WATCHED_MODULES:
            if name in versions:
                continue
            version = self._read_optional(os.path.join(self.sysfs_root, 'module', name, 'version'))
            if version:
                versions[name] = version
        return versions


def count_devices(pci, usb, device_nodes):
    counts = {}

    def bump(key):
        counts[key] = counts.get(key, 0) + 1

    for dev in pci:
        bump('pci:%s' % dev['vendor_id'])
        bump('pci:%s:%s' % (dev['vendor_id'], dev['device_id']))
        bump('%s:%s' % (dev['kind'], dev['vendor']))
    for dev in usb:
        bump('usb:%s:%s' % (dev['vendor_id'], dev['product_id']))
    for node in device_nodes:
        name = os.path.basename(node)
        if NVIDIA_INDEXED_NODE.fullmatch(name):
            bump('dev:nvidia')
        elif name.startswith('renderD'):
            bump('dev:dri_render')
    return counts


def validate_resource_map(resource_map):
    """Return (normalised map, error message or None)."""
    normalised = {}
    seen = {}
    for key in sorted(resource_map):
        name = resource_map[key]
        norm_key = str(key).strip().lower()
        if not COUNT_KEY.fullmatch(norm_key):
            return None, ('resource_map key %r is not a count key: use pci:<vendor>[:<device>], '
                          'usb:<vendor>:<product> (4 hexadecimal digits each), '
                          '<gpu|accelerator|fpga|nic>:<nvidia|amd|intel|xilinx|mellanox>, dev:nvidia or dev:dri_render'
                          % (key,))
        error = extended_resource_name_problem(name)
        if error:
            return None, 'resource_map[%r] = %r is not a valid extended-resource name: %s' % (key, name, error)
        if name in seen:
            return None, ('resource_map maps both %r and %r to %r; map each extended resource from one key'
                          % (seen[name], key, name))
        seen[name] = key
        normalised[norm_key] = name
    return normalised, None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            sysfs_root=dict(type='path', default='/sys'),
            dev_root=dict(type='path', default='/dev'),
            proc_root=dict(type='path', default='/proc'),
            vendors=dict(type='list', elements='str', choices=sorted(VENDOR_IDS)),
            kinds=dict(type='list', elements='str', choices=['gpu', 'accelerator', 'fpga', 'nic']),
            resource_map=dict(type='dict'),
        ),
        supports_check_mode=True,
    )
    params = module.params

    resource_map = None
    if params['resource_map'] is not None:
        resource_map, error = validate_resource_map(params['resource_map'])
        if error:
            module.fail_json(msg=error)

    if not os.path.isdir(params['sysfs_root']):
        module.fail_json(msg='sysfs_root %s is not a directory; is sysfs mounted?' % params['sysfs_root'])

    scanner = DeviceScanner(params['sysfs_root'], params['dev_root'], params['proc_root'], module.warn)
    pci = scanner.pci(vendors=params['vendors'], kinds=params['kinds'])
    usb = scanner.usb()
    device_nodes = scanner.device_nodes()
    facts = {
        'pci': pci,
        'usb': usb,
        'device_nodes': device_nodes,
        'kernel_modules': scanner.kernel_modules(),
        'driver_versions': scanner.driver_versions(),
        'counts': count_devices(pci, usb, device_nodes),
    }
    if resource_map is not None:
        facts['resources'] = dict(
            (name, facts['counts'].get(key, 0)) for key, name in resource_map.items()
        )

    result = dict(changed=False, ansible_facts={'kubehw_devices': facts})
    result.update(facts)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
