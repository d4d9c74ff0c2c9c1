# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The k8s_nodes inventory plugin through `ansible-inventory --graph` and `--list`, against the cluster of the
fixtures (the suite's own real control plane, or the cluster of KUBECONFIG): nodes the test creates with NFD/GFD labels, capacity, addresses and
annotations, found group by group; the inventory cache; refused credentials and a bad configuration as one line;
the K8S_AUTH_* variables an AWX Kubernetes credential sets; and site.yml with only the plugin as inventory reaching
the nodes the hand-written demo inventory reaches."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import shutil
import sys

import pytest
import yaml

from tests.support.k8s_objects import read_out
from tests.support.node_configs import DEMO_CONFIG_PATH
from tests.support.playbook_runner import run_inventory, run_playbook

# All of it runs with the lowest ansible-core too: cluster data planted as templates must stay strings on every
# ansible-core the collection supports.
pytestmark = pytest.mark.floor

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEMO_INVENTORY = os.path.join(REPO_ROOT, "playbooks", "inventory", "demo", "hosts.yml")
DEMO_PLUGIN_INVENTORY = os.path.join(REPO_ROOT, "playbooks", "inventory", "demo_k8s_nodes", "demo.k8s_nodes.yml")
STATIC_ANNOTATION = "kubehw.devices/static-resources"
ALLOCATION_LABEL = "kubehw.devices/gpu-allocation"
PLUGIN_GROUPS = ("gpu_nodes", "nvidia_gpu_nodes", "amd_gpu_nodes", "intel_gpu_nodes", "dra_gpu_nodes",
                 "static_resource_nodes")


def write_config(tmp_path, name="nodes", **options):
    path = tmp_path / ("%s.k8s_nodes.yml" % name)
    path.write_text(yaml.safe_dump(dict({"plugin": "kubehw.devices.k8s_nodes"}, **options)))
    return str(path)


def inventory(collections_path, tmp_path, config, *args, env=None):
    return run_inventory(config, args, str(tmp_path), collections=collections_path, env=env, timeout=180)


def plain(value):
    """--list marks strings that came from outside (the API) as {"__ansible_unsafe": "..."}: their values."""
    if isinstance(value, dict):
        if set(value) == {"__ansible_unsafe"}:
            return value["__ansible_unsafe"]
        return dict((plain(k), plain(v)) for k, v in value.items())
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def listing(collections_path, tmp_path, config, *args, env=None):
    proc = inventory(collections_path, tmp_path, config, "--list", *args, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = plain(json.loads(proc.stdout))
    return data, proc.stderr


def hosts_of(data, group):
    """Hosts of a group of `ansible-inventory --list`, its child groups' hosts included."""
    entry = data.get(group) or {}
    found = set(entry.get("hosts") or [])
    for child in entry.get("children") or []:
        found |= hosts_of(data, child)
    return found


def hostvars(data, host):
    return data["_meta"]["hostvars"][host]


def set_addresses(cluster, name, addresses):
    read_out(cluster.core.patch_node_status(name, [{"op": "add", "path": "/status/addresses", "value": addresses}],
                                            _preload_content=False))


def annotate(cluster, name, annotations):
    read_out(cluster.core.patch_node(name, {"metadata": {"annotations": annotations}}, _preload_content=False))


def label(cluster, name, labels):
    read_out(cluster.core.patch_node(name, {"metadata": {"labels": labels}}, _preload_content=False))


@pytest.fixture
def fleet(cluster):
    """Nodes of this test only, all carrying one label of their own (the plugin's label selector), so nodes of other
    tests on a shared cluster never show up: NFD and GFD labels, extended resources in capacity, addresses, the
    allocation label and the static-resources annotation."""
    mark = cluster.unique_name("inv")
    own = {"kubehw-it/inventory": mark}
    specs = {
        "nvnfd": {"labels": dict(own, **{"feature.node.kubernetes.io/pci-0302_10de.present": "true"}),
                  "capacity": {"cpu": "8", "pods": "110", "nvidia.com/gpu": "4"}},
        "nvgfd": {"labels": dict(own, **{"nvidia.com/gpu.present": "true", ALLOCATION_LABEL: "dra"}),
                  "capacity": {"cpu": "8", "pods": "110"}},
        "amd": {"labels": dict(own, **{"feature.node.kubernetes.io/pci-1002.present": "true",
                                       "kubernetes.io/arch": "amd64"}),
                "capacity": {"cpu": "8", "pods": "110", "amd.com/gpu": "1"}},
        "intel": {"labels": dict(own), "capacity": {"cpu": "8", "pods": "110", "gpu.intel.com/i915": "2"}},
        "dongle": {"labels": dict(own), "capacity": {"cpu": "4", "pods": "110"}},
        "cpu": {"labels": dict(own, **{"topology.kubernetes.io/zone": "zone-b"}),
                "capacity": {"cpu": "4", "pods": "110", "nvidia.com/gpu": "0"}},
    }
    names = dict((what, cluster.create_nodes([dict(spec, what=what)])[0]) for what, spec in specs.items())
    set_addresses(cluster, names["nvnfd"], [{"type": "Hostname", "address": names["nvnfd"]},
                                            {"type": "ExternalIP", "address": "203.0.113.10"},
                                            {"type": "InternalIP", "address": "10.20.0.10"}])
    set_addresses(cluster, names["nvgfd"], [{"type": "InternalIP", "address": "10.20.0.11"}])
    set_addresses(cluster, names["amd"], [{"type": "ExternalIP", "address": "203.0.113.12"}])
    set_addresses(cluster, names["intel"], [{"type": "InternalIP", "address": "10.20.0.13"}])
    set_addresses(cluster, names["cpu"], [{"type": "Hostname", "address": names["cpu"]}])
    # the dongle node reports no address at all
    annotate(cluster, names["dongle"], {STATIC_ANNOTATION: json.dumps({"example.com/dongle": 2})})
    return {"selector": "kubehw-it/inventory=%s" % mark, "names": names}


def fleet_config(cluster, tmp_path, fleet, name="nodes", **options):
    return write_config(tmp_path, name, kubeconfig=cluster.kubeconfig.split(os.pathsep)[0],
                        label_selectors=[fleet["selector"]], **options)


def test_graph_and_list_group_by_group(cluster, collections_path, tmp_path, fleet):
    n = fleet["names"]
    config = fleet_config(cluster, tmp_path, fleet, compose={"ansible_user": "'ansible'"},
                          keyed_groups=[{"key": "kubehw_node.labels['topology.kubernetes.io/zone'] | default('none')",
                                         "prefix": "zone"}])
    data, stderr = listing(collections_path, tmp_path, config)
    assert set(data["_meta"]["hostvars"]) == set(n.values())   # its own nodes, every one of them
    assert hosts_of(data, "gpu_nodes") == {n["nvnfd"], n["nvgfd"], n["amd"], n["intel"]}
    assert hosts_of(data, "nvidia_gpu_nodes") == {n["nvnfd"], n["nvgfd"]}
    assert hosts_of(data, "amd_gpu_nodes") == {n["amd"]}
    assert hosts_of(data, "intel_gpu_nodes") == {n["intel"]}
    assert hosts_of(data, "dra_gpu_nodes") == {n["nvgfd"]}
    assert hosts_of(data, "static_resource_nodes") == {n["dongle"]}
    assert hosts_of(data, "zone_zone_b") == {n["cpu"]}
    assert set(data["gpu_nodes"]["children"]) >= {"nvidia_gpu_nodes", "amd_gpu_nodes", "intel_gpu_nodes",
                                                  "dra_gpu_nodes"}
    # ansible_host: InternalIP first, else the next type in order; the roles' node-name variable on every host
    assert hostvars(data, n["nvnfd"])["ansible_host"] == "10.20.0.10"
    assert hostvars(data, n["amd"])["ansible_host"] == "203.0.113.12"
    assert hostvars(data, n["cpu"])["ansible_host"] == n["cpu"]
    assert "ansible_host" not in hostvars(data, n["dongle"])
    for name in n.values():
        assert hostvars(data, name)["kubehw_node_name"] == name
        assert hostvars(data, name)["ansible_user"] == "ansible"
    assert hostvars(data, n["nvgfd"])["accelerator_node_allocation"] == "dra"
    assert hostvars(data, n["dongle"])["extended_resources_static"] == {"example.com/dongle": 2}
    assert hostvars(data, n["nvnfd"])["kubehw_node"]["capacity"]["nvidia.com/gpu"] == "4"
    assert hostvars(data, n["amd"])["kubehw_gpu_vendors"] == ["amd"]
    # the node without an address is listed, and named in a warning
    warning = " ".join(stderr.split())
    assert "1 node without an address" in warning and n["dongle"] in warning, stderr

    proc = inventory(collections_path, tmp_path, config, "--graph")
    assert proc.returncode == 0, proc.stderr
    graph = proc.stdout
    for group in PLUGIN_GROUPS:
        assert "@%s:" % group in graph
    nvidia = graph[graph.index("@nvidia_gpu_nodes:"):graph.index("@amd_gpu_nodes:")]
    assert n["nvnfd"] in nvidia and n["nvgfd"] in nvidia and n["amd"] not in nvidia
    # dra_gpu_nodes drawn as a child of gpu_nodes, with the DRA node in it
    dra = re.search(r"^  \|--@gpu_nodes:\n(?:  \|  \|.*\n)*?  \|  \|--@dra_gpu_nodes:\n((?:  \|  \|  \|--.*\n)*)",
                    graph, re.M)
    assert dra and re.findall(r"\|--(\S+)", dra.group(1)) == [n["nvgfd"]], graph


def test_name_pattern_field_selector_and_address_order(cluster, collections_path, tmp_path, fleet):
    n = fleet["names"]
    config = fleet_config(cluster, tmp_path, fleet, name_pattern=r".*-(nvnfd|amd)-\d+",
                          address_types=["ExternalIP", "InternalIP"])
    data, _stderr = listing(collections_path, tmp_path, config)
    assert set(data["_meta"]["hostvars"]) == {n["nvnfd"], n["amd"]}
    assert hostvars(data, n["nvnfd"])["ansible_host"] == "203.0.113.10"
    config = fleet_config(cluster, tmp_path, fleet, "byfield", field_selectors=["metadata.name=%s" % n["intel"]])
    data, _stderr = listing(collections_path, tmp_path, config)
    assert set(data["_meta"]["hostvars"]) == {n["intel"]}
    assert hosts_of(data, "intel_gpu_nodes") == {n["intel"]}


def test_one_paged_list_and_an_expired_continue_token(cluster, collections_path, tmp_path, fleet):
    """page_size 2 over six nodes: three pages of one list, every node once. On a cluster the suite controls
    (the suite's own control plane, behind the fault proxy) the second page's continue token first
    answers 410 Expired (as after an etcd compaction) and the list starts again."""
    config = fleet_config(cluster, tmp_path, fleet, page_size=2)
    if cluster.controlled:
        mark = cluster.mark()
        cluster.controls.inject_fault("GET", r"^/api/v1/nodes$", status="continue-expired", count=1)
    data, _stderr = listing(collections_path, tmp_path, config)
    assert set(data["_meta"]["hostvars"]) == set(fleet["names"].values())
    if cluster.controlled:
        lists = [r for r in cluster.requests(mark) if r["method"] == "GET" and r["path"] == "/api/v1/nodes"]
        # page 1, page 2 (410), then pages 1, 2 and 3 again; nothing written
        assert [r.get("status") for r in lists] == [200, 410, 200, 200, 200], lists
        assert not cluster.writes(mark)


def test_inventory_cache(cluster, collections_path, tmp_path, fleet):
    n = fleet["names"]
    config = fleet_config(cluster, tmp_path, fleet, cache=True, cache_plugin="ansible.builtin.jsonfile",
                          cache_connection=str(tmp_path / "cache"), cache_timeout=3600)
    data, _stderr = listing(collections_path, tmp_path, config)
    assert hosts_of(data, "amd_gpu_nodes") == {n["amd"]}
    label(cluster, n["intel"], {"feature.node.kubernetes.io/pci-1002.present": "true"})
    data, _stderr = listing(collections_path, tmp_path, config)
    assert hosts_of(data, "amd_gpu_nodes") == {n["amd"]}          # from the cache
    # what the example configuration's comment says reads the cluster again (ansible-inventory has --flush-cache
    # only from ansible-core 2.19 on)
    seen = tmp_path / "amd.json"
    plays = [{"name": "Write a group", "hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "Write the AMD group", "ansible.builtin.copy": {
            "dest": str(seen), "mode": "0600", "content": "{{ groups['amd_gpu_nodes'] | to_json }}"}}]}]
    run = run_playbook(plays, str(tmp_path), inventory=config, collections=collections_path, args=["--flush-cache"])
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert set(json.loads(seen.read_text())) == {n["amd"], n["intel"]}
    data, _stderr = listing(collections_path, tmp_path, config)
    assert hosts_of(data, "amd_gpu_nodes") == {n["amd"], n["intel"]}      # the cache it wrote again


def one_line_failure(proc, words):
    assert proc.returncode != 0
    assert "Traceback" not in proc.stdout + proc.stderr
    text = " ".join(proc.stderr.split())
    assert words in text, proc.stderr
    # one message: ansible-core before 2.19 wraps each warning at 79 columns, so a message is a warning's text
    messages = [" ".join(chunk.split()) for chunk in re.split(r"\[WARNING\]:|ERROR!|\[ERROR\]:", proc.stderr)]
    assert [m for m in messages if words in m], proc.stderr


def test_refused_credentials_and_a_bad_key_are_one_line_each(cluster, collections_path, tmp_path):
    url, ca = cluster.server()
    config = write_config(tmp_path, "badtoken", host=url, ca_cert=ca, api_key="not-a-token-of-this-cluster")
    proc = inventory(collections_path, tmp_path, config, "--list")
    one_line_failure(proc, "answered 401 Unauthorized: its credentials were not accepted; fix api_key")
    assert "not-a-token-of-this-cluster" not in proc.stdout + proc.stderr

    _user, token = cluster.service_account(cluster.unique_name("sa"))
    config = write_config(tmp_path, "forbidden", host=url, ca_cert=ca, api_key=token)
    proc = inventory(collections_path, tmp_path, config, "--list")
    one_line_failure(proc, "answered 403 Forbidden: this identity may not list nodes; grant it get and list on nodes")
    assert token not in proc.stdout + proc.stderr

    # TLS verification stays on: without the cluster's CA the server is not trusted, and the line says what to set
    config = write_config(tmp_path, "noca", host=url, api_key=token)
    proc = inventory(collections_path, tmp_path, config, "--list")
    one_line_failure(proc, "Give the cluster's CA with ca_cert, or set validate_certs: false")

    config = write_config(tmp_path, "badkey", kubeconfig=cluster.kubeconfig, lable_selectors=["a=b"])
    one_line_failure(inventory(collections_path, tmp_path, config, "--list"), "unknown option 'lable_selectors'")
    config = write_config(tmp_path, "badvalue", kubeconfig=cluster.kubeconfig, address_types=["InternalIp"])
    one_line_failure(inventory(collections_path, tmp_path, config, "--list"),
                     "address_types entry 'InternalIp' is not a node address type")


# -- cluster data is never code -----------------------------------------------------------------------------------------

EXAMPLE_CONFIG = os.path.join(REPO_ROOT, "playbooks", "inventory", "k8s_nodes.yml")
# A value of Ansible's template syntax planted where anyone who may patch a Node (or its own kubelet) can write. Label
# keys and values cannot carry it: kube-apiserver refuses "{" there (422).
PLANTED = "{{ lookup('pipe', 'touch %s') }}"


def test_values_read_from_the_cluster_are_never_templated(cluster, collections_path, tmp_path):
    """A lookup planted in a node's annotation and address runs neither in `ansible-inventory --graph`/`--list` with
    the shipped example configuration (whose keyed_groups reads kubehw_node), plus groups, keyed_groups and compose of a
    user's built from the annotation and the address, nor in a play that connects to the host and templates every
    variable the plugin set and every group name; each arrives as the literal string (a group name sanitised). Runs on the ansible-core of the
    stage: make integration (the pinned 2.19), make min-versions (the floor, 2.17) and make core-2.18."""
    import ansible.release

    planted_annotation = str(tmp_path / "ran-from-annotation")
    planted_address = str(tmp_path / "ran-from-address")
    mark = cluster.unique_name("unsafe")
    name = cluster.create_nodes([{"what": "unsafe", "labels": {"kubehw-it/inventory": mark},
                                  "capacity": {"cpu": "4", "pods": "110", "nvidia.com/gpu": "1"}}])[0]
    annotate(cluster, name, {"example.com/note": PLANTED % planted_annotation})
    set_addresses(cluster, name, [{"type": "InternalIP", "address": PLANTED % planted_address}])

    with open(EXAMPLE_CONFIG) as f:
        config = yaml.safe_load(f)
    config.update(kubeconfig=cluster.kubeconfig.split(os.pathsep)[0], label_selectors=["kubehw-it/inventory=" + mark],
                  cache_connection=str(tmp_path / "cache"))
    # the play reaches the host without ssh or sudo; the example's own keyed_groups stays, and a user's groups,
    # keyed_groups and compose built from the annotation and the address are added: group names and composed
    # variables made of cluster data must stay untrusted too
    config["compose"] = {"ansible_connection": "'local'", "ansible_become": "false",
                         "ansible_python_interpreter": "'%s'" % sys.executable,
                         "kubehw_it_note": "kubehw_node.annotations['example.com/note']",
                         "kubehw_it_address": "ansible_host"}
    config["groups"] = {"kubehw_it_noted": "kubehw_node.annotations['example.com/note'] is search('lookup')"}
    config["keyed_groups"] = list(config.get("keyed_groups") or []) + [
        {"key": "kubehw_node.annotations['example.com/note']", "prefix": "note"},
        {"key": "kubehw_node.addresses | map(attribute='address') | list", "prefix": "addr"}]
    path = tmp_path / "example.k8s_nodes.yml"
    path.write_text(yaml.safe_dump(config))

    proc = inventory(collections_path, tmp_path, str(path), "--graph")
    assert proc.returncode == 0 and name in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
    data, _stderr = listing(collections_path, tmp_path, str(path))
    variables = hostvars(data, name)
    assert variables["ansible_host"] == PLANTED % planted_address
    assert variables["kubehw_node"]["annotations"]["example.com/note"] == PLANTED % planted_annotation

    seen = tmp_path / "seen.json"
    plays = [{"name": "Connect to every node and template what the plugin set", "hosts": "all",
              "gather_facts": False, "tasks": [
                  {"name": "Reach the host", "ansible.builtin.ping": None},
                  {"name": "Write every variable of the plugin", "delegate_to": "localhost",
                   "ansible.builtin.copy": {
                       "dest": str(seen), "mode": "0600",
                       "content": "{{ hostvars[inventory_hostname] | dict2items | selectattr('key', 'match', "
                                  "'^(kubehw_|ansible_host$|extended_resources_static$|group_names$)') | items2dict "
                                  "| to_json }}"}},
                  {"name": "Template every group name", "ansible.builtin.debug": {
                      "msg": "{{ group_names | map('regex_replace', '^', 'group ') | list }}"}}]}]
    run = run_playbook(plays, str(tmp_path), inventory=str(path), collections=collections_path)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    written = json.loads(seen.read_text())
    assert written["ansible_host"] == PLANTED % planted_address
    assert written["kubehw_node"]["annotations"]["example.com/note"] == PLANTED % planted_annotation
    assert written["kubehw_node"]["addresses"] == [{"type": "InternalIP", "address": PLANTED % planted_address}]
    assert written["kubehw_it_note"] == PLANTED % planted_annotation
    assert written["kubehw_it_address"] == PLANTED % planted_address
    groups = written["group_names"]
    assert "kubehw_it_noted" in groups
    assert [g for g in groups if g.startswith("note_")] and [g for g in groups if g.startswith("addr_")], groups
    ran = [p for p in (planted_annotation, planted_address) if os.path.exists(p)]
    assert ran == [], "ansible-core %s ran cluster data as a template" % ansible.release.__version__


# the environment the example configuration's quick start exports
QUICK_START_ENV = {"ANSIBLE_INVENTORY_ENABLED": "kubehw.devices.k8s_nodes", "ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED": "true"}


def test_the_quick_start_fails_on_a_refused_token_with_the_plugins_line(cluster, collections_path, tmp_path):
    """With the quick start's environment (and not the harness's own ANSIBLE_INVENTORY_UNPARSED_FAILED), the
    plugin's line stops the run before any play; without ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED, Ansible goes on
    with an empty inventory and only the site playbook's own inventory check stops it."""
    url, ca = cluster.server()
    config = write_config(tmp_path, "revoked", host=url, ca_cert=ca, api_key="revoked-token-of-this-test")
    without_harness = {"ANSIBLE_INVENTORY_UNPARSED_FAILED": None}
    lacking = run_playbook("kubehw.devices.site", str(tmp_path), inventory=config, collections=collections_path,
                           env=dict(without_harness, ANSIBLE_INVENTORY_ENABLED="kubehw.devices.k8s_nodes"))
    assert lacking.returncode != 0
    assert "PLAY [Check that the inventory names hosts to act on]" in lacking.stdout, lacking.output()
    assert "names no host in gpu_nodes or static_resource_nodes" in lacking.stdout, lacking.output()
    run = run_playbook("kubehw.devices.site", str(tmp_path), inventory=config, collections=collections_path,
                       env=dict(QUICK_START_ENV, **without_harness))
    one_line_failure(run, "answered 401 Unauthorized: its credentials were not accepted; fix api_key")
    assert "revoked-token-of-this-test" not in run.stdout + run.stderr
    assert "PLAY [" not in run.stdout          # no play ran over an empty inventory
    # one message of the plugin's, not a parser's attempt per inventory plugin Ansible has
    assert "Plugin configuration YAML file" not in run.stderr and "Invalid host pattern" not in run.stderr


def test_the_example_group_vars_choose_the_amd_and_intel_presets(cluster, collections_path, tmp_path, fleet):
    example = os.path.dirname(EXAMPLE_CONFIG)
    shutil.copytree(os.path.join(example, "group_vars"), str(tmp_path / "group_vars"))
    config = fleet_config(cluster, tmp_path, fleet)
    data, _stderr = listing(collections_path, tmp_path, config)
    n = fleet["names"]
    assert hostvars(data, n["amd"])["accelerator_node_preset"] == "amd"
    assert hostvars(data, n["intel"])["accelerator_node_preset"] == "intel_gpu"
    assert "accelerator_node_preset" not in hostvars(data, n["nvnfd"])       # the roles' NVIDIA default


def test_k8s_auth_variables_of_an_awx_kubernetes_credential(cluster, collections_path, tmp_path, fleet):
    """A configuration with no connection option, and what AWX's bearer-token credential injects."""
    url, ca = cluster.server()
    user, token = cluster.service_account(cluster.unique_name("sa"))
    namespace = user.split(":")[2]
    cluster.bind([{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}],
                 [{"kind": "ServiceAccount", "name": user.split(":")[3], "namespace": namespace}])
    config = write_config(tmp_path, "awx", label_selectors=[fleet["selector"]])
    env = {"K8S_AUTH_HOST": url, "K8S_AUTH_API_KEY": token, "K8S_AUTH_SSL_CA_CERT": ca, "K8S_AUTH_VERIFY_SSL": "True"}
    data, stderr = listing(collections_path, tmp_path, config, env=env)
    assert hosts_of(data, "gpu_nodes") == set(fleet["names"][k] for k in ("nvnfd", "nvgfd", "amd", "intel"))
    assert token not in json.dumps(data) + stderr


# -- site.yml with only the plugin as inventory ------------------------------------------------------------------------

with open(DEMO_CONFIG_PATH) as _f:
    DEMO_CLUSTER = yaml.safe_load(_f)
for _node in DEMO_CLUSTER["nodes"]:
    if _node["name"] == "dongle-node-1":
        # what the hand-written demo inventory says of this host (extended_resources_static), said on the node
        _node["annotations"] = {STATIC_ANNOTATION: json.dumps({"example.com/dongle": 2})}


def site(collections_path, tmp_path, inventory_path, kubeconfig):
    proc = run_playbook("kubehw.devices.site", str(tmp_path), inventory=inventory_path, collections=collections_path,
                        kubeconfig=kubeconfig, extra_vars={"kubehw_kubeconfig": kubeconfig}, timeout=600)
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-3000:]
    plays = {}
    for block in proc.stdout.split("\nPLAY [")[1:]:
        title = block.split("]", 1)[0]
        plays[title] = set(re.findall(r"^(?:ok|changed): \[([^\]]+)\]", block, re.M))
    recap = dict((host, counts["changed"]) for host, counts in proc.recap().items())
    return plays, recap, proc


@pytest.mark.node_config(DEMO_CLUSTER)
@pytest.mark.timeout(900)
def test_site_with_only_the_plugin_reaches_the_hand_written_inventorys_nodes(cluster, collections_path, tmp_path):
    cluster.require_controlled("the demo inventories name the configured demo nodes and their GPUs")
    for name in ("kubehw-device-plugins", "kubehw-dra-drivers"):
        read_out(cluster.core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
                                               _preload_content=False))
    # the plugin first, on the fresh cluster: it must do the work (roll out, advertise), not find it done
    by_plugin, recap_plugin, proc = site(collections_path, tmp_path, DEMO_PLUGIN_INVENTORY, cluster.kubeconfig)
    # localhost: the playbook's inventory check, which changes nothing
    assert set(recap_plugin) == {"gpu-node-1", "gpu-node-2", "dongle-node-1", "localhost"}, proc.stdout[-3000:]
    assert recap_plugin["localhost"] == 0
    assert recap_plugin["dongle-node-1"] >= 1 and recap_plugin["gpu-node-1"] >= 1, proc.stdout[-3000:]
    capacity = dict((n["metadata"]["name"], n["status"].get("capacity") or {}) for n in json.loads(
        cluster.core.list_node(_preload_content=False).data)["items"])
    assert capacity["dongle-node-1"].get("example.com/dongle") == "2"
    by_hand, recap_hand, proc = site(collections_path, tmp_path, DEMO_INVENTORY, cluster.kubeconfig)
    assert set(recap_hand) == set(recap_plugin)
    assert by_plugin == by_hand, (by_plugin, by_hand)
    # what the plugin did the hand-written inventory finds done
    assert recap_hand == dict((host, 0) for host in recap_hand), proc.stdout[-3000:]
