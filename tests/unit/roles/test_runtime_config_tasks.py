# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The runtime configuration tasks of the host roles, played on localhost against files in a temporary directory.

Played in check and diff mode: nothing is written and no handler restarts a service, and the diff
of each write task shows what the role would put on a host, which is parsed here as the runtime
would load it. Every case is one include of the role's task file in a single ansible-playbook run,
so the run's start-up is paid once; each test reads its case's results.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import shutil
import sys
import tomllib

import pytest

from ansible_collections.kubehw.devices.plugins.filter import runtime_dropins
from tests.support.playbook_runner import run_playbook

# One xdist worker takes every test of this file (make's pytest stages run --dist loadgroup): the
# module-scoped `run` fixture is one ansible-playbook run of tens of CPU seconds, which every
# worker given a test of this file would repeat. Its first test's budget holds that run: beside the
# roles lane on a loaded 2-core machine it took more than pytest.ini's 300 s (measured 2026-11-23).
pytestmark = [pytest.mark.xdist_group('runtime_config_tasks'), pytest.mark.timeout(900)]

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'fixtures')


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
    bin_dir = os.path.join(tmp, 'bin')
    os.makedirs(bin_dir)
    for name, script in dict(FAKE_BIN, **(fake_bin or {})).items():
        write(os.path.join(bin_dir, name), script, 0o755)
    playbook = [{'name': 'Play the tasks under test', 'hosts': 'localhost', 'gather_facts': False,
                 'vars': dict(extra_vars or {}, ansible_python_interpreter=sys.executable), 'tasks': tasks}]
    # No crio, docker or containerd of the machine running the tests: only the fakes.
    env = {'PATH': bin_dir + os.pathsep + '/usr/sbin:/usr/bin:/sbin:/bin'}
    # About 50 s of CPU; on a loaded 2-core machine (molecule booting a target beside it) it took over 4 minutes.
    proc = run_playbook(playbook, tmp, env=env, args=['-c', 'local'], diff=True, check=check, timeout=900)
    if not proc.results:
        pytest.fail('ansible-playbook recorded no result (rc %s): %s\n%s' % (proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:]))
    # "role : task" for the tasks of an included role
    ordered = [(result['task'].split(' : ')[-1], result) for result in proc.results]
    failed = dict((name, r.get('msg')) for name, r in ordered if r.get('failed'))
    return proc.returncode, failed, Results(ordered)


class Results(dict):
    """{task name: its last result}; .after(marker) gives the results of the tasks after a task named marker."""

    def __init__(self, ordered):
        super().__init__(ordered)
        self.ordered = ordered

    def after(self, marker):
        names = [entry[0] for entry in self.ordered]
        start = names.index(marker) + 1
        section = {}
        for name, result in self.ordered[start:]:
            if name.startswith('Case '):
                break
            section[name] = result
        return section


def after(result):
    """The content a write task would leave (the 'after' of its diff)."""
    diffs = result.get('diff') or []
    if isinstance(diffs, dict):
        diffs = [diffs]
    contents = [d['after'] for d in diffs if 'after' in d]
    assert contents, 'no diff in %r' % (result,)
    return contents[0]


# The cases ------------------------------------------------------------------------------------

# CRI-O: the packaged layout (10-crio.conf and a site's 20-site.conf) with an earlier bare drop-in of
# ours, and a legacy main file under a running CRI-O whose `crio status config` is the fixture.
STATUS = os.path.join(FIXTURES, 'crio', 'status-crun.toml')
FAKE_CRIO = '#!/bin/sh\n[ -n "$FAKE_CRIO_STATUS" ] && [ "$1 $2" = "status config" ] && exec cat "$FAKE_CRIO_STATUS"\nexit 1\n'

# docker: each include has its own daemon.json and dockerd version (the fake dockerd prints $FAKE_DOCKERD).
DOCKER_CASES = {
    # CDI is opt-in from Docker 25.0 to 28.1 (on by default from 28.2.0, moby/moby#49963): features.cdi
    # is set, the user's other features kept
    '27': ('Docker version 27.5.1, build 9f9e405', {'features': {'containerd-snapshotter': True}, 'log-level': 'warn'}),
    # on by default from 28.2.0: nothing to add
    '28.3': ('Docker version 28.3.3, build 980b856', {'features': {'containerd-snapshotter': True}}),
    # a user's explicit "cdi": false would keep CDI off on any version
    '29-off': ('Docker version 29.0.0, build 3d4129b', {'features': {'cdi': False}}),
    # Debian bookworm's docker.io has no CDI at all: no key that would mean nothing
    '20.10': ('Docker version 20.10.24+dfsg1, build 297e128', {}),
}

# container_runtime: main files and the disabled_plugins they should end with (None: left alone).
PLUGIN_CASES = {
    # Docker's containerd.io package: the kubelet gets no CRI from it
    'containerd.io': (open(os.path.join(FIXTURES, 'containerd', 'containerd.io-config.toml')).read(), []),
    # full plugin IDs of 1.x and 2.x go too, other plugins stay disabled, a trailing comment is dropped
    'ids': ('version = 3\ndisabled_plugins = ["io.containerd.cri.v1.runtime", \'io.containerd.snapshotter.v1.zfs\', '
            '"io.containerd.grpc.v1.cri"]  # set by hand\n\n[plugins."io.containerd.cri.v1.images"]\n  snapshotter = "overlayfs"\n',
            ['io.containerd.snapshotter.v1.zfs']),
    # no CRI plugin disabled at top level (a key named so inside a table is not the top-level one): no write
    'other': ('version = 2\ndisabled_plugins = ["io.containerd.snapshotter.v1.btrfs"]\n\n[proxy_plugins]\n'
              '  [proxy_plugins.x]\n    disabled_plugins = "cri"\n', None),
}

TOOLKIT_VARS = {'nvidia_container_toolkit_runtime_binary': '/usr/bin/nvidia-container-runtime',
                'nvidia_container_toolkit_default_runtime': False, 'nvidia_container_toolkit_cdi': False,
                'nvidia_container_toolkit_cdi_spec_dirs': ['/etc/cdi']}


def include(case, role, tasks_from, variables, environment=None):
    task = {'name': 'Case ' + case, 'ansible.builtin.include_role': {'name': 'kubehw.devices.' + role, 'tasks_from': tasks_from},
            'vars': variables}
    if environment:
        task['ansible.builtin.include_role']['apply'] = {'environment': environment}
    return task


@pytest.fixture(scope='module')
def run(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp('runtime_config_tasks'))
    tasks = []

    packaged = os.path.join(tmp, 'crio-packaged')
    shutil.copytree(os.path.join(FIXTURES, 'crio', 'packaged', 'crio.conf.d'), os.path.join(packaged, 'crio.conf.d'))
    # A bare handler left by an earlier version of the role is ours, not the host's: it is not read.
    write(os.path.join(packaged, 'crio.conf.d', '99-nvidia.conf'), '[crio.runtime.runtimes.nvidia]\nruntime_path = "/x"\n')
    legacy = os.path.join(tmp, 'crio-legacy')
    os.makedirs(os.path.join(legacy, 'crio.conf.d'))
    shutil.copy(os.path.join(FIXTURES, 'crio', 'legacy', 'crio.conf'), os.path.join(legacy, 'crio.conf'))
    for case, etc, more, environment in (
            ('crio-packaged', packaged, {'nvidia_container_toolkit_default_runtime': True}, None),
            ('crio-running', legacy, {}, {'FAKE_CRIO_STATUS': STATUS})):
        variables = dict(TOOLKIT_VARS, nvidia_container_toolkit_crio_config_path=os.path.join(etc, 'crio.conf'),
                         nvidia_container_toolkit_crio_dropin=os.path.join(etc, 'crio.conf.d', '99-nvidia.conf'), **more)
        tasks.append(include(case, 'nvidia_container_toolkit', 'crio', variables, environment))

    for name, (version, daemon) in DOCKER_CASES.items():
        path = os.path.join(tmp, 'docker-' + name, 'daemon.json')
        write(path, json.dumps(daemon))
        variables = dict(TOOLKIT_VARS, nvidia_container_toolkit_docker_daemon_json=path, nvidia_container_toolkit_cdi=True)
        tasks.append(include('docker-' + name, 'nvidia_container_toolkit', 'docker', variables, {'FAKE_DOCKERD': version}))

    for name, case in PLUGIN_CASES.items():
        path = os.path.join(tmp, 'containerd-' + name, 'config.toml')
        write(path, case[0])
        tasks.append(include('containerd-' + name, 'container_runtime', 'cri-plugin', {'container_runtime_config_path': path}))

    rc, failed, results = play(tmp, tasks, fake_bin={'crio': FAKE_CRIO, 'dockerd': '#!/bin/sh\necho "$FAKE_DOCKERD"\n'})
    assert rc == 0 and not failed, failed
    return {'packaged': packaged, 'results': results}


# CRI-O ---------------------------------------------------------------------------------------

def merged_crio(etc, dropin_text):
    """What CRI-O loads: crio.conf, then crio.conf.d/* in lexical order, with the role's drop-in."""
    files = []
    if os.path.exists(os.path.join(etc, 'crio.conf')):
        files.append({'path': 'crio.conf', 'content': open(os.path.join(etc, 'crio.conf')).read()})
    for name in sorted(os.listdir(os.path.join(etc, 'crio.conf.d'))):
        if name != '99-nvidia.conf':
            files.append({'path': name, 'content': open(os.path.join(etc, 'crio.conf.d', name)).read()})
    files.append({'path': '99-nvidia.conf', 'content': dropin_text})
    return runtime_dropins.merge_files(files)


def test_crio_packaged_layout_without_a_running_crio(run):
    written = run['results'].after('Case crio-packaged')['Write the CRI-O drop-in']
    assert written['changed'] is True
    runtime = merged_crio(run['packaged'], after(written))['crio']['runtime']
    assert runtime['default_runtime'] == 'nvidia'
    nvidia = runtime['runtimes']['nvidia']
    assert nvidia['monitor_path'] == '/usr/libexec/crio/conmon'
    assert nvidia['runtime_root'] == '/run/crun'
    # 20-site.conf is read after 10-crio.conf and its crun table replaces the packaged one
    assert nvidia['monitor_cgroup'] == 'pod'
    assert nvidia['allowed_annotations'] == ['io.containers.trace-syscall', 'io.kubernetes.cri-o.Devices']
    assert nvidia['runtime_path'] == '/usr/bin/nvidia-container-runtime'


def test_crio_running_status_config_is_read(run):
    written = run['results'].after('Case crio-running')['Write the CRI-O drop-in']
    nvidia = tomllib.loads(after(written))['crio']['runtime']['runtimes']['nvidia']
    # the files say runc is the default; the running CRI-O's runc handler (filled-in values) is copied
    assert nvidia['monitor_cgroup'] == 'system.slice'
    assert nvidia['runtime_root'] == '/run/runc'
    assert nvidia['monitor_path'] == '/usr/libexec/crio/conmon'


# docker --------------------------------------------------------------------------------------

def test_docker_cdi_feature_by_version(run):
    wanted = {}
    for name in DOCKER_CASES:
        section = run['results'].after('Case docker-' + name)
        wanted[name] = section['Merge the nvidia runtime into the other settings']['ansible_facts'][
            'nvidia_container_toolkit_daemon_json_wanted']
        assert wanted[name]['runtimes']['nvidia']['path'] == '/usr/bin/nvidia-container-runtime', name
    assert wanted['27']['features'] == {'containerd-snapshotter': True, 'cdi': True}
    assert wanted['27']['log-level'] == 'warn'
    assert wanted['28.3']['features'] == {'containerd-snapshotter': True}
    assert wanted['29-off']['features'] == {'cdi': True}
    assert 'features' not in wanted['20.10']
    assert 'has no CDI' in run['results'].after('Case docker-20.10')['Report a docker without CDI']['msg']
    # what the write task would put in the file is that
    assert json.loads(after(run['results'].after('Case docker-27')["Write docker's daemon.json"])) == wanted['27']


# container_runtime: disabled_plugins -------------------------------------------------------------

def test_container_runtime_enables_a_disabled_cri_plugin(run):
    for name, (text, kept) in PLUGIN_CASES.items():
        task = run['results'].after('Case containerd-' + name)['Enable the CRI plugin that the main configuration disables']
        if kept is None:
            assert task.get('skipped') is True, (name, task)
            continue
        assert task['changed'] is True, name
        loaded, before = tomllib.loads(after(task)), tomllib.loads(text)
        assert loaded['disabled_plugins'] == kept, name
        # the rest of the file is what it was
        assert dict(loaded, disabled_plugins=None) == dict(before, disabled_plugins=None), name
