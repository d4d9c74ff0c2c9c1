# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The test nodes a kubelet stand-in registers (tests/support/kubelet.py): a YAML file or dict, defaults filled in.

    pod_start_delay, pod_stop_delay, device_plugin_stop_grace: seconds (see kubelet_core.py)
    device_plugins: {image substring: [resource names]}; dra_drivers: as dra_devices.py's DEFAULT_DRA_DRIVERS
    nodes: [{name, labels, annotations, taints, capacity, inventory: {resource: count}, without_capacity,
             starting: registers as a node still joining, Ready False, until the test says otherwise}]

node_configs/default.yaml is the integration suite's default set of nodes, node_configs/demo.yaml `make demo`'s.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import os

import yaml


DEFAULT_DEVICE_PLUGINS = {
    "nvidia/k8s-device-plugin": ["nvidia.com/gpu"],
    "rocm/k8s-device-plugin": ["amd.com/gpu"],
    "intel/intel-gpu-plugin": ["gpu.intel.com/i915"],
}

DEFAULT_NODE_CAPACITY = {"cpu": "8", "memory": "32Gi", "pods": "110"}

DEFAULTS = {
    "pod_start_delay": 0.3,
    "device_plugins": DEFAULT_DEVICE_PLUGINS,
    "nodes": [],
}

NODE_KEYS = {"name", "labels", "taints", "capacity", "inventory", "without_capacity", "annotations", "starting"}

CONFIGS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "node_configs")
DEFAULT_CONFIG_PATH = os.path.join(CONFIGS_DIR, "default.yaml")
# for tests that need no node of the stand-in's (cluster-scoped objects, server dry runs, nodes of the test's own):
# it registers none, so the test's control plane neither registers nor deletes five nodes for it
NO_NODES = {"nodes": []}
DEMO_CONFIG_PATH = os.path.join(CONFIGS_DIR, "demo.yaml")


class ConfigError(ValueError):
    pass


def load_config(config=None):
    """Return the parsed configuration with defaults filled in.

    config: None (empty cluster), a dict, or a path to a YAML file.
    """
    if config is None:
        raw = {}
    elif isinstance(config, dict):
        raw = copy.deepcopy(config)
    elif isinstance(config, (str, os.PathLike)):
        with open(config) as f:
            raw = yaml.safe_load(f) or {}
        if not isinstance(raw, dict):
            raise ConfigError("%s: the configuration must be a mapping" % config)
    else:
        raise ConfigError("config must be None, a dict or a YAML path, not %r" % type(config).__name__)

    result = copy.deepcopy(DEFAULTS)
    result.update(raw)
    for key in ("pod_start_delay",):
        try:
            result[key] = float(result[key])
        except (TypeError, ValueError):
            raise ConfigError("%s must be a number of seconds, got %r" % (key, result[key]))
        if result[key] < 0:
            raise ConfigError("%s must not be negative, got %r" % (key, result[key]))

    plugins = result.get("device_plugins") or {}
    if not isinstance(plugins, dict):
        raise ConfigError("device_plugins must map an image substring to a list of resource names")
    result["device_plugins"] = dict((k, list(v)) for k, v in plugins.items())

    nodes, seen = [], set()
    for node in result.get("nodes") or []:
        if not isinstance(node, dict) or not node.get("name"):
            raise ConfigError("each node needs a name, got %r" % (node,))
        unknown = set(node) - NODE_KEYS
        if unknown:
            raise ConfigError("node %s: unknown keys %s" % (node["name"], ", ".join(sorted(unknown))))
        if node["name"] in seen:
            raise ConfigError("node %s is listed twice" % node["name"])
        seen.add(node["name"])
        filled = {
            "name": str(node["name"]),
            "labels": dict(node.get("labels") or {}),
            "annotations": dict(node.get("annotations") or {}),
            "taints": list(node.get("taints") or []),
            "capacity": dict(DEFAULT_NODE_CAPACITY, **(node.get("capacity") or {})),
            "inventory": dict(node.get("inventory") or {}),
            "without_capacity": bool(node.get("without_capacity", False)),
            "starting": bool(node.get("starting", False)),
        }
        for key, value in filled["capacity"].items():
            filled["capacity"][key] = str(value)
        for key, value in filled["inventory"].items():
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError("node %s: inventory %s must be a whole number >= 0, got %r"
                                  % (node["name"], key, value))
        nodes.append(filled)
    result["nodes"] = nodes
    return result
