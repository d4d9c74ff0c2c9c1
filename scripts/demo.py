# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""`make demo`: site.yml against a real Kubernetes control plane, then a readable summary.

Starts kube-apiserver, etcd, kube-controller-manager and kube-scheduler (tests/support/local_cluster.py, from the
binaries tests/support/k8s_binaries.py finds) with state under .cache/demo-control-plane, registers the three nodes of
tests/support/node_configs/demo.yaml through the kubelet stand-in of tests/support/kubelet.py (no container runs: the
stand-in does a kubelet's API-side duties), declares the dongle node's static resources in
its kubehw.devices/static-resources annotation, reads the inventory from the cluster with the kubehw.devices.k8s_nodes
plugin (playbooks/inventory/demo_k8s_nodes; the hand-written playbooks/inventory/demo/hosts.yml is not used), runs
`ansible-playbook kubehw.devices.site` with it, says per node what the run did there (from the modules' results),
shows per node what is advertised and allocatable and how the device-plugin rollout went, then proves scheduling with
two pods: one asking for 2 dongles (bound to the dongle node) and one asking for more than any
node has (Pending, with the scheduler's reason). Then the same GPU nodes are served through Dynamic Resource
Allocation: they are labelled for DRA, site.yml runs again and the plugin reads the label into accelerator_node_allocation=dra
(the device plugin is removed, NVIDIA's DRA driver preset rolled out), the devices each node published are listed, and a pod whose
ResourceClaimTemplate asks for one GPU is scheduled with its claim allocated. Stops everything it started.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tests.support.playbook_runner import collections_path, run_inventory, run_playbook  # noqa: E402  (test equipment)

# The inventory is read from the cluster by the kubehw.devices.k8s_nodes inventory plugin.
INVENTORY_REL = "playbooks/inventory/demo_k8s_nodes/demo.k8s_nodes.yml"
INVENTORY = os.path.join(ROOT, *INVENTORY_REL.split("/"))
STATIC_ANNOTATION = "kubehw.devices/static-resources"
DONGLE_NODE = "dongle-node-1"
DONGLE = "example.com/dongle"
GPU = "nvidia.com/gpu"
GPU_NODES = ("gpu-node-1", "gpu-node-2")
ALLOCATION_LABEL = "kubehw.devices/gpu-allocation"
# the main DeviceClass of the nvidia DRA driver preset (kubehw.devices.dra_driver_deploy)
DRA_DEVICE_CLASS = "gpu.nvidia.com"
# the roles' default namespaces of the device plugin and of the DRA driver; playbooks/rbac.yml creates them
NAMESPACES = ("kubehw-device-plugins", "kubehw-dra-drivers")
WIDTH = 78


def say(text=""):
    print(text, flush=True)


def rule(title):
    say("")
    say(("== %s " % title).ljust(WIDTH, "="))


def start_cluster():
    """A control plane of the demo's own, with the demo nodes registered by the kubelet stand-in and schedulable."""
    from tests.support.local_cluster import LocalCluster, LocalClusterError
    from tests.support.node_configs import DEMO_CONFIG_PATH

    try:
        return LocalCluster("demo", node_config=DEMO_CONFIG_PATH).start()
    except LocalClusterError as exc:
        raise SystemExit("make demo: %s" % exc)


def collections(workdir):
    """The collections path make demo's environment names (.cache/collections, where make setup linked this
    checkout), else one made here."""
    return os.environ.get("ANSIBLE_COLLECTIONS_PATH") or collections_path(os.path.join(workdir, "collections"))


def show_inventory(kubeconfig, workdir):
    """The inventory the plugin reads from the cluster: its graph, and the hosts of the groups site.yml uses."""
    rule("Inventory, read from the cluster")
    say("No hand-written inventory: the kubehw.devices.k8s_nodes inventory plugin lists the cluster's nodes and")
    say("groups them (gpu_nodes from the NFD PCI labels, static_resource_nodes from the annotation).")
    say("$ ansible-inventory -i %s --graph" % INVENTORY_REL)
    # the inventory plugin reaches the cluster as the modules do: here through K8S_AUTH_KUBECONFIG
    graph = run_inventory(INVENTORY, ["--graph"], workdir, collections(workdir), kubeconfig)
    if graph.returncode != 0:
        say(graph.stderr[-3000:])
        raise SystemExit("the inventory plugin failed (exit %d)" % graph.returncode)
    say(graph.stdout.rstrip())
    listed = run_inventory(INVENTORY, ["--list"], workdir, collections(workdir), kubeconfig)
    if listed.returncode != 0:
        say(listed.stderr[-3000:])
        raise SystemExit("the inventory plugin failed (exit %d)" % listed.returncode)
    data = json.loads(listed.stdout)
    hosts = []
    for group in ("gpu_nodes", "static_resource_nodes"):
        for host in _group_hosts(data, group):
            if host not in hosts:
                hosts.append(host)
    return hosts


def _group_hosts(data, group):
    entry = data.get(group) or {}
    found = list(entry.get("hosts") or [])
    for child in entry.get("children") or []:
        found.extend(h for h in _group_hosts(data, child) if h not in found)
    return sorted(set(found))


def declare_static_resources(core):
    say("$ kubectl annotate node %s %s='{\"%s\": 2}'" % (DONGLE_NODE, STATIC_ANNOTATION, DONGLE))
    core.patch_node(DONGLE_NODE, {"metadata": {"annotations": {STATIC_ANNOTATION: json.dumps({DONGLE: 2})}}},
                    _preload_content=False)
    say("(the static resources of the dongle node, declared on the node: the plugin makes them its")
    say(" extended_resources_static, what the hand-written inventory said of it)")


def run_site(kubeconfig, workdir, extra=(), shown="", limit=None):
    say("$ ansible-playbook -i %s kubehw.devices.site%s" % (INVENTORY_REL, shown))
    run = run_playbook("kubehw.devices.site", workdir, inventory=INVENTORY, collections=collections(workdir),
                       kubeconfig=kubeconfig, env={"ANSIBLE_DISPLAY_SKIPPED_HOSTS": "0"},
                       extra_vars=dict({"kubehw_kubeconfig": kubeconfig}, **dict(extra)),
                       args=["--limit", limit] if limit else [], timeout=900)
    recap = run.stdout[run.stdout.rfind("PLAY RECAP"):] if "PLAY RECAP" in run.stdout else run.stdout[-3000:]
    say(recap.rstrip())
    if run.returncode != 0:
        say(run.stdout[-6000:])
        say(run.stderr[-3000:])
        raise SystemExit("site.yml failed (exit %d)" % run.returncode)
    return run.results


def _module_results(results):
    """Every result of the run, loop items included (a loop task's result lists them under `results`)."""
    for res in results:
        if res.get("_outcome") != "ok":
            continue
        items = res.get("results") if isinstance(res.get("results"), list) else [res]
        for item in items:
            if isinstance(item, dict):
                yield res, item


def node_report(results, hosts):
    """One line per inventory host: what site.yml did to its node, read from the modules' results.

    k8s_node_extended_resource results carry `nodes` (a list with `patch` per node), device_plugin_deploy
    results `daemonset`, `generation` and `nodes` (a dict per node with its plugin pod), resource_smoke_test
    results `pod` and `node`.
    """
    did = dict((host, []) for host in hosts)
    once = set()
    seen = {}  # node -> extended resources allocatable, as extended_resource_info last read them
    for _res, item in _module_results(results):
        if isinstance(item.get("nodes"), list) and "changed_nodes" not in item:  # extended_resource_info
            for node in item["nodes"]:
                if isinstance(node, dict) and extended(node.get("allocatable")):
                    seen[node.get("name")] = extended(node.get("allocatable"))
    for res, item in _module_results(results):
        nodes = item.get("nodes")
        if isinstance(nodes, list) and "changed_nodes" in item:  # k8s_node_extended_resource
            for node in nodes:
                name = node.get("name")
                if name not in did:
                    continue
                if node.get("failed"):
                    did[name].append("advertising FAILED: %s" % node.get("msg"))
                elif node.get("changed"):
                    keys = []
                    for op in node.get("patch") or []:
                        path = op.get("path") or ""
                        if op.get("op") in ("add", "replace", "remove") and path.startswith("/status/capacity/"):
                            key = path[len("/status/capacity/"):].replace("~1", "/").replace("~0", "~")
                            if key not in keys:
                                keys.append(key)
                    capacity = node.get("capacity") or {}
                    did[name].append("advertised %s (node status patched)" % ", ".join(
                        "%s=%s" % (k, capacity[k]) if k in capacity else "%s removed" % k for k in keys))
                else:
                    asked = ((item.get("invocation") or {}).get("module_args") or {}).get("resources") or {}
                    held = dict((k, v) for k, v in (node.get("capacity") or {}).items() if k in asked)
                    did[name].append("nothing to do: the node already advertised %s" % (
                        listing(held) if held else "what the inventory asks"))
            if item.get("changed") and set(n.get("name") for n in nodes) - set([res.get("_host")]):
                once.add(res.get("_host"))
        elif "daemonset" in item and isinstance(nodes, dict):  # device_plugin_deploy
            ds = item.get("daemonset") or {}
            meta = ds.get("metadata") or {}
            label = "device plugin %s/%s" % (meta.get("namespace"), meta.get("name"))
            generation = item.get("generation") or {}
            if not item.get("changed"):
                how = "%s already as wanted: nothing to do" % label
            elif generation.get("before") is None:
                how = "%s rolled out (DaemonSet created)" % label
            else:
                how = "%s rolled out (DaemonSet updated: %s)" % (label, ", ".join(item.get("changed_paths") or []) or "changed")
            for name, info in nodes.items():
                if name not in did:
                    continue
                pod = "its pod %s %s here" % (info.get("pod"), "is ready" if info.get("pod_ready") else "is not ready")
                allocatable = seen.get(name) or dict((k, v) for k, v in (info.get("allocatable") or {}).items()
                                                     if v is not None)
                did[name].append("%s; %s; %s" % (how, pod, "%s allocatable" % listing(allocatable) if allocatable
                                                 else "its resource not allocatable yet"))
            if item.get("changed") and set(nodes) - set([res.get("_host")]):
                once.add(res.get("_host"))
        elif "pod" in item and item.get("node") in did:  # resource_smoke_test
            did[item["node"]].append("smoke-test pod %s scheduled here (phase %s)" % (
                (item.get("pod") or {}).get("metadata", {}).get("name", "?") if isinstance(item.get("pod"), dict)
                else item.get("pod"), item.get("phase") or "unknown"))
    lines = []
    width = max(len(h) for h in hosts) if hosts else 0
    for host in hosts:
        lines.append("%s  %s" % (host.ljust(width), "; ".join(did[host]) or "no change: no task acted on this node"))
    return lines, sorted(once)


def show_node_report(results, hosts):
    rule("What site.yml did, per node")
    lines, once = node_report(results, hosts)
    for line in lines:
        say(line)
    if once:
        say("(The recap counts a task that runs once for several nodes, such as the DaemonSet rollout, as a")
        say(" change of the host it ran for (%s) only: a node with changed=0 may still have been served." % ", ".join(once))
        say(" The lines above say what each node got.)")


def extended(resources):
    return dict((k, v) for k, v in (resources or {}).items() if "/" in k)


def listing(resources):
    return ", ".join("%s=%s" % kv for kv in sorted(extended(resources).items())) or "-"


def show_nodes(core, apps):
    rule("Nodes: advertised (capacity) and allocatable extended resources")
    nodes = json.loads(core.list_node(_preload_content=False).data)["items"]
    say("%-16s %-6s %-34s %s" % ("NODE", "READY", "ADVERTISED", "ALLOCATABLE"))
    for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
        status = node.get("status") or {}
        ready = [c["status"] for c in status.get("conditions", []) if c["type"] == "Ready"]
        say("%-16s %-6s %-34s %s" % (node["metadata"]["name"], (ready or ["?"])[0],
                                     listing(status.get("capacity")), listing(status.get("allocatable"))))
    rule("Device-plugin rollout")
    for ds in json.loads(apps.list_daemon_set_for_all_namespaces(_preload_content=False).data)["items"]:
        st = ds.get("status") or {}
        say("%s/%s  generation %s (observed %s): desired %s, updated %s, available %s" % (
            ds["metadata"]["namespace"], ds["metadata"]["name"], ds["metadata"].get("generation"),
            st.get("observedGeneration"), st.get("desiredNumberScheduled", 0),
            st.get("updatedNumberScheduled", 0), st.get("numberAvailable", 0)))
        pods = json.loads(core.list_namespaced_pod(
            ds["metadata"]["namespace"], _preload_content=False).data)["items"]
        for pod in pods:
            owners = [o.get("name") for o in pod["metadata"].get("ownerReferences", [])]
            if ds["metadata"]["name"] in owners:
                ready = [c["status"] for c in pod["status"].get("conditions", []) if c["type"] == "Ready"]
                say("  pod %-40s on %-12s %s ready=%s" % (pod["metadata"]["name"], pod["spec"].get("nodeName"),
                                                          pod["status"].get("phase"), (ready or ["False"])[0]))


def demo_pod(core, name, count):
    body = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": "kubehw-demo"}},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"limits": {DONGLE: str(count)}}}]}}
    core.create_namespaced_pod("default", body, _preload_content=False)


def outcome(core, name, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pod = json.loads(core.read_namespaced_pod(name, "default", _preload_content=False).data)
        if pod["spec"].get("nodeName"):
            return "bound to %s" % pod["spec"]["nodeName"], pod
        for cond in pod.get("status", {}).get("conditions", []):
            if cond["type"] == "PodScheduled" and cond["status"] == "False":
                return "Pending: %s" % cond.get("message"), pod
        time.sleep(0.2)
    return "undecided after %ss" % timeout, None


def show_scheduling(core):
    rule("Scheduling: pods that request example.com/dongle")
    demo_pod(core, "wants-2-dongles", 2)
    demo_pod(core, "wants-3-dongles", 3)
    for name, count in (("wants-2-dongles", 2), ("wants-3-dongles", 3)):
        text = outcome(core, name)[0]
        say("pod %-16s limits %s=%d  ->  %s" % (name, DONGLE, count, text))
    for name in ("wants-2-dongles", "wants-3-dongles"):
        core.delete_namespaced_pod(name, "default", grace_period_seconds=0, _preload_content=False)
    say("(both demonstration pods deleted)")


def ensure_namespaces(core):
    existing = set(n["metadata"]["name"] for n in json.loads(core.list_namespace(_preload_content=False).data)["items"])
    for name in NAMESPACES:
        if name not in existing:
            core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
                                  _preload_content=False)
    say("(namespaces %s created first, as playbooks/rbac.yml does on a real cluster)" % " and ".join(NAMESPACES))


def move_to_dra(core, kubeconfig, workdir):
    rule("The same GPU nodes, served through DRA")
    say("$ kubectl label node --overwrite %s %s=dra" % (" ".join(GPU_NODES), ALLOCATION_LABEL))
    for node in GPU_NODES:
        core.patch_node(node, {"metadata": {"labels": {ALLOCATION_LABEL: "dra"}}}, _preload_content=False)
    say("(the inventory plugin reads the label: these hosts are now in dra_gpu_nodes with")
    say(" accelerator_node_allocation=dra, so site.yml needs no inventory change for the move)")
    extra = [("accelerator_node_device_plugin_conflict", "remove"), ("accelerator_node_dra_extended_resource_name", GPU)]
    started = time.monotonic()
    results = run_site(kubeconfig, workdir, extra, " --limit gpu_nodes " + " ".join("-e %s=%s" % kv for kv in extra),
                       limit="gpu_nodes")
    say("site.yml took %.0fs" % (time.monotonic() - started))
    driver = None
    for _res, item in _module_results(results):
        if "device_classes" in item and item.get("driver"):  # dra_driver_deploy
            driver = item
            meta = (item.get("daemonset") or {}).get("metadata") or {}
            say("DRA driver %s: DaemonSet %s/%s %s; DeviceClasses %s; site.yml waited until %s" % (
                item["driver"], meta.get("namespace"), meta.get("name"),
                "rolled out" if item.get("changed") else "already as wanted",
                ", ".join(item.get("device_classes") or []) or "-",
                ", ".join("%s published %d" % (n.get("name"), n.get("device_count", len(n.get("devices") or [])))
                          for n in item.get("nodes") or []) or "-"))
        elif "pod" in item and item.get("node") in GPU_NODES:  # resource_smoke_test (claim-template mode)
            say("smoke-test pod's claim (ResourceClaimTemplate, 1 device of DeviceClass %s) was allocated %s on %s"
                % ("gpu.nvidia.com", ", ".join("%(driver)s/%(pool)s/%(device)s" % r for r in item.get("allocation") or [])
                   or "-", item.get("node")))
    return driver


def day_two(core, kubeconfig, workdir):
    """A node that lost what site.yml advertised on it (as a re-registered node does), found by the drift playbook,
    which writes nothing, then repaired by it."""
    rule("Day two: drift found and repaired")
    say("$ kubectl patch node %s --subresource=status --type=json -p '[{\"op\": \"remove\", \"path\": "
        "\"/status/capacity/%s\"}]'" % (DONGLE_NODE, DONGLE.replace("/", "~1")))
    core.patch_node_status(DONGLE_NODE, [{"op": "remove", "path": "/status/capacity/%s" % DONGLE.replace("/", "~1")}],
                           _preload_content=False)
    say("(what a node registered anew looks like: its Node object has what its kubelet reports, not what was written)")
    for repair in (False, True):
        shown = " -e kubehw_repair=true" if repair else ""
        say("$ ansible-playbook -i %s kubehw.devices.drift --limit static_resource_nodes%s" % (INVENTORY_REL, shown))
        run = run_playbook("kubehw.devices.drift", workdir, inventory=INVENTORY, collections=collections(workdir),
                           kubeconfig=kubeconfig, args=["--limit", "static_resource_nodes"],
                           extra_vars=dict({"kubehw_kubeconfig": kubeconfig}, **({"kubehw_repair": True} if repair else {})))
        for message in run.printed_messages():
            say("  " + message)
        say("(exit status %d%s)" % (run.returncode, ": drift, nothing written" if run.returncode == 2 else ""))
        if run.returncode != (0 if repair else 2):
            say(run.stdout[-6000:])
            raise SystemExit("drift.yml exited %d" % run.returncode)


def show_daemonsets(apps):
    names = ["%s/%s" % (d["metadata"]["namespace"], d["metadata"]["name"])
             for d in json.loads(apps.list_daemon_set_for_all_namespaces(_preload_content=False).data)["items"]]
    say("DaemonSets now: %s (the device plugin's was deleted: accelerator_node_device_plugin_conflict=remove)"
        % (", ".join(names) or "none"))


def show_dra_devices(custom):
    rule("DRA: devices published per node (ResourceSlices)")
    slices = custom.list_cluster_custom_object("resource.k8s.io", "v1", "resourceslices")["items"]
    per_node = {}
    for item in slices:
        spec = item.get("spec") or {}
        entry = per_node.setdefault(spec.get("nodeName"), [])
        entry.extend((spec.get("driver"), spec.get("pool", {}).get("name"), d["name"]) for d in spec.get("devices") or [])
    for node in sorted(per_node):
        devices = per_node[node]
        drivers = sorted(set(d[0] for d in devices))
        say("%-12s %d devices published by %s: %s" % (node, len(devices), ", ".join(drivers),
                                                      ", ".join(d[2] for d in devices)))


def show_claim(core, custom, device_class):
    rule("DRA: a pod whose claim is allocated")
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "one-gpu"},
                "spec": {"spec": {"devices": {"requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": device_class, "count": 1}}]}}}}
    custom.create_namespaced_custom_object("resource.k8s.io", "v1", "default", "resourceclaimtemplates", template)
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "claims-one-gpu", "labels": {"app.kubernetes.io/part-of": "kubehw-demo"}},
           "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                    "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10",
                                    "resources": {"claims": [{"name": "gpu"}]}}]}}
    core.create_namespaced_pod("default", pod, _preload_content=False)
    text, bound = outcome(core, "claims-one-gpu")
    say("pod claims-one-gpu (ResourceClaimTemplate one-gpu: 1 device of class %s)  ->  %s" % (device_class, text))
    if bound:
        bound = json.loads(core.read_namespaced_pod("claims-one-gpu", "default", _preload_content=False).data)
        for status in (bound.get("status") or {}).get("resourceClaimStatuses") or []:
            claim = custom.get_namespaced_custom_object("resource.k8s.io", "v1", "default", "resourceclaims",
                                                        status["resourceClaimName"])
            allocation = (claim.get("status") or {}).get("allocation") or {}
            devices = ["%s/%s/%s" % (r["driver"], r["pool"], r["device"])
                       for r in (allocation.get("devices") or {}).get("results") or []]
            holders = ["%s/%s" % (r.get("resource"), r.get("name")) for r in (claim.get("status") or {}).get("reservedFor") or []]
            say("claim %s allocated %s, reserved for %s" % (status["resourceClaimName"], ", ".join(devices) or "nothing",
                                                            ", ".join(holders) or "nobody"))
    core.delete_namespaced_pod("claims-one-gpu", "default", grace_period_seconds=0, _preload_content=False)
    custom.delete_namespaced_custom_object("resource.k8s.io", "v1", "default", "resourceclaimtemplates", "one-gpu")
    say("(pod and template deleted; the claim generated for the pod goes with it)")


def main():
    from kubernetes import client, config

    rule("kubehw.devices demo")
    say("This demo runs against a REAL Kubernetes v1.36 control plane (kube-apiserver, etcd, controller-manager,")
    say("scheduler) started on 127.0.0.1 for its length, with stand-in kubelets: two GPU nodes with 4 and 8 GPUs")
    say("and one node with 2 USB dongles. The stand-ins report the nodes Ready, mark pods running and register")
    say("the device plugin's and DRA driver's devices; no container runs and no host is prepared.")
    say("The inventory is not written by hand: the kubehw.devices.k8s_nodes inventory plugin reads it from")
    say("the cluster. First the GPUs are served by the device plugin, then the same nodes through DRA.")
    workdir = tempfile.mkdtemp(prefix="kubehw-demo-")
    local = start_cluster()
    try:
        kubeconfig = local.kubeconfig
        api = config.new_client_from_config(config_file=kubeconfig)
        core, apps, custom = client.CoreV1Api(api), client.AppsV1Api(api), client.CustomObjectsApi(api)
        say("API server: %s (kube-apiserver %s)" % (api.configuration.host, client.VersionApi(api).get_code().git_version))
        declare_static_resources(core)
        hosts = show_inventory(kubeconfig, workdir)
        rule("site.yml")
        ensure_namespaces(core)
        started = time.monotonic()
        results = run_site(kubeconfig, workdir)
        say("site.yml took %.0fs" % (time.monotonic() - started))
        show_node_report(results, hosts)
        show_nodes(core, apps)
        show_scheduling(core)
        driver = move_to_dra(core, kubeconfig, workdir)
        show_daemonsets(apps)
        show_dra_devices(custom)
        show_claim(core, custom, ((driver or {}).get("device_classes") or [DRA_DEVICE_CLASS])[0])
        day_two(core, kubeconfig, workdir)
    finally:
        local.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    rule("Against a real cluster")
    say("Let the plugin read the inventory from your cluster (playbooks/inventory/k8s_nodes.yml, docs/inventory.md),")
    say("or write one like playbooks/inventory/example/hosts.yml (groups gpu_nodes and static_resource_nodes):")
    say("  ansible-inventory -i my.k8s_nodes.yml --graph")
    say("  ansible-playbook -i my.k8s_nodes.yml kubehw.devices.site")
    say("  ansible-playbook -i my.k8s_nodes.yml kubehw.devices.drift     # on a schedule: exit 2 on drift (docs/drift.md)")
    say("Moving node pools from the device plugin to DRA one at a time: docs/dra.md (migration).")
    say("The demo's control plane has been stopped and its state removed.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
