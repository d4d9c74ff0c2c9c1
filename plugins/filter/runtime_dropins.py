# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Filters that build the drop-in files adding the NVIDIA runtime to containerd and CRI-O.

The kubehw.devices.nvidia_container_toolkit role renders its runtime drop-ins with them on the
controller: TOML is parsed there (Python 3.11+ tomllib, or tomli), so the hosts may run any Python.
Each filter is documented in the YAML file of its name beside this one
(``ansible-doc -t filter kubehw.devices.containerd_nvidia_dropin``).

containerd 1.x (``config dump`` says version 2) replaces a whole plugin table when an imported
file names it, so a drop-in carrying only the nvidia runtime would wipe the host's CRI settings
(runc, sandbox image, CNI paths). There the drop-in carries the host's effective CRI plugin table,
read from ``config dump`` without our own file, with the nvidia runtime added.

containerd 2.x (``config dump`` says version 3) merges imported plugin tables key by key, so the
drop-in holds only what it adds. It must state the main file's version: 2.1 merges the files
first and migrates the result from the version the last file named, so a version 3 drop-in over a
version 2 main file makes it ignore every CRI setting of the main file (and a version 2 drop-in
over a version 3 main file loses runtimes).

CRI-O: a runtime handler with only runtime_path and runtime_type gets CRI-O's built-in defaults
for everything else: conmon looked up in $PATH, which official CRI-O packages do not put there
(they set monitor_path per runtime, /usr/libexec/crio/conmon; cri-o/packaging, 10-crio.conf). So
the nvidia handler is a copy of the host's low-level runtime handler with the nvidia binary, as
nvidia-ctk runtime configure does (NVIDIA Container Toolkit v1.20.0, pkg/config/engine/crio/crio.go
and pkg/config/engine/engine.go): the default_runtime unless it names an nvidia runtime, then
runc, then crun.

The host's CRI-O configuration is read as CRI-O reads it (cri-o docs/crio.conf.d.5.md): the main
file, then the drop-in directory's files in lexical order, a later file winning per option. A
runtime table of a later file replaces the earlier table of that name whole: CRI-O decodes each
file into its configuration with BurntSushi/toml, which allocates a new handler for every map key
it decodes (cri-o pkg/config/config.go, UpdateFromDropInFile). When CRI-O runs, ``crio status
config`` gives the configuration in effect, defaults filled in; the role passes it too and its
tables win.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import copy
import json
import math
import re

from collections.abc import Mapping, Sequence

from ansible.errors import AnsibleFilterError

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

# Keys of a source CRI-O handler that must not reach the nvidia handler: they would make CRI-O run
# another binary (platform_runtime_paths), read a VM runtime's configuration, or merge another handler in.
NOT_COPIED = ('platform_runtime_paths', 'runtime_config_path', 'inherit_default_runtime')
# Runtime types whose monitor the copied monitor_path is (oci: conmon, pod: conmon-rs); a VM type is
# not an OCI binary wrapper, and nvidia-ctk writes "oci" whatever the source says.
KEPT_RUNTIME_TYPES = ('oci', 'pod')


# TOML -------------------------------------------------------------------------------------------

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
    raise AnsibleFilterError('cannot write value %r of type %s as TOML' % (value, type(value).__name__))


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
        raise AnsibleFilterError('parsing runtime configuration needs Python 3.11+ (tomllib) or the tomli package on the controller')
    try:
        return _toml.loads(text)
    except Exception as exc:  # tomllib raises TOMLDecodeError, tomli its own class
        raise AnsibleFilterError('%s is not valid TOML: %s' % (what, exc))


# containerd -------------------------------------------------------------------------------------

def _main_version(main_config, dump_version):
    """The version the main configuration file states (containerd 2.x reads the drop-in in it)."""
    main = parse_toml(main_config or '', 'the main configuration')
    if not main:
        # Missing or empty (check mode before the file exists): nothing of it can be lost.
        return dump_version
    version = main.get('version', 1)
    if version not in CRI_RUNTIME_PLUGIN:
        raise AnsibleFilterError('the main configuration is in config version %r (version 1 when it names none); containerd 2 '
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
    dump_version, host_cri = _host_cri_table(base_dump)
    source_name, source = low_level_runtime(host_cri.get('containerd', {}))
    host_systemd_cgroup = bool(source.get('options', {}).get('SystemdCgroup', False))
    nvidia = _nvidia_runtime(source, binary_name, host_systemd_cgroup if systemd_cgroup is None else bool(systemd_cgroup))
    if dump_version == 2:
        version, cri, header = _containerd1_cri_table(host_cri)
    else:
        version, cri, header = _containerd2_cri_table(main_config, dump_version)
    containerd = cri.setdefault('containerd', {})
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
        'systemd_cgroup': nvidia['options']['SystemdCgroup'],
        'host_systemd_cgroup': host_systemd_cgroup,
        'source_runtime': source_name,
    }


def _host_cri_table(base_dump):
    """(config version, the CRI runtime plugin's table) of ``containerd config dump``."""
    if not isinstance(base_dump, str):
        raise AnsibleFilterError('containerd_nvidia_dropin takes the text of containerd config dump, not %s'
                                 % type(base_dump).__name__)
    config = parse_toml(base_dump, 'the output of containerd config dump')
    dump_version = config.get('version', 1)
    if dump_version not in CRI_RUNTIME_PLUGIN:
        raise AnsibleFilterError('containerd config version %r is not supported (supported: 2 and 3); '
                                 'upgrade containerd to 1.5 or later' % (dump_version,))
    return dump_version, config.get('plugins', {}).get(CRI_RUNTIME_PLUGIN[dump_version], {})


def _nvidia_runtime(source, binary_name, systemd_cgroup):
    """The nvidia runtime is the host's low-level runtime with another binary, as NVIDIA's own tool does it."""
    nvidia = copy.deepcopy(source)
    nvidia['runtime_type'] = 'io.containerd.runc.v2'
    options = nvidia.setdefault('options', {})
    options['BinaryName'] = binary_name
    options['SystemdCgroup'] = systemd_cgroup
    return nvidia


def _containerd1_cri_table(host_cri):
    """containerd 1.x: (version, the whole CRI table, header), because the drop-in's table replaces the host's."""
    cri = copy.deepcopy(host_cri)
    containerd = cri.setdefault('containerd', {})
    for name in DEPRECATED_RUNTIME_TABLES:
        if not containerd.get(name, {}).get('runtime_type'):
            containerd.pop(name, None)
    header = ('# It repeats the host\'s CRI runtime settings because containerd before 1.7 replaces\n'
              '# a whole plugin table from an imported file. Re-run the role after changing them.\n')
    return 2, cri, header


def _containerd2_cri_table(main_config, dump_version):
    """containerd 2.x: (version, an empty CRI table, header): only what we add, in the main file's version and
    layout. The runtime table is written as the dump shows it; under version 2 it is migrated with the rest of the
    CRI table."""
    header = ('# containerd 2 merges it key by key into the host\'s settings. Its version is the main\n'
              '# file\'s: containerd 2.1 would otherwise not migrate the main file\'s settings.\n')
    return _main_version(main_config, dump_version), {}, header


# CRI-O ------------------------------------------------------------------------------------------

def _check_files(files):
    if isinstance(files, (str, bytes)) or not isinstance(files, Sequence):
        raise AnsibleFilterError('crio_nvidia_dropin takes a list of {path, content} files, not %s' % type(files).__name__)
    for item in files:
        if not isinstance(item, Mapping) or not isinstance(item.get('content', ''), (str, type(None))):
            raise AnsibleFilterError('crio_nvidia_dropin: each file must be a dictionary with the path and the text '
                                     '(content) of a CRI-O configuration file, not %r' % (item,))


def merge_files(files):
    """Merge CRI-O configuration files given in CRI-O's order into one dict (see the module docstring)."""
    _check_files(files)
    merged = {}
    for item in files:
        doc = parse_toml(item.get('content') or '', item.get('path') or 'a CRI-O configuration file')
        crio = doc.get('crio', {})
        if not isinstance(crio, dict):
            raise AnsibleFilterError('%s: "crio" must be a table' % item.get('path'))
        target = merged.setdefault('crio', {})
        for section, values in crio.items():
            if not isinstance(values, dict):
                target[section] = copy.deepcopy(values)
                continue
            table = target.setdefault(section, {})
            for key, value in values.items():
                if key == 'runtimes' and isinstance(value, dict):
                    runtimes = table.setdefault('runtimes', {})
                    for name, handler in value.items():
                        runtimes[name] = copy.deepcopy(handler)
                else:
                    table[key] = copy.deepcopy(value)
    return merged


def _runtime_section(config):
    runtime = config.get('crio', {}).get('runtime', {})
    return runtime if isinstance(runtime, dict) else {}


def _usable_default(name):
    return isinstance(name, str) and name and not name.startswith('nvidia')


def source_runtime(files_config, status_config=None):
    """Return (name, handler) the nvidia handler copies; (None, {}) when the host names none of them.

    The default runtime's name comes from the files first: once the role made "nvidia" the default,
    the running CRI-O reports that, and the next run must still copy the same handler.
    """
    effective = status_config if status_config else files_config
    runtimes = _runtime_section(effective).get('runtimes', {})
    names = []
    for config in (files_config, status_config or {}):
        default = _runtime_section(config).get('default_runtime')
        if _usable_default(default):
            names.append(default)
            break
    for name in names + ['runc', 'crun']:
        if isinstance(runtimes.get(name), dict):
            return name, runtimes[name]
    return None, {}


def crio_nvidia_dropin(files, status=None, runtime_name='nvidia', binary_name='/usr/bin/nvidia-container-runtime',
                       default_runtime=False, enable_cdi=False, cdi_spec_dirs=None):
    """Return {'content', 'source_runtime', 'handler'}.

    files: [{'path', 'content'}] in CRI-O's order, our own drop-in left out.
    status: output of ``crio status config`` (None or empty when CRI-O does not run).
    """
    files_config = merge_files(files or [])
    if status is not None and not isinstance(status, str):
        raise AnsibleFilterError('crio_nvidia_dropin: status must be the text of crio status config, not %s' % type(status).__name__)
    status_config = parse_toml(status, 'the output of crio status config') if status and status.strip() else None
    name, source = source_runtime(files_config, status_config)

    handler = {k: copy.deepcopy(v) for k, v in source.items() if k not in NOT_COPIED}
    handler['runtime_path'] = binary_name
    if handler.get('runtime_type') not in KEPT_RUNTIME_TYPES:
        handler['runtime_type'] = 'oci'

    runtime = {}
    if default_runtime:
        runtime['default_runtime'] = runtime_name
    if enable_cdi and cdi_spec_dirs:
        runtime['cdi_spec_dirs'] = list(cdi_spec_dirs)
    runtime['runtimes'] = {runtime_name: handler}
    header = ('# Managed by Ansible (kubehw.devices.nvidia_container_toolkit): the NVIDIA runtime for CRI-O.\n'
              '# A copy of the host\'s %s runtime with the nvidia binary. Re-run the role after changing it.\n'
              % (('"%s"' % name) if name else 'built-in default'))
    return {
        'content': header + to_toml({'crio': {'runtime': runtime}}),
        'source_runtime': name,
        'handler': handler,
    }


class FilterModule(object):
    """containerd_nvidia_dropin and crio_nvidia_dropin (docs: the YAML file of each name beside this file)."""

    def filters(self):
        return {
            'containerd_nvidia_dropin': containerd_nvidia_dropin,
            'crio_nvidia_dropin': crio_nvidia_dropin,
        }
