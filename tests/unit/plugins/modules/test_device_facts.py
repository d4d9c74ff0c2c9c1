# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import sys

import pytest

from tests.unit.plugins.modules.module_harness import patch_module_args

from ansible_collections.kubehw.devices.plugins.modules import device_facts


class HostTree(object):
    """A fake host: sysfs, /dev and /proc trees under one temporary directory, shaped like the kernel's."""

    def __init__(self, root):
        self.root = root
        self.sys = os.path.join(root, 'sys')
        self.dev = os.path.join(root, 'dev')
        self.proc = os.path.join(root, 'proc')
        for path in (self.sys, self.dev, self.proc):
            os.makedirs(path)

    def module_args(self):
        return {'sysfs_root': self.sys, 'dev_root': self.dev, 'proc_root': self.proc}

    def dev_path(self, name):
        return os.path.join(self.dev, name)

    @staticmethod
    def _write(path, content):
        if not os.path.isdir(os.path.dirname(path)):
            os.makedirs(os.path.dirname(path))
        with open(path, 'w') as f:
            f.write(content)

    def sys_file(self, rel, content):
        self._write(os.path.join(self.sys, rel), content)

    def proc_file(self, rel, content):
        self._write(os.path.join(self.proc, rel), content)

    def pci(self, address, vendor, device, pci_class, driver=None, numa=None, physfn=None):
        # Real devices live under /sys/devices/pci*/ and bus/pci/devices/ holds symlinks to them.
        real = os.path.join(self.sys, 'devices', 'pci0000:00', address)
        os.makedirs(real)
        for name, value in (('vendor', vendor), ('device', device), ('class', pci_class), ('numa_node', numa)):
            if value is not None:
                self._write(os.path.join(real, name), '%s\n' % value)
        if driver:
            drivers = os.path.join(self.sys, 'bus', 'pci', 'drivers', driver)
            if not os.path.isdir(drivers):
                os.makedirs(drivers)
            os.symlink(os.path.join('..', '..', '..', 'bus', 'pci', 'drivers', driver), os.path.join(real, 'driver'))
        if physfn:
            os.symlink(os.path.join('..', physfn), os.path.join(real, 'physfn'))
        bus = os.path.join(self.sys, 'bus', 'pci', 'devices')
        if not os.path.isdir(bus):
            os.makedirs(bus)
        os.symlink(os.path.join('..', '..', '..', 'devices', 'pci0000:00', address), os.path.join(bus, address))

    def usb(self, bus_id, vendor, product_id, manufacturer=None, product=None, serial=None):
        path = os.path.join(self.sys, 'bus', 'usb', 'devices', bus_id)
        os.makedirs(path)
        for name, value in (('idVendor', vendor), ('idProduct', product_id), ('manufacturer', manufacturer),
                            ('product', product), ('serial', serial)):
            if value is not None:
                self._write(os.path.join(path, name), '%s\n' % value)

    def dev_nodes(self, *names, **kwargs):
        for name in names:
            if kwargs.get('directory'):
                os.makedirs(os.path.join(self.dev, name))
            else:
                self._write(os.path.join(self.dev, name), '')

    def dri_nodes(self, *names):
        for name in names:
            if name == 'by-path':
                os.makedirs(os.path.join(self.dev, 'dri', name))
            else:
                self._write(os.path.join(self.dev, 'dri', name), '')

    def modules(self, *names):
        self.modules_raw(''.join('%s 16384 0 - Live 0x0000000000000000\n' % name for name in names))

    def modules_raw(self, text):
        self.proc_file('modules', text)


class ModuleExit(Exception):
    def __init__(self, result, failed):
        super(ModuleExit, self).__init__(result.get('msg'))
        self.result = result
        self.failed = failed


def run_module(args, monkeypatch, check_mode=False):
    """Run device_facts.main() with args; return (result dict, failed)."""
    warnings = []

    def exit_json(self, **kwargs):
        raise ModuleExit(dict(kwargs, warnings=warnings), failed=False)

    def fail_json(self, **kwargs):
        raise ModuleExit(dict(kwargs, warnings=warnings), failed=True)

    def warn(self, message):
        warnings.append(message)

    monkeypatch.setattr(device_facts.AnsibleModule, 'warn', warn)
    monkeypatch.setattr(device_facts.AnsibleModule, 'exit_json', exit_json)
    monkeypatch.setattr(device_facts.AnsibleModule, 'fail_json', fail_json)
    if check_mode:
        args = dict(args, _ansible_check_mode=True)
    with patch_module_args(args):
        with pytest.raises(ModuleExit) as exc:
            device_facts.main()
    return exc.value.result, exc.value.failed


def facts_of(host, monkeypatch, **extra):
    args = host.module_args()
    args.update(extra)
    result, failed = run_module(args, monkeypatch)
    assert not failed, result
    assert result['changed'] is False
    # The fact mirrors the top-level result so a play can use either.
    fact = result['ansible_facts']['kubehw_devices']
    for key in fact:
        assert fact[key] == result[key]
    return result


def warnings_of(result):
    return result.get('warnings') or []


@pytest.fixture
def host(tmp_path):
    return HostTree(str(tmp_path))


def test_nvidia_multi_gpu_host(host, monkeypatch):
    host.pci('0000:17:00.0', '0x10de', '0x2330', '0x030200', driver='nvidia', numa=0)
    host.pci('0000:65:00.0', '0x10de', '0x2330', '0x030200', driver='nvidia', numa=1)
    host.pci('0000:ca:00.0', '0x10de', '0x1eb8', '0x030200', driver=None, numa=-1)
    # HD-audio function of a GPU and an NVSwitch-style bridge are not GPUs.
    host.pci('0000:17:00.1', '0x10de', '0x22bb', '0x040300', driver='snd_hda_intel')
    host.pci('0000:07:00.0', '0x10de', '0x22a3', '0x068000')
    # Chipset devices of other vendors.
    host.pci('0000:00:00.0', '0x8086', '0x09a2', '0x060000')
    host.pci('0000:00:14.0', '0x8086', '0xa1af', '0x0c0330', driver='xhci_hcd')
    host.dev_nodes('nvidia0', 'nvidia1', 'nvidia2', 'nvidiactl', 'nvidia-uvm', 'nvidia-modeset', 'null')
    host.dev_nodes('nvidia-caps', directory=True)
    host.modules('nvidia_uvm', 'nvidia_modeset', 'nvidia', 'drm', 'ext4')
    host.proc_file('driver/nvidia/version',
                   'NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n'
                   'GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n')

    result = facts_of(host, monkeypatch)

    assert [d['address'] for d in result['pci']] == ['0000:17:00.0', '0000:65:00.0', '0000:ca:00.0']
    first = result['pci'][0]
    assert first == {
        'address': '0000:17:00.0', 'vendor_id': '10de', 'device_id': '2330', 'class_id': '030200',
        'vendor': 'nvidia', 'kind': 'gpu', 'driver': 'nvidia', 'numa_node': 0, 'virtual_function': False,
    }
    assert result['pci'][2]['driver'] is None
    assert result['pci'][2]['numa_node'] is None
    assert result['counts'] == {
        'pci:10de': 3, 'pci:10de:2330': 2, 'pci:10de:1eb8': 1, 'gpu:nvidia': 3, 'dev:nvidia': 3,
    }
    assert result['device_nodes'] == [host.dev_path(n) for n in (
        'nvidia-modeset', 'nvidia-uvm', 'nvidia0', 'nvidia1', 'nvidia2', 'nvidiactl')]
    assert result['kernel_modules'] == ['nvidia', 'nvidia_modeset', 'nvidia_uvm']
    assert result['driver_versions'] == {'nvidia': '550.54.15'}
    assert result['usb'] == []
    assert warnings_of(result) == []


def test_nvidia_open_module_version_and_sysfs_fallback(host, monkeypatch):
    host.pci('0000:01:00.0', '0x10de', '0x2684', '0x030000', driver='nvidia')
    host.proc_file('driver/nvidia/version',
                   'NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  560.35.03  Release Build\n')
    assert facts_of(host, monkeypatch)['driver_versions'] == {'nvidia': '560.35.03'}

    # Without the proc file the module's sysfs version is used.
    os.remove(os.path.join(host.proc, 'driver', 'nvidia', 'version'))
    host.sys_file('module/nvidia/version', '535.161.08\n')
    assert facts_of(host, monkeypatch)['driver_versions'] == {'nvidia': '535.161.08'}


def test_amd_gpu_with_kfd(host, monkeypatch):
    host.pci('0000:03:00.0', '0x1002', '0x740f', '0x038000', driver='amdgpu', numa=0)
    host.pci('0000:83:00.0', '0x1002', '0x74a1', '0x120000', driver='amdgpu', numa=1)
    # The HDMI audio function and an AMD PCIe switch of the same card are not counted.
    host.pci('0000:03:00.1', '0x1002', '0xab38', '0x040300', driver='snd_hda_intel')
    host.pci('0000:02:00.0', '0x1002', '0x1478', '0x060400', driver='pcieport')
    host.dev_nodes('kfd')
    host.dri_nodes('card0', 'card1', 'renderD128', 'renderD129', 'by-path')
    host.modules('amdgpu', 'drm_ttm_helper')
    host.sys_file('module/amdgpu/version', '6.7.0\n')

    result = facts_of(host, monkeypatch)

    assert [(d['address'], d['kind']) for d in result['pci']] == [
        ('0000:03:00.0', 'gpu'), ('0000:83:00.0', 'accelerator')]
    assert result['counts'] == {
        'pci:1002': 2, 'pci:1002:740f': 1, 'pci:1002:74a1': 1,
        'gpu:amd': 1, 'accelerator:amd': 1, 'dev:dri_render': 2,
    }
    assert result['device_nodes'] == [
        host.dev_path('dri/card0'), host.dev_path('dri/card1'), host.dev_path('dri/renderD128'),
        host.dev_path('dri/renderD129'), host.dev_path('kfd')]
    assert result['kernel_modules'] == ['amdgpu']
    assert result['driver_versions'] == {'amdgpu': '6.7.0'}


def test_intel_igpu_only_display_and_accelerators(host, monkeypatch):
    host.pci('0000:00:02.0', '0x8086', '0x46a6', '0x030000', driver='i915')
    host.pci('0000:00:0b.0', '0x8086', '0x7d1d', '0x120000', driver='intel_vpu')
    # Host bridge, USB controller, NIC and audio of the same vendor are ignored.
    host.pci('0000:00:00.0', '0x8086', '0x4621', '0x060000')
    host.pci('0000:00:14.0', '0x8086', '0x51ed', '0x0c0330', driver='xhci_hcd')
    host.pci('0000:00:1f.6', '0x8086', '0x1a1e', '0x020000', driver='e1000e')
    host.pci('0000:00:1f.3', '0x8086', '0x51c8', '0x040380', driver='snd_hda_intel')
    host.dri_nodes('card0', 'renderD128')
    host.modules('i915', 'e1000e')

    result = facts_of(host, monkeypatch)

    assert [(d['device_id'], d['kind'], d['driver']) for d in result['pci']] == [
        ('46a6', 'gpu', 'i915'), ('7d1d', 'accelerator', 'intel_vpu')]
    assert result['counts']['gpu:intel'] == 1
    assert result['counts']['accelerator:intel'] == 1
    assert result['counts']['pci:8086'] == 2
    assert result['kernel_modules'] == ['i915']


def test_xilinx_fpga(host, monkeypatch):
    host.pci('0000:3b:00.0', '0x10ee', '0x5004', '0x058000', driver='xclmgmt')
    host.pci('0000:3b:00.1', '0x10ee', '0x5005', '0x120000', driver='xocl')
    host.pci('0000:3a:00.0', '0x10ee', '0x9034', '0x060400', driver='pcieport')

    result = facts_of(host, monkeypatch)

    assert [d['kind'] for d in result['pci']] == ['fpga', 'fpga']
    assert result['counts'] == {
        'pci:10ee': 2, 'pci:10ee:5004': 1, 'pci:10ee:5005': 1, 'fpga:xilinx': 2}


def test_mellanox_nic_with_virtual_functions(host, monkeypatch):
    host.pci('0000:5e:00.0', '0x15b3', '0x101d', '0x020000', driver='mlx5_core', numa=0)
    host.pci('0000:5e:00.1', '0x15b3', '0x101d', '0x020700', driver='mlx5_core', numa=0)
    host.pci('0000:5e:00.2', '0x15b3', '0x101e', '0x020000', driver='vfio-pci', physfn='0000:5e:00.0')
    # A BlueField's internal bridge is not a NIC.
    host.pci('0000:5d:00.0', '0x15b3', '0x1976', '0x060400', driver='pcieport')
    host.modules('mlx5_core', 'vfio_pci', 'mlxfw')

    result = facts_of(host, monkeypatch)

    assert [(d['address'], d['virtual_function']) for d in result['pci']] == [
        ('0000:5e:00.0', False), ('0000:5e:00.1', False), ('0000:5e:00.2', True)]
    assert result['counts']['nic:mellanox'] == 3
    assert result['counts']['pci:15b3:101e'] == 1
    assert result['kernel_modules'] == ['mlx5_core', 'vfio_pci']


def test_usb_dongles_root_hub_and_interfaces_ignored(host, monkeypatch):
    host.usb('usb1', '1d6b', '0002', product='xHCI Host Controller')
    host.usb('1-0:1.0', None, None)
    host.usb('1-1', '0529', '0001', manufacturer='SafeNet', product='HASP HL 3.25', serial=None)
    host.usb('1-1:1.0', None, None)
    host.usb('1-2', '05e3', '0610', product='USB2.0 Hub')
    host.usb('1-2.4', '0529', '0001', manufacturer='SafeNet', product='HASP HL 3.25', serial='ABC123')
    host.usb('1-2.4:1.0', None, None)

    result = facts_of(host, monkeypatch, resource_map={'usb:0529:0001': 'example.com/dongle'})

    assert [d['bus_id'] for d in result['usb']] == ['1-1', '1-2', '1-2.4']
    assert result['usb'][2] == {
        'bus_id': '1-2.4', 'vendor_id': '0529', 'product_id': '0001',
        'manufacturer': 'SafeNet', 'product': 'HASP HL 3.25', 'serial': 'ABC123'}
    assert result['usb'][0]['serial'] is None
    assert result['counts'] == {'usb:0529:0001': 2, 'usb:05e3:0610': 1}
    assert result['resources'] == {'example.com/dongle': 2}
    assert warnings_of(result) == []


def test_host_without_devices(host, monkeypatch):
    host.pci('0000:00:00.0', '0x1022', '0x1480', '0x060000')
    host.pci('0000:00:01.0', '0x8086', '0x1237', '0x060000')
    host.usb('usb1', '1d6b', '0002')
    host.modules('ext4')

    result = facts_of(host, monkeypatch, resource_map={'gpu:nvidia': 'nvidia.com/gpu', 'USB:0529:0001': 'example.com/dongle'})

    assert result['pci'] == [] and result['usb'] == [] and result['device_nodes'] == []
    assert result['counts'] == {}
    assert result['kernel_modules'] == [] and result['driver_versions'] == {}
    # Mapped keys with no device give 0 so the resource can be advertised as gone.
    assert result['resources'] == {'nvidia.com/gpu': 0, 'example.com/dongle': 0}


def test_missing_usb_bus_proc_and_dev(host, monkeypatch):
    host.pci('0000:01:00.0', '0x10de', '0x2330', '0x030200', driver='nvidia')
    host.sys_file('module/nvidia/initstate', 'live\n')
    host.sys_file('module/nouveau/initstate', 'coming\n')
    args = host.module_args()
    args['proc_root'] = os.path.join(host.root, 'no-proc')
    args['dev_root'] = os.path.join(host.root, 'no-dev')
    assert not os.path.exists(os.path.join(host.sys, 'bus', 'usb'))

    result, failed = run_module(args, monkeypatch)

    assert not failed
    assert result['usb'] == [] and result['device_nodes'] == []
    assert result['counts'] == {'pci:10de': 1, 'pci:10de:2330': 1, 'gpu:nvidia': 1}
    # /proc/modules unreadable: live modules come from sysfs.
    assert result['kernel_modules'] == ['nvidia']
    assert warnings_of(result) == []


def test_malformed_entries_are_skipped_with_warnings(host, monkeypatch):
    host.pci('0000:01:00.0', '0x10de', '0x2330', '0x030200', driver='nvidia')
    host.pci('0000:02:00.0', 'nvidia', '0x2330', '0x030200')
    host.pci('0000:03:00.0', '0x10de', '0x2330', 'garbage')
    host.pci('0000:04:00.0', '0x10de', None, '0x030200')
    host.pci('0000:05:00.0', None, None, None)
    host.pci('0000:06:00.0', '0x10de', '0x2330', '0x030200', numa='x')
    host.usb('1-1', '0529', '0001')
    host.usb('1-2', 'zz29', '0001')
    host.usb('1-3', '0529', None)
    # A sysfs entry whose vendor "file" is a directory cannot be read.
    host.pci('0000:07:00.0', None, '0x2330', '0x030200')
    os.mkdir(os.path.join(host.sys, 'bus', 'pci', 'devices', '0000:07:00.0', 'vendor'))
    host.modules_raw('nvidia 56000000 10 - Live 0x0\n\n   \n')

    result = facts_of(host, monkeypatch)

    assert [d['address'] for d in result['pci']] == ['0000:01:00.0', '0000:06:00.0']
    assert result['pci'][1]['numa_node'] is None
    assert [d['bus_id'] for d in result['usb']] == ['1-1']
    assert result['kernel_modules'] == ['nvidia']
    warnings = ' | '.join(warnings_of(result))
    for expected in ("PCI device 0000:02:00.0", "'nvidia', not a hexadecimal ID",
                     "PCI device 0000:03:00.0", "PCI device 0000:04:00.0", "PCI device 0000:05:00.0",
                     "PCI device 0000:07:00.0: cannot read", "numa_node 'x'",
                     "USB device 1-2", "USB device 1-3"):
        assert expected in warnings
    assert len(warnings_of(result)) == 8


def test_vendor_and_kind_filters(host, monkeypatch):
    host.pci('0000:01:00.0', '0x10de', '0x2330', '0x030200')
    host.pci('0000:02:00.0', '0x1002', '0x740f', '0x038000')
    host.pci('0000:03:00.0', '0x15b3', '0x101d', '0x020000')

    result = facts_of(host, monkeypatch, vendors=['nvidia', 'mellanox'])
    assert [d['vendor'] for d in result['pci']] == ['nvidia', 'mellanox']

    result = facts_of(host, monkeypatch, kinds=['gpu'])
    assert [d['vendor'] for d in result['pci']] == ['nvidia', 'amd']
    assert 'nic:mellanox' not in result['counts']


def test_check_mode_reads_the_same(host, monkeypatch):
    host.pci('0000:01:00.0', '0x10de', '0x2330', '0x030200')
    before = sorted(os.walk(host.root))
    result, failed = run_module(host.module_args(), monkeypatch, check_mode=True)
    assert not failed and result['changed'] is False
    assert result['counts']['gpu:nvidia'] == 1
    assert sorted(os.walk(host.root)) == before


@pytest.mark.parametrize('resource_map, message', [
    ({'gpu:nvidia': 'gpu'}, "resource_map['gpu:nvidia'] = 'gpu' is not a valid extended-resource name: must contain exactly one '/'"),
    ({'gpu:nvidia': 'kubernetes.io/gpu'}, "'kubernetes.io' is reserved"),
    ({'gpu:nvidia': 'foo.kubernetes.io/gpu'}, "'foo.kubernetes.io' is reserved"),
    ({'gpu:nvidia': 'Example.com/gpu'}, 'DNS subdomain'),
    ({'gpu:nvidia': 'example.com/bad name'}, "name part 'bad name'"),
    ({'gpu:nvidia': 'example.com/' + 'a' * 64}, 'no more than 63 characters'),
    ({'gpu:nvidia': 'a/b/c'}, "exactly one '/'"),
    ({'gpu:nvidia': 7}, 'must be a string'),
    ({'usb:529:1': 'example.com/dongle'}, "key 'usb:529:1' is not a count key"),
    ({'gpu:nvidia': 'example.com/gpu', 'pci:10de': 'example.com/gpu'}, "maps both 'gpu:nvidia' and 'pci:10de'"),
])
def test_resource_map_validation(host, monkeypatch, resource_map, message):
    host.pci('0000:01:00.0', '0x10de', '0x2330', '0x030200')
    args = host.module_args()
    args['resource_map'] = resource_map
    result, failed = run_module(args, monkeypatch)
    assert failed
    assert message in result['msg']
    assert 'resources' not in result


def test_missing_sysfs_root_fails_clearly(tmp_path, monkeypatch):
    result, failed = run_module({'sysfs_root': str(tmp_path / 'nope')}, monkeypatch)
    assert failed
    assert 'is not a directory' in result['msg'] and 'nope' in result['msg']


def test_module_runs_as_a_process(host):
    """The module file itself runs through AnsibleModule's stdin protocol (no import-time surprises)."""
    import subprocess
    host.pci('0000:01:00.0', '0x10de', '0x2330', '0x030200')
    host.pci('0000:02:00.0', '0x10de', '0x23xx', '0x030200')
    payload = json.dumps({'ANSIBLE_MODULE_ARGS': host.module_args()})
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.run(
        [sys.executable, '-m', 'ansible_collections.kubehw.devices.plugins.modules.device_facts'],
        input=payload.encode(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60, check=False, env=env)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result['counts'] == {'pci:10de': 1, 'pci:10de:2330': 1, 'gpu:nvidia': 1}
    # Warnings reach the user through the normal result channel.
    # (ansible-core 2.19 sends structured warnings, older versions strings: match the text either way.)
    assert 'Skipping PCI device 0000:02:00.0' in json.dumps(result.get('warnings', [])), result
