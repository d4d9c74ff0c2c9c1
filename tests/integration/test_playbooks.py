# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Site playbooks end to end on the simulated cluster of `make demo`.

site.yml in check mode (no write), for real, a second time (changed=0, no write), verify.yml,
teardown.yml (node status as before site.yml); the same run the way AWX runs it (ansible-runner,
credential in K8S_AUTH_* variables) with the least-privilege token; and that token without the
nodes/status permission failing with a message that names it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import glob
import json
import os
import re
import subprocess
import sys
import time

import pytest
import yaml

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INVENTORY = os.path.join(REPO_ROOT, "playbooks", "inventory", "demo", "hosts.yml")
TOKEN = "kubehw-automation-test-token"
SA_USER = "system:serviceaccount:kubehw:automation"
with open(os.path.join(REPO_ROOT, "tests", "simcluster", "examples", "demo.yaml")) as _f:
    CONFIG = yaml.safe_load(_f)
CONFIG["tokens"] = [{"token": TOKEN, "user": SA_USER,
                     "groups": ["system:serviceaccounts", "system:serviceaccounts:kubehw", "system:authenticated"]}]
RECAP = re.compile(r"^(\S+)\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)

pytestmark = pytest.mark.simcluster_config(CONFIG)


def playbook_env(collections_path, tmp_path, extra=None):
    env = dict((k, v) for k, v in os.environ.items()
               if not (k.startswith("K8S_AUTH_") or k.startswith("ANSIBLE_") or k == "KUBECONFIG"))
    env.update(ANSIBLE_COLLECTIONS_PATH=collections_path, ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"), ANSIBLE_RETRY_FILES_ENABLED="0")
    env.update(extra or {})
    return env


def play(collections_path, tmp_path, playbook, kubeconfig=None, check=False, env=None, extra_vars=None):
    cmd = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", INVENTORY,
           "kubehw.devices.%s" % playbook]
    if not os.path.exists(cmd[0]):
        cmd[0] = "ansible-playbook"
    if kubeconfig:
        cmd += ["-e", "kubehw_kubeconfig=%s" % kubeconfig]
    for key, value in (extra_vars or {}).items():
        cmd += ["-e", json.dumps({key: value})]
    if check:
        cmd.append("--check")
    proc = subprocess.run(cmd, cwd=str(tmp_path), env=playbook_env(collections_path, tmp_path, env),
                          capture_output=True, text=True, timeout=600, check=False)
    recap = dict((m.group(1), dict(ok=int(m.group(2)), changed=int(m.group(3)), failed=int(m.group(5))))
                 for m in RECAP.finditer(proc.stdout))
    return proc, recap


def node_statuses(cluster):
    """Every node's full status, minus the heartbeat times the kubelet moves on its own."""
    nodes = json.loads(cluster.core.list_node(_preload_content=False).data)["items"]
    result = {}
    for node in nodes:
        status = copy.deepcopy(node.get("status") or {})
        for cond in status.get("conditions") or []:
            cond.pop("lastHeartbeatTime", None)
        result[node["metadata"]["name"]] = status
    return result


def test_site_check_run_rerun_verify_teardown(cluster, collections_path, tmp_path):
    cluster.require_simulated("the demo inventory names simulated nodes and their simulated GPUs")
    before = node_statuses(cluster)

    mark = cluster.mark()
    proc, recap = play(collections_path, tmp_path, "site", cluster.kubeconfig, check=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert cluster.writes(mark) == [], "check mode wrote: %r" % cluster.writes(mark)
    assert recap["dongle-node-1"]["changed"] == 1 and recap["gpu-node-1"]["changed"] == 1

    proc, recap = play(collections_path, tmp_path, "site", cluster.kubeconfig)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    after_site = node_statuses(cluster)
    assert after_site["dongle-node-1"]["capacity"]["example.com/dongle"] == "2"
    assert after_site["dongle-node-1"]["allocatable"]["example.com/dongle"] == "2"
    assert after_site["gpu-node-1"]["allocatable"]["nvidia.com/gpu"] == "4"
    assert after_site["gpu-node-2"]["allocatable"]["nvidia.com/gpu"] == "8"
    # the plugin's resource is the kubelet's business: site.yml never patched GPU nodes itself
    assert not [w for w in cluster.writes(mark) if "/nodes/gpu-node" in w["path"]]

    mark = cluster.mark()
    proc, recap = play(collections_path, tmp_path, "site", cluster.kubeconfig)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert all(host["changed"] == 0 for host in recap.values()), recap
    # the only writes of a second run are the smoke-test pod's create and delete
    writes = [(w["method"], w["path"]) for w in cluster.writes(mark)]
    assert all("/pods" in write[1] for write in writes), writes
    assert sorted(write[0] for write in writes) == ["DELETE", "POST"], writes

    proc = play(collections_path, tmp_path, "verify", cluster.kubeconfig)[0]
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "dongle-node-1: Ready=True advertised={'example.com/dongle': '2'}" in proc.stdout
    assert "gpu-node-2: Ready=True advertised={'nvidia.com/gpu': '8'}" in proc.stdout

    proc, recap = play(collections_path, tmp_path, "teardown", cluster.kubeconfig)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert cluster.apps.list_daemon_set_for_all_namespaces().items == []
    # let the simulated kubelet run one status sync, then the nodes must be as before site.yml
    time.sleep(2.5 * CONFIG["sync_interval"])
    assert node_statuses(cluster) == before


def apply_rbac(collections_path, tmp_path, kubeconfig):
    proc, recap = play(collections_path, tmp_path, "rbac", kubeconfig)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    return recap


def credential_env(cluster):
    """What AWX's Kubernetes bearer-token credential injects."""
    return {"K8S_AUTH_HOST": cluster.sim.url, "K8S_AUTH_API_KEY": TOKEN,
            "K8S_AUTH_SSL_CA_CERT": cluster.sim.ca_cert_path, "K8S_AUTH_VERIFY_SSL": "True"}


def test_site_through_ansible_runner_with_least_privilege_token(cluster, collections_path, tmp_path):
    cluster.require_simulated("the token is one the simulated cluster is configured with")
    import ansible_runner

    apply_rbac(collections_path, tmp_path, cluster.kubeconfig)
    private = tmp_path / "runner"
    (private / "env").mkdir(parents=True)
    (private / "inventory").mkdir()
    with open(INVENTORY) as f:
        (private / "inventory" / "hosts.yml").write_text(f.read())
    envvars = dict(credential_env(cluster), ANSIBLE_COLLECTIONS_PATH=collections_path, ANSIBLE_NOCOLOR="1")
    mark = cluster.mark()
    result = ansible_runner.run(private_data_dir=str(private), project_dir=REPO_ROOT,
                                playbook="playbooks/site.yml", envvars=envvars, quiet=True,
                                extravars={"accelerator_node_wait_timeout": 120}, timeout=600)
    stdout = result.stdout.read()
    assert result.status == "successful" and result.rc == 0, stdout[-5000:]
    artifacts = private / "artifacts" / result.config.ident
    assert (artifacts / "status").read_text() == "successful"
    events = [json.loads(open(p).read()) for p in glob.glob(str(artifacts / "job_events" / "*.json"))]
    module_results = [e["event_data"] for e in events if e.get("event") == "runner_on_ok"]
    used = set(e.get("resolved_action") or e.get("task_action") for e in module_results)
    assert "kubehw.devices.device_plugin_deploy" in used and "kubehw.devices.k8s_node_extended_resource" in used
    assert result.stats["changed"]["dongle-node-1"] == 1
    # every request came from the automation identity, and no task output shows its token
    # (the runner's own record of the environment it was given, artifacts/*/command, is AWX's business)
    users = set(r.get("user") for r in cluster.requests(mark))
    assert users == {SA_USER}, users
    assert TOKEN not in stdout
    outputs = glob.glob(str(artifacts / "job_events" / "*.json")) + [str(artifacts / "stdout")]
    for path in outputs:
        with open(path, errors="replace") as f:
            assert TOKEN not in f.read(), path


def test_token_without_nodes_status_permission_is_refused_by_name(cluster, collections_path, tmp_path):
    cluster.require_simulated("edits the RBAC of the simulated automation identity")
    apply_rbac(collections_path, tmp_path, cluster.kubeconfig)
    from kubernetes import client

    rbac = client.RbacAuthorizationV1Api(cluster.api_client)
    role = json.loads(rbac.read_cluster_role("kubehw-devices-nodes", _preload_content=False).data)
    role["rules"] = [r for r in role["rules"] if "nodes/status" not in r["resources"]]
    assert len(role["rules"]) == 2
    rbac.replace_cluster_role("kubehw-devices-nodes", role, _preload_content=False)
    before = node_statuses(cluster)["dongle-node-1"]
    proc, recap = play(collections_path, tmp_path, "advertise", env=credential_env(cluster))
    assert proc.returncode != 0
    assert recap["dongle-node-1"]["failed"] == 1
    assert "nodes/status" in proc.stdout and "patch" in proc.stdout, proc.stdout[-3000:]
    assert SA_USER in proc.stdout
    assert node_statuses(cluster)["dongle-node-1"]["capacity"] == before["capacity"]
