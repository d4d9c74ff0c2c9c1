# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Build the containerd drop-in that adds the NVIDIA runtime (run on the controller by the role).

containerd 1.x (``config dump`` says version 2) replaces a whole plugin table when an
imported file names it, so a drop-in carrying only the nvidia runtime would wipe the
host's CRI settings (runc, sandbox image, CNI paths). There the drop-in carries the
host's effective CRI plugin table, read from ``config dump`` without our own file, with
the nvidia runtime added.

containerd 2.x (``config dump`` says version 3) merges imported plugin tables key by key,
so the drop-in holds only what it adds. It must state the main file's version: 2.1 merges
the files first and migrates the result from the version the last file named, so a
version 3 drop-in over a version 2 main file makes it ignore every CRI setting of the
main file (and a version 2 drop-in over a version 3 main file loses runtimes).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import copy
import json
import math
import re

import base64
import sys

try:
    import tomllib as _toml
    HAS_TOML = True
except ImportError:  # Python < 3.11 controllers
    try:
        import tomli as _toml
        HAS_TOML = True
    except ImportError:
        HAS_TOML = False

# Config version -> plugin that holds containerd.runtimes, default_runtime_name and enable_cdi.
CRI_RUNTIME_PLUGIN = {
    2: 'io.containerd.grpc.v1.cri',
    3: 'io.containerd.cri.v1.runtime',
}
# Deprecated tables that containerd 1.x dumps with empty values; copying them only adds warnings.
DEPRECATED_RUNTIME_TABLES = ('default_runtime', 'untrusted_workload_runtime')
BARE_KEY = re.compile(r'[A-Za-z0-9_-]+')  # the whole key, with fullmatch


class DropinError(Exception):
    """A problem the role reports to the user as is."""


def _key(name):
    return name if BARE_KEY.fullmatch(name) else json.dumps(name)


def _value(value):
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return 'nan'
        if math.isinf(value):
            return 'inf' if value > 0 else '-inf'
        return repr(value)
    if isinstance(value, str):
        # A JSON string is a valid TOML basic string (same escapes, \\uXXXX for control characters).
        return json.dumps(value)
    if isinstance(value, list):
        return '[' + ', '.join(_value(item) for item in value) + ']'
    if isinstance(value, dict):
        return '{' + ', '.join('%s = %s' % (_key(k), _value(v)) for k, v in value.items()) + '}'
    raise DropinError('cannot write value %r of type %s as TOML' % (value, type(value).__name__))


def _is_table_array(value):
    return isinstance(value, list) and value and all(isinstance(item, dict) for item in value)


def _emit_table(path, table, lines, indent):
    scalars = [(k, v) for k, v in table.items() if not isinstance(v, dict) and not _is_table_array(v)]
    tables = [(k, v) for k, v in table.items() if isinstance(v, dict)]
    arrays = [(k, v) for k, v in table.items() if _is_table_array(v)]
    pad = '  ' * indent
    for key, value in scalars:
        lines.append('%s%s = %s' % (pad, _key(key), _value(value)))
    for key, value in tables:
        sub = path + [key]
        lines.append('')
        lines.append('%s[%s]' % (pad, '.'.join(_key(k) for k in sub)))
        _emit_table(sub, value, lines, indent + 1)
    for key, items in arrays:
        sub = path + [key]
        for item in items:
            lines.append('')
            lines.append('%s[[%s]]' % (pad, '.'.join(_key(k) for k in sub)))
            _emit_table(sub, item, lines, indent + 1)


def to_toml(data):
    """Write a dict as TOML: tables as [headers], nested tables indented like containerd does."""
    lines = []
    _emit_table([], data, lines, 0)
    return '\n'.join(lines).lstrip('\n') + '\n'


def parse_toml(text, what):
    if not HAS_TOML:
        raise DropinError('parsing runtime configuration needs Python 3.11+ (tomllib) or the tomli package on the controller')
    try:
        return _toml.loads(text)
    except Exception as exc:  # tomllib raises TOMLDecodeError, tomli its own class
        raise DropinError('%s is not valid TOML: %s' % (what, exc))


def _main_version(main_config, dump_version):
    """The version the main configuration file states (containerd 2.x reads the drop-in in it)."""
    main = parse_toml(main_config or '', 'the main configuration')
    if not main:
        # Missing or empty (check mode before the file exists): nothing of it can be lost.
        return dump_version
    version = main.get('version', 1)
    if version not in CRI_RUNTIME_PLUGIN:
        raise DropinError('the main configuration is in config version %r (version 1 when it names none); containerd 2 '
                          'would not migrate it under a versioned drop-in: write it in version 2 or 3, for example '
                          'with containerd config migrate' % (version,))
    return version


def low_level_runtime(containerd):
    """Return (name, table) of the runtime whose settings the nvidia runtime copies.

    The order is nvidia-ctk's (NVIDIA Container Toolkit v1.20.0, pkg/config/engine/engine.go,
    GetLowLevelRuntimes): the configured default_runtime_name unless it is an nvidia runtime,
    then runc, then crun. (None, a bare runc v2 table) when the host has none of them.
    """
    runtimes = containerd.get('runtimes', {})
    names = []
    default = containerd.get('default_runtime_name') or ''
    if default and not default.startswith('nvidia'):
        names.append(default)
    for name in names + ['runc', 'crun']:
        if isinstance(runtimes.get(name), dict):
            return name, runtimes[name]
    return None, {'runtime_type': 'io.containerd.runc.v2', 'options': {}}


def containerd_nvidia_dropin(base_dump, runtime_name='nvidia', binary_name='/usr/bin/nvidia-container-runtime',
                             systemd_cgroup=None, default_runtime=False, enable_cdi=False, cdi_spec_dirs=None,
                             main_config=None):
    """Return {'content', 'version', 'plugin', 'dump_version', 'systemd_cgroup', 'host_systemd_cgroup', 'source_runtime'}.

    base_dump: output of ``containerd config dump`` for the host's configuration without our drop-in.
    main_config: text of the main configuration file (None or empty when it does not exist yet).
    systemd_cgroup: None mirrors the host's low-level runtime (see low_level_runtime), a boolean forces the value.
    version and plugin describe the drop-in; dump_version is 2 on containerd 1.x and 3 on 2.x.
    """
    config = parse_toml(base_dump, 'the output of containerd config dump')
    dump_version = config.get('version', 1)
    if dump_version not in CRI_RUNTIME_PLUGIN:
        raise DropinError('containerd config version %r is not supported (supported: 2 and 3); '
                          'upgrade containerd to 1.5 or later' % (dump_version,))
    host_cri = config.get('plugins', {}).get(CRI_RUNTIME_PLUGIN[dump_version], {})
    source_name, source = low_level_runtime(host_cri.get('containerd', {}))
    host_systemd_cgroup = bool(source.get('options', {}).get('SystemdCgroup', False))

    # The nvidia runtime is the host's low-level runtime with another binary, as NVIDIA's own tool does it.
    nvidia = copy.deepcopy(source)
    nvidia['runtime_type'] = 'io.containerd.runc.v2'
    options = nvidia.setdefault('options', {})
    options['BinaryName'] = binary_name
    options['SystemdCgroup'] = host_systemd_cgroup if systemd_cgroup is None else bool(systemd_cgroup)

    if dump_version == 2:
        # containerd 1.x: the whole CRI table, because the drop-in's table replaces the host's.
        version = dump_version
        cri = copy.deepcopy(host_cri)
        containerd = cri.setdefault('containerd', {})
        for name in DEPRECATED_RUNTIME_TABLES:
            if not containerd.get(name, {}).get('runtime_type'):
                containerd.pop(name, None)
        header = ('# It repeats the host\'s CRI runtime settings because containerd before 1.7 replaces\n'
                  '# a whole plugin table from an imported file. Re-run the role after changing them.\n')
    else:
        # containerd 2.x: only what we add, in the main file's version and layout. The runtime table
        # is written as the dump shows it; under version 2 it is migrated with the rest of the CRI table.
        version = _main_version(main_config, dump_version)
        cri = {}
        containerd = cri.setdefault('containerd', {})
        header = ('# containerd 2 merges it key by key into the host\'s settings. Its version is the main\n'
                  '# file\'s: containerd 2.1 would otherwise not migrate the main file\'s settings.\n')
    containerd.setdefault('runtimes', {})[runtime_name] = nvidia

    # Without default_runtime the host's own default stays (copied unchanged on containerd 1.x).
    if default_runtime:
        containerd['default_runtime_name'] = runtime_name
    if enable_cdi:
        cri['enable_cdi'] = True
        if cdi_spec_dirs:
            cri['cdi_spec_dirs'] = list(cdi_spec_dirs)

    plugin = CRI_RUNTIME_PLUGIN[version]
    header = '# Managed by Ansible (kubehw.devices.nvidia_container_toolkit): the NVIDIA runtime for containerd.\n' + header
    content = header + to_toml({'version': version, 'plugins': {plugin: cri}})
    return {
        'content': content,
        'version': version,
        'plugin': plugin,
        'dump_version': dump_version,
        'systemd_cgroup': options['SystemdCgroup'],
        'host_systemd_cgroup': host_systemd_cgroup,
        'source_runtime': source_name,
    }


def answer(argv, build, script):
    """Decode argv[1] (base64 of a JSON request), build the result and print it as JSON.

    The role calls these scripts through the pipe lookup, which drops stderr and exit codes, so
    every outcome is a JSON document on stdout with "failed" and "msg".
    """
    try:
        request = json.loads(base64.b64decode(argv[1]).decode('utf-8'))
        result = build(request)
        result.update(failed=False, msg='')
    except DropinError as exc:
        result = {'failed': True, 'msg': str(exc)}
    except (IndexError, KeyError, TypeError, ValueError, AttributeError) as exc:
        result = {'failed': True, 'msg': 'bad request to %s: %s' % (script, exc)}
    sys.stdout.write(json.dumps(result) + '\n')
    return 0


def main(argv):
    """argv[1]: base64 of a JSON object {"dump": ..., "options": {...}}; prints a JSON result."""
    return answer(argv, lambda request: containerd_nvidia_dropin(request['dump'], **request.get('options', {})),
                  'containerd_dropin.py')


if __name__ == '__main__':
    sys.exit(main(sys.argv))
