# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The runtime configuration tasks of the host roles, played on localhost against files in a temporary directory.

Played in check and diff mode: nothing is written and no handler restarts a service, and the diff
of each write task shows what the role would put on a host, which is parsed here as the runtime
would load it. One ansible-playbook run per scenario (a few seconds each).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import shutil
import subprocess
import sys
import tomllib

import pytest
import yaml

COLLECTION_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'fixtures')
TEST_COLLECTIONS = os.path.join(COLLECTION_ROOT, '.cache', 'collections')


# Handlers run in check mode too: systemd_service asks systemctl about the unit, then only says it
# would restart it. This stand-in answers for a loaded, running unit.
FAKE_BIN = {'systemctl': '#!/bin/sh\ncase "$*" in *show*) printf "Id=%s.service\\nLoadState=loaded\\nActiveState=active\\n'
                         'SubState=running\\nUnitFileState=enabled\\n" "$(echo "$*" | sed "s/.* //")";; esac\nexit 0\n'}


def write(path, text, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        f.write(text)
    os.chmod(path, mode)


def play(tmp, tasks, extra_vars=None, fake_bin=None, check=True):
    """Run tasks on localhost; return {task name: result} of the last result of each task."""
    if not os.path.isdir(os.path.join(TEST_COLLECTIONS, 'ansible_collections', 'ansible', 'posix')):
        pytest.fail('ansible.posix (json callback) is missing from .cache/collections: run make setup')
    collections = os.path.join(tmp, 'collections')
    os.makedirs(os.path.join(collections, 'ansible_collections', 'kubehw'))
    os.symlink(COLLECTION_ROOT, os.path.join(collections, 'ansible_collections', 'kubehw', 'devices'))
    bin_dir = os.path.join(tmp, 'bin')
    os.makedirs(bin_dir)
    for name, script in dict(FAKE_BIN, **(fake_bin or {})).items():
        write(os.path.join(bin_dir, name), script, 0o755)
    playbook = [{'name': 'Play the tasks under test', 'hosts': 'localhost', 'gather_facts': False,
                 'vars': dict(extra_vars or {}, ansible_python_interpreter=sys.executable), 'tasks': tasks}]
    write(os.path.join(tmp, 'playbook.yml'), yaml.safe_dump(playbook, sort_keys=False))
    env = dict(os.environ)
    env.update({
        'ANSIBLE_COLLECTIONS_PATH': collections + os.pathsep + TEST_COLLECTIONS,
        'ANSIBLE_STDOUT_CALLBACK': 'ansible.posix.json',
        'ANSIBLE_NOCOLOR': '1',
        'ANSIBLE_LOCAL_TEMP': os.path.join(tmp, 'ansible-local'),
        'ANSIBLE_REMOTE_TEMP': os.path.join(tmp, 'ansible-remote'),
        'ANSIBLE_RETRY_FILES_ENABLED': '0',
        # No crio, docker or containerd of the machine running the tests: only the fakes.
        'PATH': bin_dir + os.pathsep + '/usr/sbin:/usr/bin:/sbin:/bin',
    })
    command = shutil.which('ansible-playbook', path=os.path.dirname(sys.executable)) or 'ansible-playbook'
    args = [command, '-i', 'localhost,', '-c', 'local', os.path.join(tmp, 'playbook.yml'), '--diff']
    if check:
        args.append('--check')
    proc = subprocess.run(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=240, check=False, cwd=tmp)
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        pytest.fail('ansible-playbook did not answer JSON (rc %s): %s\n%s' % (proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:]))
    results = {}
    for entry in report['plays'][0]['tasks']:
        for result in entry['hosts'].values():
            # "role : task" for the tasks of an included role
            results[entry['task']['name'].split(' : ')[-1]] = result
    failed = dict((name, r.get('msg')) for name, r in results.items() if r.get('failed'))
    return proc.returncode, failed, results


def after(result):
    """The content a write task would leave (the 'after' of its diff)."""
    diffs = result.get('diff') or []
    if isinstance(diffs, dict):
        diffs = [diffs]
    assert diffs and 'after' in diffs[-1], 'no diff in %r' % (result,)
    return diffs[-1]['after']


# CRI-O ---------------------------------------------------------------------------------------

def crio_tasks(etc):
    return [{'name': 'Configure CRI-O as the toolkit role does', 'ansible.builtin.include_role': {
        'name': 'kubehw.devices.nvidia_container_toolkit', 'tasks_from': 'crio'}}]


def crio_vars(etc, **more):
    return dict({'nvidia_container_toolkit_crio_config_path': os.path.join(etc, 'crio.conf'),
                 'nvidia_container_toolkit_crio_dropin': os.path.join(etc, 'crio.conf.d', '99-nvidia.conf'),
                 'nvidia_container_toolkit_runtime_binary': '/usr/bin/nvidia-container-runtime',
                 'nvidia_container_toolkit_default_runtime': False,
                 'nvidia_container_toolkit_cdi': False,
                 'nvidia_container_toolkit_cdi_spec_dirs': ['/etc/cdi']}, **more)


def merged_crio(etc, dropin_text):
    """What CRI-O loads: crio.conf, then crio.conf.d/* in lexical order, with the role's drop-in."""
    sys.path.insert(0, os.path.join(COLLECTION_ROOT, 'roles', 'nvidia_container_toolkit', 'files'))
    try:
        import crio_dropin  # pylint: disable=import-outside-toplevel
    finally:
        sys.path.pop(0)
    files = []
    if os.path.exists(os.path.join(etc, 'crio.conf')):
        files.append({'path': 'crio.conf', 'content': open(os.path.join(etc, 'crio.conf')).read()})
    for name in sorted(os.listdir(os.path.join(etc, 'crio.conf.d'))):
        if name != '99-nvidia.conf':
            files.append({'path': name, 'content': open(os.path.join(etc, 'crio.conf.d', name)).read()})
    files.append({'path': '99-nvidia.conf', 'content': dropin_text})
    return crio_dropin.merge_files(files)


def test_crio_packaged_layout_without_a_running_crio(tmp_path):
    etc = str(tmp_path / 'etc-crio')
    shutil.copytree(os.path.join(FIXTURES, 'crio', 'packaged', 'crio.conf.d'), os.path.join(etc, 'crio.conf.d'))
    # A bare handler left by an earlier version of the role is ours, not the host's: it is not read.
    write(os.path.join(etc, 'crio.conf.d', '99-nvidia.conf'), '[crio.runtime.runtimes.nvidia]\nruntime_path = "/x"\n')
    rc, failed, results = play(str(tmp_path), crio_tasks(etc), crio_vars(etc, nvidia_container_toolkit_default_runtime=True))
    assert rc == 0 and not failed, failed
    written = results['Write the CRI-O drop-in']
    assert written['changed'] is True
    runtime = merged_crio(etc, after(written))['crio']['runtime']
    assert runtime['default_runtime'] == 'nvidia'
    nvidia = runtime['runtimes']['nvidia']
    assert nvidia['monitor_path'] == '/usr/libexec/crio/conmon'
    assert nvidia['runtime_root'] == '/run/crun'
    # 20-site.conf is read after 10-crio.conf and its crun table replaces the packaged one
    assert nvidia['monitor_cgroup'] == 'pod'
    assert nvidia['allowed_annotations'] == ['io.containers.trace-syscall', 'io.kubernetes.cri-o.Devices']
    assert nvidia['runtime_path'] == '/usr/bin/nvidia-container-runtime'


def test_crio_running_status_config_is_read(tmp_path):
    etc = str(tmp_path / 'etc-crio')
    os.makedirs(os.path.join(etc, 'crio.conf.d'))
    shutil.copy(os.path.join(FIXTURES, 'crio', 'legacy', 'crio.conf'), os.path.join(etc, 'crio.conf'))
    status = os.path.join(FIXTURES, 'crio', 'status-crun.toml')
    # crio status config answers only with "status config", as the real one needs a running daemon
    fake = '#!/bin/sh\n[ "$1 $2" = "status config" ] && exec cat %s\nexit 1\n' % status
    rc, failed, results = play(str(tmp_path), crio_tasks(etc), crio_vars(etc), fake_bin={'crio': fake})
    assert rc == 0 and not failed, failed
    nvidia = tomllib.loads(after(results['Write the CRI-O drop-in']))['crio']['runtime']['runtimes']['nvidia']
    # the files say runc is the default; the running CRI-O's runc handler (filled-in values) is copied
    assert nvidia['monitor_cgroup'] == 'system.slice'
    assert nvidia['runtime_root'] == '/run/runc'
    assert nvidia['monitor_path'] == '/usr/libexec/crio/conmon'
