# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""drift_rows: the drift playbook's rows from the check-mode results it registers (the results' shapes are the
modules'; the playbook's own run on a real control plane is tests/integration/test_drift.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubehw.devices.plugins.filter.drift import MESSAGE_SHOWN, drift_rows

PLUGIN = "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"
MIRRORED = "registry.example.com/k8s-device-plugin:by-hand"


def daemonset(namespace, name, images, init=()):
    return {"metadata": {"namespace": namespace, "name": name}, "spec": {"template": {"spec": {
        "initContainers": [{"name": "init-%d" % i, "image": image} for i, image in enumerate(init)],
        "containers": [{"name": "c-%d" % i, "image": image} for i, image in enumerate(images)]}}}}


def deploy_result(before, after, action="updated", paths=("spec.template.spec.containers[0].image",)):
    return {"changed": True, "action": action, "changed_paths": list(paths),
            "daemonset": after or before,
            "diff": [{"before_header": "ConfigMap kubehw/x", "after_header": "ConfigMap kubehw/x",
                      "before": {"data": {"a": "1"}}, "after": {"data": {"a": "2"}}},
                     {"before_header": "DaemonSet kubehw/nvidia-device-plugin",
                      "after_header": "DaemonSet kubehw/nvidia-device-plugin", "before": before, "after": after}]}


STATIC = {"results": [
    {"item": {"resources": {"example.com/dongle": 2}},
     "nodes": [{"name": "dongle-1", "changed": True,
                "diff": {"before": {}, "after": {"example.com/dongle": "2"}}},
               {"name": "dongle-2", "changed": False, "diff": {"before": {"example.com/dongle": "2"},
                                                               "after": {"example.com/dongle": "2"}}}],
     "failed_nodes": ["dongle-3"], "msg": "node dongle-3 not found"},
    "skipped item"]}


def test_a_node_whose_resources_differ_and_one_that_could_not_be_compared_are_rows_of_their_own():
    assert drift_rows(STATIC) == [
        {"node": "dongle-1", "what": "extended resources", "declared": {"example.com/dongle": "2"}, "observed": {}},
        {"node": "dongle-3", "what": "extended resources", "declared": {"example.com/dongle": 2},
         "observed": "node dongle-3 not found"}]


def test_an_image_changed_by_hand_is_the_declared_and_the_observed_image_with_the_paths_that_differ():
    declared = daemonset("kubehw", "nvidia-device-plugin", [PLUGIN])
    observed = daemonset("kubehw", "nvidia-device-plugin", [MIRRORED])
    gpu = {"device_plugin_result": deploy_result(observed, declared),
           "accelerator_node_plugin_nodes": ["gpu-1", "gpu-2"]}
    assert drift_rows({}, gpu=gpu) == [{
        "node": "DaemonSet kubehw/nvidia-device-plugin", "what": "device plugin on gpu-1, gpu-2",
        "declared": {"image": PLUGIN},
        "observed": {"image": MIRRORED, "differs in": ["spec.template.spec.containers[0].image"]}}]


def test_an_init_containers_image_counts_and_each_image_is_named_once_in_pod_order():
    init = "registry.k8s.io/dra-example-driver:v0.2.1"
    declared = daemonset("dra", "driver", [PLUGIN, init], init=[init])
    observed = daemonset("dra", "driver", [PLUGIN, init], init=[MIRRORED])
    row, = drift_rows(None, gpu={"dra_driver_result": deploy_result(observed, declared),
                                 "accelerator_node_dra_nodes": ["gpu-3"]})
    assert row["what"] == "DRA driver on gpu-3"
    assert row["declared"] == {"image": "%s, %s" % (init, PLUGIN)}
    assert row["observed"]["image"] == "%s, %s, %s" % (MIRRORED, PLUGIN, init)


def test_a_missing_object_is_missing_and_an_unchanged_one_no_row():
    declared = daemonset("kubehw", "nvidia-device-plugin", [PLUGIN])
    runtime_class = {"changed": True, "action": "created", "runtime_class": {"metadata": {"name": "nvidia"}},
                     "diff": {"before": {}, "after": {"handler": "nvidia"}}}
    gpu = {"device_plugin_result": deploy_result(None, declared, action="created"),
           "dra_driver_result": {"changed": False, "diff": []},
           "nvidia_container_toolkit_runtime_class_result": runtime_class}
    assert drift_rows({}, gpu=gpu) == [
        {"node": "RuntimeClass nvidia", "what": "runtime of the device plugin on no node", "declared": "present",
         "observed": "missing"},
        {"node": "DaemonSet kubehw/nvidia-device-plugin", "what": "device plugin on no node",
         "declared": {"image": PLUGIN}, "observed": "missing"}]


def test_nothing_registered_is_no_drift():
    assert drift_rows({}, gpu={}) == [] and drift_rows(None) == []


def test_a_gpu_node_its_daemonset_does_not_select_is_a_row_no_repair_writes():
    """The module's selected_nodes against the nodes the inventory gives the plugin: a node relabelled out of the
    pool is named, whether or not the DaemonSet itself differs."""
    unchanged = {"changed": False, "daemonset": daemonset("kubehw", "nvidia-device-plugin", [PLUGIN]),
                 "selected_nodes": ["gpu-1", "gpu-3"]}
    rows = drift_rows({}, gpu={"device_plugin_result": unchanged, "accelerator_node_plugin_nodes": ["gpu-1", "gpu-2"],
                               "dra_driver_result": {"changed": False, "skipped": True},
                               "accelerator_node_dra_nodes": []})
    assert rows == [{"node": "gpu-2", "what": "device plugin DaemonSet kubehw/nvidia-device-plugin",
                     "declared": "served", "observed": "not selected (the node's labels or taints keep its pods away)",
                     "repairable": False}]
    # a result without the list (a skipped task, an older module) says nothing of coverage
    assert drift_rows({}, gpu={"device_plugin_result": dict(unchanged, selected_nodes=None),
                               "accelerator_node_plugin_nodes": ["gpu-2"]}) == []


def host(node, driver=None, packages=None, pinned=None):
    """What the accelerator_node role's upgrade_plan entry point records of a host (accelerator_node_upgrade)."""
    return {"host": node, "node": node, "driver": driver or {}, "packages": packages or {}, "pinned": pinned or {}}


def test_a_hosts_driver_and_pinned_packages_that_differ_are_rows_no_repair_writes():
    rows = drift_rows({}, hosts=[
        host("gpu-1", driver={"running": "550.54.15", "branch": "570", "install": True, "reboot": True}),
        host("gpu-2", driver={"running": "570.86.15", "branch": "570", "install": False, "reboot": True,
                              "loaded_modules": []}),
        host("gpu-3", driver={"running": "570.86.15", "branch": "570", "install": False, "reboot": False},
             packages={"containerd.io": "1.7.27-1", "nvidia-container-toolkit": "1.17.7-1"},
             pinned={"containerd": "1.7.28", "nvidia-container-toolkit": "1.17.7"}),
        host("gpu-4", pinned={"nvidia-container-toolkit": "1.17.7"}),
        host("gpu-5", driver={"running": "570.86.15", "branch": "570"}, pinned={"containerd": ""}),
    ])
    assert rows == [
        {"node": "gpu-1", "what": "NVIDIA driver", "declared": "branch 570", "observed": "550.54.15",
         "repairable": False},
        {"node": "gpu-2", "what": "NVIDIA driver", "declared": "branch 570 loaded",
         "observed": "570.86.15 installed, not loaded (kernel modules loaded: none)", "repairable": False},
        {"node": "gpu-3", "what": "package containerd", "declared": "1.7.28", "observed": "1.7.27-1",
         "repairable": False},
        {"node": "gpu-4", "what": "package nvidia-container-toolkit", "declared": "1.17.7",
         "observed": "not installed", "repairable": False}]


# The results of the roles' file writes in check and diff mode, as ansible-core 2.19's copy and lineinfile return
# them (recorded from a run on files of those contents): copy's content diff, headed by the path (no before_header
# for a file that does not exist), lineinfile's headed "<path> (content)" and followed by its attributes' entry.
DROPIN = "/etc/containerd/conf.d/99-nvidia.toml"
EDITED_DROPIN = {"changed": True, "failed": False, "diff": [
    {"before": 'version = 3\n[plugins."io.containerd.cri.v1.runtime"]\n  enable_cdi = false\n',
     "after": 'version = 3\n[plugins."io.containerd.cri.v1.runtime"]\n  enable_cdi = true\n  cdi_spec_dirs = ["/etc/cdi"]\n',
     "before_header": DROPIN, "after_header": DROPIN}]}
MISSING_CDI = {"changed": True, "failed": False, "diff": [
    {"before": "", "after": "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\n", "after_header": "/etc/cdi/nvidia.yaml"}]}
IMPORTS = {"changed": True, "failed": False, "msg": "line added", "backup": "", "diff": [
    {"before": "version = 3\n[plugins]\n", "after": 'version = 3\nimports = ["/etc/containerd/conf.d/*.toml"]\n[plugins]\n',
     "before_header": "/etc/containerd/config.toml (content)", "after_header": "/etc/containerd/config.toml (content)"},
    {"before_header": "/etc/containerd/config.toml (file attributes)",
     "after_header": "/etc/containerd/config.toml (file attributes)"}]}
MODE_ONLY = {"changed": True, "failed": False, "diff": [
    {"before": {"mode": "0600", "path": DROPIN}, "after": {"mode": "0644", "path": DROPIN}}], "dest": DROPIN}
UNCHANGED = {"changed": False, "dest": DROPIN, "path": DROPIN, "diff": {"before": {"path": DROPIN},
                                                                        "after": {"path": DROPIN}}}
SKIPPED = {"changed": False, "skipped": True, "skip_reason": "Conditional result was False"}


def runtime(node, **results):
    """What the accelerator_node role's runtime_drift entry point records of a host (accelerator_node_runtime_drift)."""
    whats = {"imports": "containerd configuration, its imports line", "containerd": "containerd drop-in",
             "crio": "CRI-O drop-in", "docker": "docker daemon.json", "cdi": "CDI specification"}
    return {"host": node, "node": node, "files": [{"what": whats[key], "result": results.get(key, {})} for key in whats]}


def test_a_runtime_file_a_run_would_rewrite_is_a_row_of_the_lines_that_differ_no_repair_writes():
    rows = drift_rows({}, runtime=[
        runtime("gpu-1", containerd=EDITED_DROPIN, cdi=MISSING_CDI, imports=IMPORTS),
        runtime("gpu-2", containerd=UNCHANGED, cdi=SKIPPED, crio=MODE_ONLY),
        runtime("gpu-3"),
    ])
    assert rows == [
        {"node": "gpu-1", "what": "containerd configuration, its imports line /etc/containerd/config.toml",
         "declared": {"lines the host lacks": ['imports = ["/etc/containerd/conf.d/*.toml"]']},
         "observed": {"lines not declared": []}, "repairable": False},
        {"node": "gpu-1", "what": "containerd drop-in %s" % DROPIN,
         "declared": {"lines the host lacks": ["  enable_cdi = true", '  cdi_spec_dirs = ["/etc/cdi"]']},
         "observed": {"lines not declared": ["  enable_cdi = false"]}, "repairable": False},
        {"node": "gpu-1", "what": "CDI specification /etc/cdi/nvidia.yaml", "declared": "present", "observed": "missing",
         "repairable": False},
        {"node": "gpu-2", "what": "CRI-O drop-in %s" % DROPIN,
         "declared": {"file attributes": {"mode": "0644", "path": DROPIN}},
         "observed": {"file attributes": {"mode": "0600", "path": DROPIN}}, "repairable": False}]


def test_a_long_difference_names_ten_lines_a_side_and_counts_the_rest():
    before = "".join("old-%d\n" % i for i in range(25))
    after = "".join("new-%d\n" % i for i in range(12))
    (row,) = drift_rows({}, runtime=[runtime("gpu-1", cdi={"changed": True, "diff": [
        {"before": before, "after": after, "before_header": "/etc/cdi/nvidia.yaml",
         "after_header": "/etc/cdi/nvidia.yaml"}]})])
    assert row["declared"]["lines the host lacks"] == ["new-%d" % i for i in range(10)] + ["... 2 more line(s)"]
    assert row["observed"]["lines not declared"] == ["old-%d" % i for i in range(10)] + ["... 15 more line(s)"]
    # without diff mode a write says only that it would change the file
    (plain,) = drift_rows({}, runtime=[runtime("gpu-1", docker={"changed": True})])
    assert plain["declared"] == "as the run writes it" and plain["observed"] == "differs"


def test_a_host_whose_runtime_files_could_not_be_worked_out_is_one_row_quoting_why():
    """The role's failed task's message (read from the host: one line, cut at MESSAGE_SHOWN characters); the host's
    other rows stand, and a host without a message has none of this."""
    unreadable = dict(runtime("gpu-1"), unreadable="containerd is not installed on gpu-1\n(No such file or directory)"
                      + " x" * 400)
    rows = drift_rows({}, runtime=[unreadable, dict(runtime("gpu-2"), unreadable=None), dict(runtime("gpu-3"), unreadable="")])
    assert len(rows) == 1, rows
    assert {k: v for k, v in rows[0].items() if k != "observed"} == {
        "node": "gpu-1", "what": "container runtime configuration", "declared": "as the run writes it",
        "repairable": False}
    assert rows[0]["observed"].startswith("not worked out: containerd is not installed on gpu-1 (No such file or ")
    assert len(rows[0]["observed"]) == len("not worked out: ") + MESSAGE_SHOWN
