# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""`make demo`: site.yml against the bundled SIMULATED cluster, then a readable summary.

Starts tests/simcluster with tests/simcluster/examples/demo.yaml, runs
`ansible-playbook kubehw.devices.site` with playbooks/inventory/demo, shows per node what is
advertised and allocatable and how the device-plugin rollout went, then proves scheduling with
two pods: one asking for 2 dongles (bound to the dongle node) and one asking for more than any
node has (Pending, with the scheduler's reason). Stops everything it started.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(ROOT, "tests", "simcluster", "examples", "demo.yaml")
INVENTORY = os.path.join(ROOT, "playbooks", "inventory", "demo", "hosts.yml")
DONGLE = "example.com/dongle"
GPU = "nvidia.com/gpu"
WIDTH = 78


def say(text=""):
    print(text, flush=True)


def rule(title):
    say("")
    say(("== %s " % title).ljust(WIDTH, "="))


def start_cluster(workdir):
    kubeconfig = os.path.join(workdir, "kubeconfig")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.simcluster", "--config", CONFIG, "--write-kubeconfig", kubeconfig],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 30
    url = None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith("https://") or line.startswith("http://"):
            url = line.strip()
        if os.path.exists(kubeconfig) and url:
            return proc, url, kubeconfig
    proc.kill()
    raise SystemExit("the simulated cluster did not start")


def run_site(kubeconfig, workdir):
    env = dict(os.environ)
    for key in list(env):
        if key.startswith("K8S_AUTH_") or key == "KUBECONFIG":
            del env[key]
    env.setdefault("ANSIBLE_COLLECTIONS_PATH", os.path.join(ROOT, ".cache", "collections"))
    env["ANSIBLE_NOCOLOR"] = "1"
    env["ANSIBLE_DISPLAY_SKIPPED_HOSTS"] = "0"
    env["ANSIBLE_LOCAL_TEMP"] = os.path.join(workdir, "tmp")
    playbook = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    if not os.path.exists(playbook):
        playbook = "ansible-playbook"
    cmd = [playbook, "-i", INVENTORY, "kubehw.devices.site", "-e", "kubehw_kubeconfig=%s" % kubeconfig]
    say("$ ansible-playbook -i playbooks/inventory/demo/hosts.yml kubehw.devices.site")
    proc = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=900, check=False)
    recap = proc.stdout[proc.stdout.rfind("PLAY RECAP"):] if "PLAY RECAP" in proc.stdout else proc.stdout[-3000:]
    say(recap.rstrip())
    if proc.returncode != 0:
        say(proc.stdout[-6000:])
        say(proc.stderr[-3000:])
        raise SystemExit("site.yml failed (exit %d)" % proc.returncode)


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


def main():
    from kubernetes import client, config

    rule("kubehw.devices demo")
    say("This demo runs against a SIMULATED Kubernetes cluster (tests/simcluster), started on")
    say("127.0.0.1 for the length of the demo: two GPU nodes with 4 and 8 simulated GPUs and one")
    say("node with 2 USB dongles. Its kubelets, DaemonSet controller and scheduler are simulations;")
    say("no container runs and no host is prepared (accelerator_node_host_setup is off).")
    workdir = tempfile.mkdtemp(prefix="kubehw-demo-")
    os.makedirs(os.path.join(workdir, "tmp"))
    sim, url, kubeconfig = start_cluster(workdir)
    try:
        say("Simulated API server: %s" % url)
        rule("site.yml")
        started = time.monotonic()
        run_site(kubeconfig, workdir)
        say("site.yml took %.0fs" % (time.monotonic() - started))
        api = config.new_client_from_config(config_file=kubeconfig)
        core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
        show_nodes(core, apps)
        show_scheduling(core)
    finally:
        sim.send_signal(signal.SIGTERM)
        try:
            sim.wait(timeout=10)
        except subprocess.TimeoutExpired:
            sim.kill()
    rule("Against a real cluster")
    say("Write an inventory like playbooks/inventory/example/hosts.yml (groups gpu_nodes and")
    say("static_resource_nodes), then run the same playbook:")
    say("  ansible-playbook -i my-inventory.yml kubehw.devices.site -e kubehw_kubeconfig=~/.kube/config")
    say("The simulated cluster has been stopped.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
