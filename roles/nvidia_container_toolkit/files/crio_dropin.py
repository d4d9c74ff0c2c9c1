# -*- coding: utf-8 -*-
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Build the CRI-O drop-in that adds the NVIDIA runtime (run on the controller by the role).

A runtime handler with only runtime_path and runtime_type gets CRI-O's built-in defaults for
everything else: conmon looked up in $PATH, which official CRI-O packages do not put there (they
set monitor_path per runtime, /usr/libexec/crio/conmon; cri-o/packaging, 10-crio.conf). So the
nvidia handler is a copy of the host's low-level runtime handler with the nvidia binary, as
nvidia-ctk runtime configure does (NVIDIA Container Toolkit v1.20.0, pkg/config/engine/crio/crio.go
and pkg/config/engine/engine.go): the default_runtime unless it names an nvidia runtime, then
runc, then crun.

The host's configuration is read as CRI-O reads it (cri-o docs/crio.conf.d.5.md): the main file,
then the drop-in directory's files in lexical order, a later file winning per option. A runtime
table of a later file replaces the earlier table of that name whole: CRI-O decodes each file into
its configuration with BurntSushi/toml, which allocates a new handler for every map key it decodes
(cri-o pkg/config/config.go, UpdateFromDropInFile). When CRI-O runs, ``crio status config`` gives
the configuration in effect, defaults filled in; the role passes it too and its tables win.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import copy
import sys

# Same directory: the role runs this file as a script, so its directory is on sys.path.
from containerd_dropin import DropinError, answer, parse_toml, to_toml

# Keys of a source handler that must not reach the nvidia handler: they would make CRI-O run another
# binary (platform_runtime_paths), read a VM runtime's configuration, or merge another handler in.
NOT_COPIED = ('platform_runtime_paths', 'runtime_config_path', 'inherit_default_runtime')
# Runtime types whose monitor the copied monitor_path is (oci: conmon, pod: conmon-rs); a VM type is
# not an OCI binary wrapper, and nvidia-ctk writes "oci" whatever the source says.
KEPT_RUNTIME_TYPES = ('oci', 'pod')


def merge_files(files):
    """Merge CRI-O configuration files given in CRI-O's order into one dict (see the module docstring)."""
    merged = {}
    for item in files:
        doc = parse_toml(item.get('content') or '', item.get('path') or 'a CRI-O configuration file')
        crio = doc.get('crio', {})
        if not isinstance(crio, dict):
            raise DropinError('%s: "crio" must be a table' % item.get('path'))
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


def _build(request):
    if len(request['paths']) != len(request['contents']):
        raise ValueError('paths and contents differ in length')
    files = [{'path': path, 'content': content} for path, content in zip(request['paths'], request['contents'])]
    return crio_nvidia_dropin(files, request.get('status'), **request.get('options', {}))


def main(argv):
    """argv[1]: base64 of a JSON object {"paths", "contents", "status", "options"}; prints a JSON result."""
    return answer(argv, _build, 'crio_dropin.py')


if __name__ == '__main__':
    sys.exit(main(sys.argv))
