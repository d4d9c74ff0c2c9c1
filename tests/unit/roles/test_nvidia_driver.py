# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Distro logic of the nvidia_driver role, tested without installing a driver.

One ansible-playbook run plays tasks/plan.yml on many fake localhost hosts at once: each host gets
the facts of one distribution (through cacheable set_fact), a fixture sysfs tree with or without an
NVIDIA GPU, and a PATH with a fake nvidia-smi. The resolved nvidia_driver_plan of each host, or the
message it failed with, is then checked here.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import sys

import pytest
import yaml

from tests.support import playbook_runner

# One xdist worker takes every test of this file (make's pytest stages run --dist loadgroup): the
# module-scoped `planned` fixture is one ansible-playbook run of tens of CPU seconds, which every
# worker given a test of this file would repeat. Its first test's budget holds that run: beside the
# roles lane on a loaded 2-core machine it took more than pytest.ini's 300 s (measured 2026-11-23).
pytestmark = [pytest.mark.xdist_group('nvidia_driver_plan'), pytest.mark.timeout(900)]

UPSTREAM = 'https://developer.download.nvidia.com/compute/cuda/repos'


def facts(distribution, version, os_family, arch='x86_64', kernel='6.1.0-18-amd64'):
    return {
        'distribution': distribution,
        'distribution_version': version,
        'distribution_major_version': version.split('.')[0],
        'os_family': os_family,
        'architecture': arch,
        'kernel': kernel,
    }


UBUNTU_2204 = facts('Ubuntu', '22.04', 'Debian', kernel='5.15.0-100-generic')
UBUNTU_2404 = facts('Ubuntu', '24.04', 'Debian', kernel='6.8.0-31-generic')
DEBIAN_12 = facts('Debian', '12.5', 'Debian')
ROCKY_8 = facts('Rocky', '8.9', 'RedHat', kernel='4.18.0-513.5.1.el8_9.x86_64')
ROCKY_9 = facts('Rocky', '9.3', 'RedHat', kernel='5.14.0-362.8.1.el9_3.x86_64')
RHEL_9 = facts('RedHat', '9.4', 'RedHat', kernel='5.14.0-427.13.1.el9_4.x86_64')

# host name -> (facts, sysfs fixture, fake nvidia-smi, role variables)
HOSTS = {
    'ubuntu2204': (UBUNTU_2204, 'gpu', 'absent', {}),
    'ubuntu2404_cuda_open_arm': (
        dict(UBUNTU_2404, architecture='aarch64'), 'gpu', 'absent',
        {'nvidia_driver_source': 'cuda', 'nvidia_driver_open': True, 'nvidia_driver_branch': '570'}),
    'ubuntu2404_desktop_open': (
        UBUNTU_2404, 'gpu', 'broken', {'nvidia_driver_server': False, 'nvidia_driver_open': True}),
    'debian12': (DEBIAN_12, 'gpu', 'absent', {}),
    'debian12_mirror': (
        DEBIAN_12, 'gpu', 'absent',
        {'nvidia_driver_repo_mode': 'mirror', 'nvidia_driver_mirror_url': 'file:///srv/mirror/cuda/debian12/',
         'nvidia_driver_gpg_key': '/srv/mirror/cuda/3bf863cc.pub'}),
    'rocky8': (ROCKY_8, 'gpu', 'absent', {}),
    'rocky9_open_norepo': (
        ROCKY_9, 'gpu', 'absent', {'nvidia_driver_open': True, 'nvidia_driver_repo_mode': 'none'}),
    'rhel9_mirror': (
        RHEL_9, 'gpu', 'absent',
        {'nvidia_driver_repo_mode': 'mirror', 'nvidia_driver_mirror_url': 'https://mirror.example.internal/cuda/rhel9',
         'nvidia_driver_gpg_key': '/etc/pki/rpm-gpg/NVIDIA-CUDA', 'nvidia_driver_extra_packages': ['nvidia-fabric-manager'],
         'nvidia_driver_kernel_headers': False}),
    'smi_same_branch': (DEBIAN_12, 'gpu', 'same', {}),
    'smi_other_branch': (DEBIAN_12, 'gpu', 'other', {}),
    'no_device_forced': (ROCKY_9, 'empty', 'absent', {'nvidia_driver_force': True}),
    # RHEL has no epel-release in its repositories: EPEL comes from its URL.
    'rhel9_upstream': (RHEL_9, 'gpu', 'absent', {}),
    # A branch change on a host where dnf has another nvidia-driver stream enabled.
    'rocky9_branch_change': (ROCKY_9, 'gpu', 'dnf535', {'nvidia_driver_branch': '570'}),
    'rocky9_same_stream': (ROCKY_9, 'gpu', 'dnf550', {}),
    # Failures
    'ubuntu2004': (facts('Ubuntu', '20.04', 'Debian'), 'gpu', 'absent', {}),
    'fedora40': (facts('Fedora', '40', 'RedHat'), 'gpu', 'absent', {}),
    'ppc64le': (dict(ROCKY_9, architecture='ppc64le'), 'gpu', 'absent', {}),
    'no_device': (ROCKY_9, 'empty', 'absent', {}),
    'debian12_distro': (DEBIAN_12, 'gpu', 'absent', {'nvidia_driver_source': 'distro'}),
    'mirror_without_url': (DEBIAN_12, 'gpu', 'absent', {'nvidia_driver_repo_mode': 'mirror'}),
    'bad_branch': (DEBIAN_12, 'gpu', 'absent', {'nvidia_driver_branch': 'latest'}),
    'bad_repo_mode': (DEBIAN_12, 'gpu', 'absent', {'nvidia_driver_repo_mode': 'offline'}),
}

FAKE_SMI = {
    'same': '#!/bin/sh\nprintf "550.54.15\\n550.54.15\\n"\n',
    'other': '#!/bin/sh\nprintf "535.161.08\\n"\n',
    # What nvidia-smi prints when the packages are there but the kernel module is not loaded.
    'broken': ('#!/bin/sh\necho "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver."\n'
               'exit 9\n'),
}

# "dnf -q module list --enabled nvidia-driver" as dnf 4 prints it (the stream enabled, [d] when it is the default).
DNF_TABLE = ('#!/bin/sh\n[ "$*" = "-q module list --enabled nvidia-driver" ] || exit 1\n'
             'echo "CUDA rhel9-x86_64"\necho "Name           Stream      Profiles           Summary"\n'
             'echo "nvidia-driver  %s  default [d], src  Nvidia driver for %s branch"\necho\n'
             'echo "Hint: [d]efault, [e]nabled, [x]disabled, [i]nstalled"\n')
FAKE_TOOLS = {
    'dnf535': {'dnf': DNF_TABLE % ('535-dkms [e]', '535-dkms')},
    'dnf550': {'dnf': DNF_TABLE % ('550-dkms [d][e]', '550-dkms')},
}

# Each fake host gets its distribution's facts the way gathered facts arrive: as cacheable facts.
FAKE_FACTS_PLAY = """
- name: %s
  hosts: all
  gather_facts: false
  environment:
    PATH: "{{ test_path }}"
  tasks:
    - name: Fake the facts of this host's distribution
      ansible.builtin.set_fact:
        "{{ item.key }}": "{{ item.value }}"
        cacheable: true
      loop: "{{ test_facts | dict2items }}"
      check_mode: false
"""

PLAYBOOK = FAKE_FACTS_PLAY % 'Plan the NVIDIA driver per fake distribution' + """
    - name: Plan
      ansible.builtin.include_role:
        name: kubehw.devices.nvidia_driver
        tasks_from: plan

    - name: Save the plan
      ansible.builtin.copy:
        content: "{{ {'plan': nvidia_driver_plan, 'version': nvidia_driver_version} | to_json }}"
        dest: "{{ test_out }}/{{ inventory_hostname }}.json"
        mode: "0644"
"""


def write(path, content, mode=0o644):
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        os.makedirs(parent)
    with open(path, 'w') as f:
        f.write(content)
    os.chmod(path, mode)


def make_sysfs(root, with_gpu):
    pci = os.path.join(root, 'bus', 'pci', 'devices')
    write(os.path.join(pci, '0000:00:00.0', 'vendor'), '0x8086\n')
    write(os.path.join(pci, '0000:00:00.0', 'device'), '0x09a2\n')
    write(os.path.join(pci, '0000:00:00.0', 'class'), '0x060000\n')
    # An NVIDIA audio function alone is not a GPU: the "empty" host has one.
    write(os.path.join(pci, '0000:17:00.1', 'vendor'), '0x10de\n')
    write(os.path.join(pci, '0000:17:00.1', 'device'), '0x22bb\n')
    write(os.path.join(pci, '0000:17:00.1', 'class'), '0x040300\n')
    if with_gpu:
        write(os.path.join(pci, '0000:17:00.0', 'vendor'), '0x10de\n')
        write(os.path.join(pci, '0000:17:00.0', 'device'), '0x2330\n')
        write(os.path.join(pci, '0000:17:00.0', 'class'), '0x030200\n')
    return root


def run_playbook(tmp, hosts, playbook, extra_args=(), fake_smi=None):
    sysfs = {
        'gpu': make_sysfs(os.path.join(tmp, 'sys-gpu'), True),
        'empty': make_sysfs(os.path.join(tmp, 'sys-empty'), False),
    }
    paths = {}
    system_path = os.environ.get('PATH', '/usr/bin:/bin')
    for name, script in (fake_smi or FAKE_SMI).items():
        write(os.path.join(tmp, 'bin-' + name, 'nvidia-smi'), script, 0o755)
        paths[name] = os.path.join(tmp, 'bin-' + name) + os.pathsep + system_path
    for name, tools in FAKE_TOOLS.items():
        for tool, script in tools.items():
            write(os.path.join(tmp, 'bin-' + name, tool), script, 0o755)
        # no nvidia-smi on these hosts, even on a developer's GPU machine
        paths[name] = os.path.join(tmp, 'bin-' + name) + os.pathsep + '/usr/sbin:/usr/bin:/sbin:/bin'
    # "absent": a PATH on which no nvidia-smi exists, even on a developer's GPU machine.
    os.makedirs(os.path.join(tmp, 'bin-absent'))
    paths['absent'] = os.path.join(tmp, 'bin-absent') + os.pathsep + '/usr/sbin:/usr/bin:/sbin:/bin'

    out = os.path.join(tmp, 'out')
    os.makedirs(out)
    inventory = {'all': {'vars': {
        'ansible_connection': 'local',
        'ansible_python_interpreter': sys.executable,
        'test_out': out,
    }, 'hosts': {}}}
    for name, (host_facts, tree, smi, role_vars) in hosts.items():
        host = {'test_facts': host_facts, 'nvidia_driver_sysfs_root': sysfs[tree], 'test_path': paths[smi]}
        host.update(role_vars)
        inventory['all']['hosts'][name] = host
    write(os.path.join(tmp, 'inventory.yml'), yaml.safe_dump(inventory))
    write(os.path.join(tmp, 'playbook.yml'), playbook)

    proc = playbook_runner.run_playbook(os.path.join(tmp, 'playbook.yml'), tmp, inventory=os.path.join(tmp, 'inventory.yml'),
                                        env={'ANSIBLE_FORKS': '8'}, args=extra_args, timeout=900)
    # every task result, as the kubehw_results callback recorded it
    events = [{'status': 'ignored' if r.get('ignore_errors') else r['_outcome'], 'host': r['_host'], 'task': r['task'],
               'result': r} for r in proc.results]
    assert events, 'ansible-playbook recorded nothing (rc %s): %s\n%s' % (proc.returncode, proc.stdout, proc.stderr)
    plans = {}
    for name in os.listdir(out):
        with open(os.path.join(out, name)) as f:
            plans[name[:-len('.json')]] = json.load(f)
    failures = dict((e['host'], e['result'].get('msg', '')) for e in events if e['status'] == 'failed')
    return proc, events, plans, failures


@pytest.fixture(scope='module')
def planned(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp('nvidia_driver_plan'))
    proc, report, plans, failures = run_playbook(tmp, HOSTS, PLAYBOOK)
    return proc, report, plans, failures


def plan_of(planned, host):
    proc, dummy, plans, failures = planned
    assert host in plans, 'no plan for %s; failure: %s\n%s' % (host, failures.get(host), proc.stderr)
    return plans[host]['plan']


def test_every_host_either_planned_or_failed_once(planned):
    dummy, events, plans, failures = planned
    assert set(plans) | set(failures) == set(HOSTS)
    assert not set(plans) & set(failures)
    assert set(failures) == {'ubuntu2004', 'fedora40', 'ppc64le', 'no_device', 'debian12_distro',
                             'mirror_without_url', 'bad_branch', 'bad_repo_mode'}
    # The plan is read-only: only the test's own "Save the plan" may change something.
    changed = set((e['host'], e['task']) for e in events if e['result'].get('changed'))
    assert set(task for dummy, task in changed) <= {'Save the plan'}


def test_ubuntu_2204_uses_the_archive_server_driver(planned):
    plan = plan_of(planned, 'ubuntu2204')
    assert plan['source'] == 'distro'
    assert plan['package_manager'] == 'apt'
    assert plan['packages'] == ['nvidia-driver-550-server']
    assert plan['prerequisite_packages'] == ['linux-headers-5.15.0-100-generic']
    assert plan['repo'] == {}
    assert plan['module_stream'] == ''
    assert plan['initramfs_command'] == ['update-initramfs', '-u']
    assert plan['modprobe_file'] == '/etc/modprobe.d/kubehw-blacklist-nouveau.conf'
    assert plan['nvidia_devices'] == 1
    assert plan['install_needed'] is True
    assert plan['running_versions'] == []


def test_ubuntu_2404_desktop_open_variant(planned):
    plan = plan_of(planned, 'ubuntu2404_desktop_open')
    assert plan['release'] == '24.04'
    assert plan['packages'] == ['nvidia-driver-550-open']
    # nvidia-smi failing (rc 9, module not loaded) means the driver still has to be installed.
    assert plan['install_needed'] is True and plan['running_versions'] == []


def test_ubuntu_2404_cuda_repository_on_arm(planned):
    plan = plan_of(planned, 'ubuntu2404_cuda_open_arm')
    url = UPSTREAM + '/ubuntu2404/sbsa/'
    assert plan['source'] == 'cuda'
    assert plan['packages'] == ['nvidia-open-570']
    assert plan['repo'] == {
        'type': 'apt',
        'url': url,
        'gpg_key': url + '3bf863cc.pub',
        'keyring': '/etc/apt/keyrings/nvidia-cuda.asc',
        'file': '/etc/apt/sources.list.d/nvidia-cuda.list',
        'line': 'deb [signed-by=/etc/apt/keyrings/nvidia-cuda.asc] %s /' % url,
    }


def test_debian_12_uses_cuda_drivers_and_firmware(planned):
    plan = plan_of(planned, 'debian12')
    url = UPSTREAM + '/debian12/x86_64/'
    assert plan['release'] == '12'
    assert plan['source'] == 'cuda'
    assert plan['packages'] == ['cuda-drivers-550', 'firmware-misc-nonfree']
    assert plan['prerequisite_packages'] == ['linux-headers-6.1.0-18-amd64']
    assert plan['repo']['url'] == url
    assert plan['repo']['line'] == 'deb [signed-by=/etc/apt/keyrings/nvidia-cuda.asc] %s /' % url
    assert plan['repo']['gpg_key'] == url + '3bf863cc.pub'


def test_debian_12_local_mirror(planned):
    repo = plan_of(planned, 'debian12_mirror')['repo']
    assert repo['url'] == 'file:///srv/mirror/cuda/debian12/'
    assert repo['gpg_key'] == '/srv/mirror/cuda/3bf863cc.pub'
    assert repo['line'] == 'deb [signed-by=/etc/apt/keyrings/nvidia-cuda.asc] file:///srv/mirror/cuda/debian12/ /'


def test_rocky_8_module_stream(planned):
    plan = plan_of(planned, 'rocky8')
    url = UPSTREAM + '/rhel8/x86_64'
    assert plan['package_manager'] == 'dnf'
    assert plan['module_stream'] == 'nvidia-driver:550-dkms'
    assert plan['packages'] == ['@nvidia-driver:550-dkms']
    assert plan['prerequisite_packages'] == [
        'kernel-devel-4.18.0-513.5.1.el8_9.x86_64', 'kernel-headers-4.18.0-513.5.1.el8_9.x86_64', 'epel-release']
    assert plan['repo'] == {
        'type': 'dnf', 'name': 'nvidia-cuda', 'url': url, 'gpg_key': url + '/D42D0685.pub',
        'file': '/etc/yum.repos.d/nvidia-cuda.repo'}
    assert plan['initramfs_command'] == ['dracut', '-f']


def test_rocky_9_open_stream_without_repository(planned):
    plan = plan_of(planned, 'rocky9_open_norepo')
    assert plan['release'] == '9'
    assert plan['module_stream'] == 'nvidia-driver:550-open'
    assert plan['packages'] == ['@nvidia-driver:550-open']
    assert plan['repo'] == {}
    # EPEL is the site's business when it manages the repositories itself.
    assert 'epel-release' not in plan['prerequisite_packages']


def test_rhel_9_mirror_with_key_file(planned):
    plan = plan_of(planned, 'rhel9_mirror')
    assert plan['repo']['url'] == 'https://mirror.example.internal/cuda/rhel9'
    assert plan['repo']['gpg_key'] == 'file:///etc/pki/rpm-gpg/NVIDIA-CUDA'
    assert plan['packages'] == ['@nvidia-driver:550-dkms', 'nvidia-fabric-manager']
    assert plan['prerequisite_packages'] == []


def test_nvidia_smi_reporting_the_branch_skips_installation(planned):
    dummy, dummy2, plans, dummy3 = planned
    assert plans['smi_same_branch']['plan']['install_needed'] is False
    assert plans['smi_same_branch']['plan']['running_versions'] == ['550.54.15']
    assert plans['smi_same_branch']['version'] == '550.54.15'
    # Another branch running: install, and the fact tells what runs now.
    assert plans['smi_other_branch']['plan']['install_needed'] is True
    assert plans['smi_other_branch']['version'] == '535.161.08'
    assert plans['debian12']['version'] == ''


def test_no_nvidia_device_forced_continues(planned):
    plan = plan_of(planned, 'no_device_forced')
    assert plan['nvidia_devices'] == 0
    assert plan['packages'] == ['@nvidia-driver:550-dkms']


@pytest.mark.parametrize('host, expected', [
    ('ubuntu2004', 'supports Ubuntu 22.04/24.04, Debian 12 and RHEL/Rocky/AlmaLinux 8/9; ubuntu2004 runs Ubuntu 20.04'),
    ('fedora40', 'fedora40 runs Fedora 40 (family RedHat)'),
    ('ppc64le', 'supports x86_64 and aarch64; ppc64le is ppc64le'),
    ('no_device', 'No NVIDIA GPU (PCI vendor 10de, display or accelerator class) found under'),
    ('debian12_distro', 'nvidia_driver_source: distro is only available on Ubuntu; Debian installs from'),
    ('mirror_without_url', 'nvidia_driver_mirror_url is empty'),
    ('bad_branch', 'nvidia_driver_branch must be a driver branch number such as "550"; got "latest"'),
    ('bad_repo_mode', 'nvidia_driver_repo_mode'),
])
def test_clear_failures(planned, host, expected):
    dummy, dummy2, dummy3, failures = planned
    assert expected in failures[host]


def test_no_device_message_names_the_override(planned):
    msg = planned[3]['no_device']
    assert 'nvidia_driver_force: true' in msg
    assert 'sys-empty/bus/pci/devices' in msg


MAIN_CHECK_PLAYBOOK = FAKE_FACTS_PLAY % 'Run the whole role in check mode where the wanted branch already runs' + """
    - name: Run the role
      ansible.builtin.include_role:
        name: kubehw.devices.nvidia_driver
"""


def test_whole_role_skips_installation_when_branch_runs(tmp_path):
    """tasks/main.yml in check mode: no install task runs, the version fact comes from nvidia-smi."""
    hosts = {'gpu_host': (DEBIAN_12, 'gpu', 'same', {
        'nvidia_driver_persistenced': False,
        # Keep check mode away from this machine's /etc.
        'nvidia_driver_blacklist_nouveau': False,
    })}
    proc, events, dummy, failures = run_playbook(str(tmp_path), hosts, MAIN_CHECK_PLAYBOOK, ['--check'])
    assert proc.returncode == 0 and not failures, failures
    assert "Validating arguments against arg spec 'main'" in ' '.join(e['task'] for e in events)
    # Role tasks are reported as "<role> : <name>".
    tasks = dict((e['task'].split(' : ')[-1], dict(e['result'], status=e['status'])) for e in events)
    assert tasks['Install the NVIDIA driver']['status'] == 'skipped'
    assert 'installation skipped' in tasks['Report that the wanted branch is already running']['msg']
    assert 'driver 550.54.15 (branch 550)' in tasks['Report that the wanted branch is already running']['msg']
    assert tasks['Ask nvidia-smi for the installed driver version']['status'] == 'skipped'
    assert not [e['task'] for e in events if e['result'].get('changed')]


def test_rhel_takes_epel_from_its_url_rocky_from_its_repositories(planned):
    rhel = plan_of(planned, 'rhel9_upstream')['prerequisite_packages']
    assert rhel[-1] == 'https://dl.fedoraproject.org/pub/epel/epel-release-latest-9.noarch.rpm'
    assert 'epel-release' not in rhel
    assert plan_of(planned, 'rocky8')['prerequisite_packages'][-1] == 'epel-release'


def test_branch_change_switches_the_module_stream(planned):
    plan = plan_of(planned, 'rocky9_branch_change')
    assert plan['module_stream'] == 'nvidia-driver:570-dkms'
    assert plan['enabled_stream'] == '535-dkms'
    assert plan['module_switch'] is True
    same = plan_of(planned, 'rocky9_same_stream')
    assert same['enabled_stream'] == '550-dkms' and same['module_switch'] is False
    # no dnf at all (or no stream enabled yet): a first install, nothing to reset
    assert plan_of(planned, 'rocky8')['enabled_stream'] == '' and plan_of(planned, 'rocky8')['module_switch'] is False
