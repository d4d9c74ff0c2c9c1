# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The repo_key role: a repository signing key is installed only when its fingerprint is pinned.

Two throwaway keys ("old" and "new", made with gpg for the test) stand in for a vendor's key before and
after a rotation. One ansible-playbook run plays the role on several fake localhost hosts at once, each
with its own key source, destination and pinned fingerprints; a second run does the same in check mode.
Each host records what the role reported (or the message it failed with) and the test reads the
destination files afterwards.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from tests.support import playbook_runner

# One xdist worker takes every test of this file (make's pytest stages run --dist loadgroup): the module-scoped
# `applied` fixture is one ansible-playbook run that every worker given a test of this file would repeat; its
# first test's budget holds that run on a loaded 2-core machine, as test_nvidia_driver's does.
pytestmark = [pytest.mark.xdist_group('repo_keys'), pytest.mark.timeout(900)]

TASKS = """
  tasks:
    - name: Run the role and record what it reports
      block:
        - name: Install the key
          ansible.builtin.include_role:
            name: kubehw.devices.repo_key

        - name: Record the result
          ansible.builtin.copy:
            content: "{{ {'changed': repo_key_changed, 'found': repo_key_found_fingerprints,
                          'previous': repo_key_previous_fingerprints} | to_json }}"
            dest: "{{ test_out }}/{{ inventory_hostname }}.json"
            mode: "0644"
          check_mode: false
      rescue:
        - name: Record the failure
          ansible.builtin.copy:
            content: "{{ {'failed': ansible_failed_result.msg} | to_json }}"
            dest: "{{ test_out }}/{{ inventory_hostname }}.json"
            mode: "0644"
          check_mode: false
"""
# One ansible-playbook run: the hosts of group "apply" for real, then those of group "check" in check mode.
PLAYBOOK = """
- name: Install repository keys pinned by fingerprint
  hosts: apply
  gather_facts: false
""" + TASKS + """
- name: The same in check mode
  hosts: check
  gather_facts: false
  check_mode: true
""" + TASKS


def write(path, content, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        f.write(content)
    os.chmod(path, mode)


def read(path):
    with open(path) as f:
        return f.read()


def make_key(home, uid):
    """A fresh ed25519 key; returns (armored public key, fingerprint)."""
    env = dict(os.environ, GNUPGHOME=home)
    subprocess.run(['gpg', '--batch', '--quiet', '--passphrase', '', '--quick-gen-key', uid, 'ed25519', 'sign', '1d'],
                   env=env, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    armored = subprocess.run(['gpg', '--batch', '--armor', '--export', uid], env=env, check=True,
                             stdout=subprocess.PIPE).stdout.decode()
    listing = subprocess.run(['gpg', '--batch', '--with-colons', '--list-keys', uid], env=env, check=True,
                             stdout=subprocess.PIPE).stdout.decode().splitlines()
    fpr = [line.split(':')[9] for line in listing if line.startswith('fpr:')][0]
    return armored, fpr


@pytest.fixture(scope='module')
def keys(tmp_path_factory):
    if not shutil.which('gpg'):
        pytest.fail('gpg is needed (apt-get install gpg)')
    home = str(tmp_path_factory.mktemp('gnupg'))
    os.chmod(home, 0o700)
    return {
        'old': make_key(home, 'kubehw test vendor key 2024 <old@kubehw.invalid>'),
        'new': make_key(home, 'kubehw test vendor key 2026 <new@kubehw.invalid>'),
    }


def spaced(fpr):
    """A fingerprint as vendors print it: lower case, in groups of four."""
    return ' '.join(fpr[i:i + 4] for i in range(0, len(fpr), 4)).lower()


def run_role(tmp, hosts, check_hosts):
    """hosts, check_hosts: name -> role variables. Returns each host's record (result or failure message)."""
    out = os.path.join(tmp, 'out')
    os.makedirs(out)
    inventory = {'all': {'vars': {
        'ansible_connection': 'local',
        'ansible_python_interpreter': sys.executable,
        'test_out': out,
    }, 'children': {'apply': {'hosts': hosts}, 'check': {'hosts': check_hosts}}}}
    write(os.path.join(tmp, 'inventory.yml'), yaml.safe_dump(inventory))
    write(os.path.join(tmp, 'playbook.yml'), PLAYBOOK)
    # --diff: diff mode shows a key's change as its fingerprints before and after
    proc = playbook_runner.run_playbook(os.path.join(tmp, 'playbook.yml'), tmp, inventory=os.path.join(tmp, 'inventory.yml'),
                                        env={'ANSIBLE_FORKS': '8'}, diff=True, timeout=900)
    write(os.path.join(tmp, 'run.log'), proc.stdout)
    records = {}
    for name in os.listdir(out):
        records[name[:-len('.json')]] = json.loads(read(os.path.join(out, name)))
    assert set(records) == set(hosts) | set(check_hosts), 'rc %s\n%s\n%s' % (proc.returncode, proc.stdout, proc.stderr)
    return records


def scenario(tmp, keys, prefix=''):
    """Key sources and destinations as a host would have them before the run; returns the inventory hosts."""
    old, old_fpr = keys['old']
    new, new_fpr = keys['new']
    src = os.path.join(tmp, 'mirror')
    write(os.path.join(src, 'old.asc'), old)
    write(os.path.join(src, 'new.asc'), new)
    write(os.path.join(src, 'both.asc'), old + new)
    write(os.path.join(src, 'error.html'), '<html>404 Not Found</html>\n')
    dest = os.path.join(tmp, 'host')
    # the host's current keyrings
    write(os.path.join(dest, 'current', 'vendor.asc'), new)
    write(os.path.join(dest, 'rotated', 'vendor.asc'), old)
    write(os.path.join(dest, 'kept', 'vendor.asc'), old)

    def host(url, dest_dir, fingerprints, **extra):
        values = {'repo_key_url': url, 'repo_key_dest': os.path.join(dest, dest_dir, 'vendor.asc'),
                  'repo_key_fingerprints': fingerprints, 'repo_key_description': 'Test vendor repository key',
                  'repo_key_fingerprints_variable': 'vendor_key_fingerprints'}
        values.update(extra)
        return values

    hosts = {
        # a first install from a file:// URL (a mirror), the fingerprint written as vendors print it
        'first_install': host('file://' + src + '/new.asc', 'first', [spaced(new_fpr)]),
        # the same key already in place
        'same_key': host(src + '/new.asc', 'current', [new_fpr]),
        # the vendor rotates its key: its file holds the old and the new key, both are pinned
        'rotation': host(src + '/both.asc', 'rotated', [old_fpr, new_fpr]),
        # failures: nothing may be written
        'wrong_key': host(src + '/old.asc', 'wrong', [new_fpr]),
        'wrong_key_kept': host(src + '/new.asc', 'kept', [old_fpr]),
        'one_key_unpinned': host(src + '/both.asc', 'partly', [new_fpr]),
        'not_a_key': host(src + '/error.html', 'html', [new_fpr]),
        'no_fingerprints': host(src + '/new.asc', 'none', []),
        'bad_fingerprint': host(src + '/new.asc', 'short', ['3BF863CC']),
        'relative_dest': host(src + '/new.asc', 'x', [new_fpr], repo_key_dest='keyrings/vendor.asc'),
    }
    return dict((prefix + name, values) for name, values in hosts.items())


@pytest.fixture(scope='module')
def applied(tmp_path_factory, keys):
    tmp = str(tmp_path_factory.mktemp('repo_key'))
    hosts = scenario(os.path.join(tmp, 'apply'), keys)
    check_hosts = scenario(os.path.join(tmp, 'check'), keys, 'check_')
    check_hosts = dict((name, check_hosts[name]) for name in (
        'check_first_install', 'check_same_key', 'check_rotation'))
    hosts_all = dict(hosts, **check_hosts)
    return tmp, hosts_all, run_role(os.path.join(tmp, 'run'), hosts, check_hosts)


def dest_of(hosts, name):
    return hosts[name]['repo_key_dest']


def test_first_install_writes_the_verified_key(applied, keys):
    dummy, hosts, records = applied
    new, new_fpr = keys['new']
    assert records['first_install'] == {'changed': True, 'found': [new_fpr], 'previous': []}
    assert read(dest_of(hosts, 'first_install')) == new
    assert oct(os.stat(dest_of(hosts, 'first_install')).st_mode & 0o777) == '0o644'


def test_same_key_changes_nothing(applied, keys):
    dummy, hosts, records = applied
    assert records['same_key'] == {'changed': False, 'found': [keys['new'][1]], 'previous': [keys['new'][1]]}


def test_rotated_key_replaces_the_old_one(applied, keys):
    dummy, hosts, records = applied
    assert records['rotation']['changed'] is True
    assert sorted(records['rotation']['found']) == sorted([keys['old'][1], keys['new'][1]])
    assert read(dest_of(hosts, 'rotation')) == keys['old'][0] + keys['new'][0]
    assert records['rotation']['previous'] == [keys['old'][1]]


def test_diff_mode_shows_a_replaced_key_as_fingerprints_before_and_after(applied, keys):
    # copy with remote_src gives no diff content, so the role prints the change itself in diff mode
    tmp, hosts, records = applied
    log = read(os.path.join(tmp, 'run', 'run.log'))
    old_fpr, new_fpr = keys['old'][1], keys['new'][1]
    after = ', '.join(records['rotation']['found'])
    assert '%s replaced: fingerprints before: %s; after: %s' % (dest_of(hosts, 'rotation'), old_fpr, after) in log
    assert '%s replaced: fingerprints before: %s; after: %s' % (dest_of(hosts, 'check_rotation'), old_fpr, after) in log
    assert '%s replaced: fingerprints before: none; after: %s' % (dest_of(hosts, 'first_install'), new_fpr) in log
    # an unchanged key prints nothing
    assert dest_of(hosts, 'same_key') + ' replaced' not in log


def test_wrong_key_fails_naming_both_fingerprints_and_writes_nothing(applied, keys):
    dummy, hosts, records = applied
    old_fpr, new_fpr = keys['old'][1], keys['new'][1]
    msg = records['wrong_key']['failed']
    assert 'The Test vendor repository key from %s has fingerprint(s) %s;' % (hosts['wrong_key']['repo_key_url'], old_fpr) in msg
    assert 'expected %s (vendor_key_fingerprints)' % new_fpr in msg
    assert '%s was left as it was' % dest_of(hosts, 'wrong_key') in msg
    # not even the directory was created
    assert not os.path.exists(os.path.dirname(dest_of(hosts, 'wrong_key')))
    # an installed key stays as it was
    assert 'has fingerprint(s) %s;' % new_fpr in records['wrong_key_kept']['failed']
    assert read(dest_of(hosts, 'wrong_key_kept')) == keys['old'][0]


def test_every_key_in_the_file_must_be_pinned(applied, keys):
    dummy, hosts, records = applied
    msg = records['one_key_unpinned']['failed']
    assert keys['old'][1] in msg.split(';')[0]
    assert not os.path.exists(dest_of(hosts, 'one_key_unpinned'))


def test_a_file_that_is_no_key_fails(applied):
    dummy, hosts, records = applied
    msg = records['not_a_key']['failed']
    assert 'has fingerprint(s) none (gpg could not read a public key: ' in msg
    assert not os.path.exists(dest_of(hosts, 'not_a_key'))


@pytest.mark.parametrize('host, expected', [
    ('no_fingerprints', 'vendor_key_fingerprints a non-empty list of fingerprints of 40 or 64 hexadecimal digits (got [])'),
    ('bad_fingerprint', '(got ["3BF863CC"])'),
    ('relative_dest', 'its destination an absolute path (got "keyrings/vendor.asc")'),
])
def test_invalid_settings_are_refused_before_anything_is_fetched(applied, host, expected):
    dummy, hosts, records = applied
    assert expected in records[host]['failed']
    assert not os.path.exists(os.path.dirname(dest_of(hosts, host)))


def test_check_mode_reports_what_would_change_and_writes_nothing(applied, keys):
    dummy, hosts, records = applied
    assert records['check_first_install']['changed'] is True
    assert records['check_rotation']['changed'] is True
    assert records['check_same_key']['changed'] is False
    assert not os.path.exists(dest_of(hosts, 'check_first_install'))
    assert read(dest_of(hosts, 'check_rotation')) == keys['old'][0]
