# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pod-spec defaults the product repeats (_daemonset_compare.apply_defaults) against the apiserver's own.

device_plugin_deploy and dra_driver_deploy compare the DaemonSet they build with the stored one after filling in,
on both sides, the defaults kube-apiserver fills in. That copy of the apiserver's defaulting must not drift from the
real one: a default it gets wrong makes every run rewrite an unchanged DaemonSet, or miss a change. Here every
preset's DaemonSet, as the modules' builders make it, is sent as a server-side dry-run create (dryRun=All: admitted,
defaulted and validated as a real create, nothing stored), and:

- the comparison finds no difference between what was built and what the server would store;
- a field the module manages, changed (one the module sets, or one it leaves to the server's default), is found;
- each default the product fills in is the value the server stored, and the server fills in no other value (empty
  ones aside, such as a container's ``resources: {}``), so a new apiserver release that defaults another field fails
  here.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json

import pytest

from ansible_collections.kubehw.devices.plugins.module_utils import _daemonset_compare as compare
from ansible_collections.kubehw.devices.plugins.module_utils import _device_plugin_manifest as device_plugin_manifest
from ansible_collections.kubehw.devices.plugins.module_utils import _device_plugin_presets as device_plugin_presets
from ansible_collections.kubehw.devices.plugins.module_utils import _dra_driver_manifest as dra_manifest
from ansible_collections.kubehw.devices.plugins.module_utils import _dra_driver_presets as dra_presets
from ansible_collections.kubehw.devices.plugins.modules import device_plugin_deploy
from ansible_collections.kubehw.devices.plugins.modules import dra_driver_deploy
from tests.support.node_configs import NO_NODES

# server dry runs only: no node of the stand-in is needed
pytestmark = pytest.mark.node_config(NO_NODES)

GENERIC_DEVICES = [{"name": "serial", "groups": [{"paths": [{"path": "/dev/ttyUSB*"}]}]}]

# (what, options): every device-plugin preset, then options that reach other defaulted fields (a ConfigMap and a
# Secret volume, a field reference, a port, probes, resource quantities the server rewrites, OnDelete)
DEVICE_PLUGIN_CASES = [
    ("nvidia", {"preset": "nvidia"}),
    ("amd", {"preset": "amd"}),
    ("intel_gpu", {"preset": "intel_gpu"}),
    ("generic", {"preset": "generic", "devices": GENERIC_DEVICES}),
    ("custom", {"preset": "custom", "image": "registry.example.com/plugin:1.0", "resource_names": ["example.com/dongle"]}),
    ("nvidia-options", {
        "preset": "nvidia", "mig_strategy": "single", "device_list_strategy": ["cdi-cri"],
        "time_slicing": {"replicas": {"nvidia.com/gpu": 4}, "rename_by_default": True},
        "resources": {"requests": {"cpu": "0.5", "memory": "0.5Gi"}, "limits": {"memory": "1024Mi"}},
        "update_strategy": {"type": "RollingUpdate", "max_unavailable": "25%", "max_surge": None},
        "host_paths": [{"path": "/run/nvidia", "read_only": True}], "image_pull_secrets": ["registry-login"],
        "env": {"NODE_NAME": {"valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}}}),
    ("custom-on-delete", {
        "preset": "custom", "image": "registry.example.com/plugin:latest", "resource_names": ["example.com/dongle"],
        "update_strategy": {"type": "OnDelete", "max_unavailable": None, "max_surge": None},
        "definition": {"spec": {"template": {"spec": {
            "containers": [{"name": "device-plugin",
                            "ports": [{"name": "metrics", "containerPort": 9400}],
                            "livenessProbe": {"httpGet": {"path": "/health", "port": 9400}},
                            "readinessProbe": {"tcpSocket": {"port": 9400}}}],
            "volumes": [{"name": "token", "secret": {"secretName": "plugin-token"}},
                        {"name": "bundle", "projected": {"sources": [{"configMap": {"name": "ca-bundle"}}]}}]}}}}}),
]
# kubernetes_test has no default image (Kubernetes publishes none): the case names one.
TEST_DRIVER_IMAGE = {"image": "registry.example/dra-test-driver:v1.36.2"}
DRA_CASES = [(preset, dict({"preset": preset}, **(TEST_DRIVER_IMAGE if dra_presets.PRESETS[preset]["image"] is None
                                                  else {})))
             for preset in dra_presets.PRESET_NAMES] + [
    ("nvidia-driver-root", {"preset": "nvidia", "nvidia_driver_root": "/run/nvidia/driver",
                            "env": {"LOG_VERBOSITY": 6}, "node_selector": {"example.com/gpu": "true"}}),
]

# A change to a field the module manages, one it sets and ones it leaves to the server's defaults:
# (what, change to the built DaemonSet, the path the comparison must name).
CHANGES = [
    ("image", lambda ds: _container(ds).update(image=_container(ds)["image"] + "-changed"),
     "/spec/template/spec/containers/0/image"),
    ("termination message policy (defaulted)",
     lambda ds: _container(ds).update(terminationMessagePolicy="FallbackToLogsOnError"),
     "/spec/template/spec/containers/0/terminationMessagePolicy"),
    ("DNS policy (defaulted)", lambda ds: _pod(ds).update(dnsPolicy="Default"), "/spec/template/spec/dnsPolicy"),
    ("grace period (defaulted)", lambda ds: _pod(ds).update(terminationGracePeriodSeconds=5),
     "/spec/template/spec/terminationGracePeriodSeconds"),
    ("revision history (defaulted)", lambda ds: ds["spec"].update(revisionHistoryLimit=3), "/spec/revisionHistoryLimit"),
]


def _pod(daemonset):
    return daemonset["spec"]["template"]["spec"]


def _container(daemonset):
    return _pod(daemonset)["containers"][0]


def _module_defaults(argument_spec):
    return dict((name, spec.get("default")) for name, spec in argument_spec.items())


def device_plugin_daemonset(options, name, namespace):
    """The DaemonSet device_plugin_deploy builds for these options (validated as the module validates them)."""
    params = dict(_module_defaults(device_plugin_deploy.argument_spec()), name=name, namespace=namespace, **options)
    device_plugin_manifest.validate(params)
    return device_plugin_manifest.build(params)[0]


def dra_daemonset(options, name, namespace):
    """The kubelet-plugin DaemonSet dra_driver_deploy builds for these options."""
    params = dict(_module_defaults(dra_driver_deploy.argument_spec()), name=name, namespace=namespace, **options)
    dra_manifest.validate(params)
    return dra_manifest.build_daemonset(params)


def dry_run_create(cluster, daemonset):
    """What the apiserver would store for this DaemonSet: admitted, defaulted and validated, nothing written."""
    answer = cluster.apps.create_namespaced_daemon_set(daemonset["metadata"]["namespace"], daemonset, dry_run="All",
                                                       _preload_content=False)
    return json.loads(answer.data)


def _leaves(value, path=""):
    """{JSON pointer: scalar or empty container} of every leaf of value."""
    if isinstance(value, dict) and value:
        found = {}
        for key, item in value.items():
            found.update(_leaves(item, "%s/%s" % (path, key.replace("~", "~0").replace("/", "~1"))))
        return found
    if isinstance(value, list) and value:
        found = {}
        for index, item in enumerate(value):
            found.update(_leaves(item, "%s/%d" % (path, index)))
        return found
    return {path: value}


def filled_defaults(daemonset):
    """{path: value} of what the product's copy of the apiserver's defaulting adds to the DaemonSet's spec."""
    built = _leaves(daemonset["spec"], "/spec")
    return dict((path, value) for path, value in _leaves(compare.apply_defaults(daemonset)["spec"], "/spec").items()
                if path not in built)


def server_only_values(built, stored):
    """{path: value} of what the server stored in the spec that neither the DaemonSet built nor the product's defaults
    hold, empty values (a container's ``resources: {}``) aside."""
    known = _leaves(compare.apply_defaults(built)["spec"], "/spec")
    return dict((path, value) for path, value in _leaves(stored["spec"], "/spec").items()
                if path not in known and value not in ({}, [], "", None))


def check_against_server(cluster, built):
    stored = dry_run_create(cluster, copy.deepcopy(built))
    assert compare.differences(built, stored) == []
    defaults = filled_defaults(built)
    stored_leaves = _leaves(stored["spec"], "/spec")
    assert dict((path, stored_leaves.get(path, "<not set by the server>")) for path in defaults) == defaults
    assert server_only_values(built, stored) == {}
    for what, change, path in CHANGES:
        changed = copy.deepcopy(built)
        change(changed)
        assert path in compare.differences(built, dry_run_create(cluster, changed)), what


@pytest.mark.parametrize("options", [options for _what, options in DEVICE_PLUGIN_CASES],
                         ids=[what for what, _options in DEVICE_PLUGIN_CASES])
def test_device_plugin_daemonset_is_what_the_server_stores(cluster, options):
    built = device_plugin_daemonset(options, cluster.unique_name("dp"), cluster.namespace())
    check_against_server(cluster, built)


@pytest.mark.parametrize("options", [options for _what, options in DRA_CASES], ids=[what for what, _options in DRA_CASES])
def test_dra_driver_daemonset_is_what_the_server_stores(cluster, options):
    built = dra_daemonset(options, cluster.unique_name("dra"), cluster.namespace())
    check_against_server(cluster, built)


def test_every_preset_is_checked():
    assert set(options["preset"] for _what, options in DEVICE_PLUGIN_CASES) == set(device_plugin_presets.PRESET_NAMES)
    assert set(options["preset"] for _what, options in DRA_CASES) == set(dra_presets.PRESET_NAMES)
