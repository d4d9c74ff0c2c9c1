# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/drift.yml on the real control plane with the demo's cluster and its hand-written inventory: drift found
on a fresh cluster and on one changed by hand (a node's advertised resource removed, the device plugin's image
replaced, a GPU node relabelled out of the plugin's selection), reported per node and object with exit status 2 and
nothing written; repaired with kubehw_repair=true but for the node's label, which no run writes (exit 2 naming it),
and clean after its label is back ("no drift" is asserted once, at the end)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest
import yaml

from tests.support.k8s_objects import read_out
from tests.support.node_configs import DEMO_CONFIG_PATH, NO_NODES
from tests.support.playbook_runner import run_playbook

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEMO_INVENTORY = os.path.join(REPO_ROOT, "playbooks", "inventory", "demo", "hosts.yml")
PLUGIN_NAMESPACE = "kubehw-device-plugins"
PLUGIN = "nvidia-device-plugin"
DONGLE = "example.com/dongle"
MIRRORED = "registry.example.com/mirror/k8s-device-plugin:v0.0.1-by-hand"

with open(DEMO_CONFIG_PATH) as _f:
    DEMO_CLUSTER = yaml.safe_load(_f)


def job_template_answers(repair):
    """What AWX sends for the shipped drift job template: its survey's answer, a string."""
    with open(os.path.join(REPO_ROOT, "playbooks", "awx", "job_templates.yml")) as f:
        template = [t for t in yaml.safe_load(f)["job_templates"] if t["name"] == "kubehw.devices drift"][0]
    assert template["playbook"] == "playbooks/drift.yml"
    (question,) = template["related"]["survey_spec"]["spec"]
    assert question["variable"] == "kubehw_repair" and question["default"] == "false"
    return {question["variable"]: "true" if repair else question["default"]}


def drift(collections_path, tmp_path, cluster, repair=False):
    extra = dict(job_template_answers(repair), kubehw_kubeconfig=cluster.kubeconfig)
    # the custom stats printed at the end are what AWX keeps as the job's artifacts
    return run_playbook("kubehw.devices.drift", str(tmp_path), inventory=DEMO_INVENTORY, collections=collections_path,
                        kubeconfig=cluster.kubeconfig, extra_vars=extra, env={"ANSIBLE_SHOW_CUSTOM_STATS": "1"},
                        timeout=600)


def lines(run, word):
    """The messages of the report's lines that start with word ("drift", "repaired")."""
    return sorted(run.printed_messages("%s: " % word))


def capacity(cluster, node):
    return json.loads(cluster.core.read_node(node, _preload_content=False).data)["status"].get("capacity") or {}


def runtime_classes(cluster):
    from kubernetes import client
    return [rc.metadata.name for rc in client.NodeV1Api(cluster.api_client).list_runtime_class().items]


NFD_GPU_LABEL = "feature.node.kubernetes.io/pci-10de.present"
UNSELECTED = ('drift: gpu-node-2: device plugin DaemonSet %s/%s: declared "served", observed "not selected (the node\'s '
              'labels or taints keep its pods away)"' % (PLUGIN_NAMESPACE, PLUGIN))


def node_labels(cluster, node):
    return json.loads(cluster.core.read_node(node, _preload_content=False).data)["metadata"].get("labels") or {}


def set_label(cluster, node, value):
    """The NFD label the nvidia preset selects on, set or (None) removed, as a relabelling tool would."""
    read_out(cluster.core.patch_node(node, {"metadata": {"labels": {NFD_GPU_LABEL: value}}}, _preload_content=False))


def plugin_images(cluster):
    ds = json.loads(cluster.apps.read_namespaced_daemon_set(PLUGIN, PLUGIN_NAMESPACE, _preload_content=False).data)
    return [c["image"] for c in ds["spec"]["template"]["spec"]["containers"]]


@pytest.mark.node_config(DEMO_CLUSTER)
@pytest.mark.timeout(900)
def test_drift_is_found_per_node_written_nowhere_repaired_on_request_and_then_clean(cluster, collections_path,
                                                                                    tmp_path):
    cluster.require_controlled("the demo inventory names the configured demo nodes")
    for name in (PLUGIN_NAMESPACE, "kubehw-dra-drivers"):
        read_out(cluster.core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
                                               _preload_content=False))

    # a fresh cluster: everything the inventory declares is missing, and the run writes none of it (the RuntimeClass
    # too, unless an earlier test of this control plane made it: tests/integration/runtime_classes.py)
    runtime_class_missing = "nvidia" not in runtime_classes(cluster)
    expected = ["dongle-node-1"] + (["RuntimeClass nvidia"] if runtime_class_missing else []) + [
        "DaemonSet %s/%s" % (PLUGIN_NAMESPACE, PLUGIN)]
    fresh = drift(collections_path, tmp_path, cluster)
    assert fresh.returncode == 2, fresh.output()
    found = lines(fresh, "drift")
    assert 'drift: dongle-node-1: extended resources: declared {"%s": "2"}, observed {}' % DONGLE in found, found
    assert ('drift: RuntimeClass nvidia: runtime of the device plugin on gpu-node-1, gpu-node-2: declared "present", '
            'observed "missing"' in found) is runtime_class_missing, found
    plugin_line = [line for line in found if line.startswith("drift: DaemonSet %s/%s: device plugin on gpu-node-1, "
                                                             "gpu-node-2: declared " % (PLUGIN_NAMESPACE, PLUGIN))]
    assert plugin_line and plugin_line[0].endswith('observed "missing"'), found
    assert ("drift on %d node(s) or object(s): %s. Nothing was written" % (len(expected), ", ".join(expected))
            in fresh.stdout), fresh.output()
    stats = fresh.stdout[fresh.stdout.index("CUSTOM STATS"):]
    assert '"kubehw_drift":' in stats and '"node": "dongle-node-1"' in stats and '"kubehw_drift_repaired": false' \
        in stats, stats
    assert DONGLE not in capacity(cluster, "dongle-node-1")
    assert cluster.apps.list_namespaced_daemon_set(PLUGIN_NAMESPACE).items == []
    assert ("nvidia" not in runtime_classes(cluster)) is runtime_class_missing

    repaired = drift(collections_path, tmp_path, cluster, repair=True)
    assert repaired.returncode == 0, repaired.output()
    assert len(lines(repaired, "repaired")) == len(expected), repaired.output()
    assert "repaired %d difference(s)" % len(expected) in repaired.stdout, repaired.output()
    assert capacity(cluster, "dongle-node-1")[DONGLE] == "2" and "nvidia" in runtime_classes(cluster)
    declared_images = plugin_images(cluster)

    # changed by hand: the node's resource removed (as a re-registered node loses it), the plugin's image replaced,
    # and gpu-node-2 relabelled out of the plugin's selection (its NFD label gone)
    read_out(cluster.core.patch_node_status("dongle-node-1", [
        {"op": "remove", "path": "/status/capacity/%s" % DONGLE.replace("/", "~1")}], _preload_content=False))
    read_out(cluster.apps.patch_namespaced_daemon_set(PLUGIN, PLUGIN_NAMESPACE, [
        {"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": MIRRORED}],
        _preload_content=False))
    set_label(cluster, "gpu-node-2", None)
    changed = drift(collections_path, tmp_path, cluster)
    assert changed.returncode == 2, changed.output()
    found = lines(changed, "drift")
    assert len(found) == 3, found
    assert 'drift: dongle-node-1: extended resources: declared {"%s": "2"}, observed {}' % DONGLE in found, found
    plugin_line = [line for line in found if line.startswith("drift: DaemonSet")][0]
    assert '"image": "%s"' % declared_images[0] in plugin_line.split("observed", 1)[0], plugin_line
    assert '"image": "%s"' % MIRRORED in plugin_line.split("observed", 1)[1], plugin_line
    assert UNSELECTED in found, found
    assert DONGLE not in capacity(cluster, "dongle-node-1") and plugin_images(cluster)[0] == MIRRORED

    # the repair writes what differs but cannot give the node its label back: it says so and still exits 2
    partly = drift(collections_path, tmp_path, cluster, repair=True)
    assert partly.returncode == 2, partly.output()
    assert lines(partly, "drift") == [UNSELECTED] and len(lines(partly, "repaired")) == 2, partly.output()
    assert "drift on 1 node(s) or object(s): gpu-node-2. Repaired 2 other difference(s)" in partly.stdout, partly.output()
    assert capacity(cluster, "dongle-node-1")[DONGLE] == "2" and plugin_images(cluster) == declared_images
    assert NFD_GPU_LABEL not in node_labels(cluster, "gpu-node-2")

    set_label(cluster, "gpu-node-2", "true")
    clean = drift(collections_path, tmp_path, cluster)
    assert clean.returncode == 0 and "no drift" in clean.stdout and not lines(clean, "drift"), clean.output()


@pytest.mark.node_config(NO_NODES)
def test_a_repair_answer_that_is_not_true_or_false_is_refused_before_anything_is_compared(
        cluster, collections_path, tmp_path):
    """An AWX survey or an -e typo ("ture", "maybe") was read as false by the bool filter: the run compared instead
    of repairing and said nothing of the answer. Now the first play refuses it, naming it, before any comparison."""
    run = run_playbook("kubehw.devices.drift", str(tmp_path), inventory=DEMO_INVENTORY, collections=collections_path,
                       kubeconfig=cluster.kubeconfig,
                       extra_vars={"kubehw_repair": "maybe", "kubehw_kubeconfig": cluster.kubeconfig}, timeout=300)
    assert run.returncode == 2, run.output()
    assert 'kubehw_repair must be true or false, got "maybe": nothing was compared or written' in run.stdout, \
        run.output()
    assert "Compare the static extended resources" not in run.stdout, run.output()
