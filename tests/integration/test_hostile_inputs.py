# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Hostile targets: every one fails cleanly, names the value and the rule, and writes nothing.

No input may widen what is touched: empty and blank names and selectors, lists with an empty item, the string
answers of AWX surveys in the wrong place, no target at all, and objects the collection did not create. Each case
is one task of one play run with ``ignore_errors`` (one ansible-playbook for all the module cases, one for the role
cases), then checked one by one: the task failed, its message contains the offending value (or option) and the
rule, no Python traceback reached the output, and the suite's own control plane logged **no request** for the whole
play but device_plugin_deploy's reads of the foreign case's DaemonSet and ConfigMap.

The value rules (control characters, case, length, quantities, types of every other option) are the modules' own
code whatever runs them: tests/unit/plugins/modules/test_hostile_values.py plays those cases in-process, with a
client that fails the case if it is ever built.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import uuid

import pytest

from tests.support.k8s_objects import read_out
from tests.support.overrides import overridden

ER = "kubehw.devices.k8s_node_extended_resource"
INFO = "kubehw.devices.extended_resource_info"
SMOKE = "kubehw.devices.resource_smoke_test"
DEPLOY = "kubehw.devices.device_plugin_deploy"
RUNTIME = "kubehw.devices.k8s_runtime_class"

# Names of this run's own (a real cluster may be shared with other runs); the cases' broken variants of them
# ("hostile-1\n") are literal, since they can never name an object.
RUN = uuid.uuid4().hex[:6]
NODES = ["hostile-%s-1" % RUN, "hostile-%s-2" % RUN]
NAMESPACE = "kubehw-hostile-%s" % RUN
FOREIGN_CM_PLUGIN = "foreign-cm-plugin"
FOREIGN_RUNTIME_CLASS = "foreign-rc-%s" % RUN
DONGLE = "hostile.example.com/dongle"

SIM_CONFIG = {"nodes": [{"name": n, "labels": {"kubehw-hostile": "yes"}} for n in NODES]}
pytestmark = pytest.mark.node_config(SIM_CONFIG)

ER_BASE = {"names": NODES, "resources": {DONGLE: 1}, "wait": "none"}
EXACT_NOTHING = {"state": "exact", "domain": ["hostile.example.com"], "resources": {}}
DEPLOY_BASE = {"preset": "generic", "name": "hostile-plugin", "namespace": NAMESPACE,
               "devices": [{"name": "dongle", "groups": [{"paths": [{"path": "/dev/null"}]}]}],
               "device_domain": "hostile.example.com", "wait": "none"}
RUNTIME_BASE = {"name": "hostile-rc-%s" % RUN, "handler": "hostile"}

# (module, parameters over the base, offending value or option as it appears in the message, the rule's words)
CASES = [
    # --- k8s_node_extended_resource: targets (the blast radius)
    (ER, {"names": None, "name": ""}, "''", "must not be empty or blank"),
    (ER, {"names": None, "name": " "}, "' '", "must not be empty or blank"),
    (ER, {"names": []}, "names", "empty list"),
    (ER, {"names": [""]}, "names[0]", "must not be empty or blank"),
    (ER, {"names": ["hostile-1", "\t"]}, "names[1]", "must not be empty or blank"),
    (ER, {"names": "hostile-1,"}, "names[1]", "must not be empty or blank"),  # a survey's comma list
    (ER, {"names": None, "label_selectors": []}, "label_selectors", "empty list"),
    (ER, {"names": None, "label_selectors": [""]}, "label_selectors[0]", "empty selector matches every object"),
    (ER, {"names": None, "label_selectors": "   "}, "label_selectors[0]", "must not be empty or blank"),
    (ER, {"names": None, "label_selectors": ["kubehw-hostile=yes,,x=y"]}, "kubehw-hostile=yes,,x=y", "empty term"),
    (ER, {"names": None, "label_selectors": ["kubehw-hostile=yes,"]}, "kubehw-hostile=yes,", "empty term"),
    (ER, {"names": None, "field_selectors": [""]}, "field_selectors[0]", "empty selector"),
    # with state=exact and no resources, a target that widened to every node would strip a whole domain from the
    # cluster
    (ER, {"names": None, "name": " ", **EXACT_NOTHING}, "' '", "must not be empty or blank"),
    (ER, {"names": None, "label_selectors": [""], **EXACT_NOTHING}, "label_selectors[0]", "empty selector"),
    (ER, {"names": None, **EXACT_NOTHING}, "all_nodes", "no target"),
    (ER, {"names": None}, "all_nodes", "no target"),
    (ER, {"names": None, "all_nodes": "false"}, "all_nodes", "no target"),
    (ER, {"all_nodes": "yes"}, "all_nodes", "cannot be combined with names"),
    (ER, {"names": None, "name": "hostile-1", "all_nodes": True}, "all_nodes", "cannot be combined with name"),
    # --- extended_resource_info
    (INFO, {"name": ""}, "''", "must not be empty or blank"),
    (INFO, {"names": []}, "names", "empty list"),
    (INFO, {"label_selectors": [""]}, "label_selectors[0]", "empty selector"),
    (INFO, {}, "all_nodes", "no target"),
    # --- resource_smoke_test (creates a pod: must refuse before the POST)
    (SMOKE, {"resource": DONGLE, "node": ""}, "''", "must not be empty or blank"),
    (SMOKE, {"resource": DONGLE, "namespace": " "}, "' '", "must not be empty or blank"),
    # --- device_plugin_deploy
    (DEPLOY, {"namespace": "kube system"}, "kube system", "DNS"),
    # the NVIDIA preset writes <name>-config for time-slicing: one made by someone else is refused
    (DEPLOY, {"preset": "nvidia", "name": FOREIGN_CM_PLUGIN, "devices": None, "device_domain": None,
              "time_slicing": {"replicas": {"nvidia.com/gpu": 2}}}, "%s-config" % FOREIGN_CM_PLUGIN, "adopt_configmap"),
    # --- k8s_runtime_class
    (RUNTIME, {"name": ""}, "''", "DNS"),
]

BASES = {ER: ER_BASE, INFO: {"include_pods": False}, SMOKE: {"namespace": NAMESPACE}, DEPLOY: DEPLOY_BASE,
         RUNTIME: RUNTIME_BASE}
# What the cases name: nothing of these may be written (WriteObserver on a cluster other than the suite's own).
WATCHED = dict(namespaces=[NAMESPACE], names=NODES + [NAMESPACE, FOREIGN_RUNTIME_CLASS, RUNTIME_BASE["name"]])


def params_of(module, overrides):
    return overridden(BASES[module], overrides)


def bring_nodes(cluster):
    """The nodes the cases target: the suite's own control plane has them (SIM_CONFIG); elsewhere Node objects are
    created (no kubelet needed: the cases only must not write them) and deleted at the end."""
    if cluster.controlled:
        return
    for name in NODES:
        read_out(cluster.core.create_node(
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubehw-hostile": "yes"}}},
            _preload_content=False))
        cluster.on_close("delete node %s" % name,
                         lambda name=name: cluster.core.delete_node(name, _preload_content=False))


def make_foreign_objects(cluster):
    """A ConfigMap and a RuntimeClass of the names the tasks use, made by someone else (not the collection)."""
    from kubernetes import client

    cluster.core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    cluster.on_close("delete namespace %s" % NAMESPACE,
                     lambda: cluster.core.delete_namespace(NAMESPACE, _preload_content=False))
    cluster.on_close("delete RuntimeClass %s" % FOREIGN_RUNTIME_CLASS,
                     lambda: client.NodeV1Api(cluster.api_client).delete_runtime_class(FOREIGN_RUNTIME_CLASS,
                                                                                       _preload_content=False))
    cluster.core.create_namespaced_config_map(NAMESPACE, {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "%s-config" % FOREIGN_CM_PLUGIN, "labels": {"app.kubernetes.io/managed-by": "helm"}},
        "data": {"config.yaml": "someone else's"}})
    client.NodeV1Api(cluster.api_client).create_runtime_class({
        "apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
        "metadata": {"name": FOREIGN_RUNTIME_CLASS}, "handler": "theirs"})


def messages(result):
    """Every msg in a result, loop items included (a looped task's own msg is only 'One or more items failed')."""
    found = []
    if isinstance(result, dict):
        if isinstance(result.get("msg"), str):
            found.append(result["msg"])
        for value in result.values():
            found.extend(messages(value))
    elif isinstance(result, list):
        for value in result:
            found.extend(messages(value))
    return found


def clean_failure_problem(result, offender, rule):
    """Why a result is not a clean failure naming the value and the rule, or None."""
    if result.get("failed") is not True:
        return "did not fail: %s" % json.dumps(result, sort_keys=True)[:500]
    msg = result.get("msg") or ""
    if offender not in msg or rule not in msg:
        return "message %r lacks the value %r or the rule %r" % (msg, offender, rule)
    if "Traceback (most recent call last)" in json.dumps(result):
        return "a traceback reached the result"
    return None


def test_the_write_observer_of_other_clusters_sees_writes_to_what_the_cases_name(cluster):
    """WriteObserver (what these tests use on a cluster other than the suite's own) run here on purpose: a watch
    from each list's resourceVersion reports writes to the named objects and the namespace, and nothing else."""
    bring_nodes(cluster)
    make_foreign_objects(cluster)
    quiet = cluster.observe_writes(by_watch=True, **WATCHED)
    assert quiet.writes() == []
    observer = cluster.observe_writes(by_watch=True, **WATCHED)
    read_out(cluster.core.create_namespaced_config_map(
        NAMESPACE, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "written"}}, _preload_content=False))
    read_out(cluster.core.patch_node(NODES[0], {"metadata": {"labels": {"kubehw-hostile-seen": "yes"}}},
                                     _preload_content=False))
    # a namespace nobody named is another test's business on a shared cluster
    other = cluster.namespace()
    assert sorted(observer.writes()) == sorted([
        ("ADDED", "%s/configmaps/written" % NAMESPACE), ("MODIFIED", "nodes/%s" % NODES[0])]), other


def test_the_table_names_every_module():
    assert set(case[0] for case in CASES) == set(BASES)


@pytest.mark.timeout(600)
def test_hostile_module_targets_fail_cleanly_and_write_nothing(cluster, ansible):
    """One play (every case a task with ignore_errors), then every case checked."""
    bring_nodes(cluster)
    make_foreign_objects(cluster)
    observer = cluster.observe_writes(**WATCHED)
    mark = cluster.mark()
    run = ansible([{"name": "Hostile %02d" % i, module: params_of(module, overrides), "ignore_errors": True}
                   for i, (module, overrides, _offender, _rule) in enumerate(CASES)])
    assert "Traceback (most recent call last)" not in run.stdout + run.stderr, run.output()
    problems = []
    for i, (_module, overrides, offender, rule) in enumerate(CASES):
        problem = clean_failure_problem(run.result("Hostile %02d" % i), offender, rule)
        if problem:
            problems.append("case %02d %r: %s" % (i, overrides, problem))
    assert problems == [], "\n".join(problems)
    assert observer.writes() == []
    if cluster.controlled:
        # refused before any request but device_plugin_deploy's reads of the DaemonSet and the ConfigMap (someone
        # else's) of the foreign case
        foreign = ["/namespaces/%s/%s" % (NAMESPACE, what) for what in (
            "daemonsets/" + FOREIGN_CM_PLUGIN, "configmaps/%s-config" % FOREIGN_CM_PLUGIN)]
        assert [(r["method"], r["path"]) for r in cluster.requests(mark)
                if not (r["method"].upper() == "GET" and any(r["path"].endswith(path) for path in foreign))] == []


def test_a_foreign_runtime_class_is_left_alone(cluster, ansible):
    """k8s_runtime_class documents leaving a RuntimeClass it did not create as it is, with a warning."""
    make_foreign_objects(cluster)
    observer = cluster.observe_writes(**WATCHED)
    run = ansible([{"name": "Foreign", RUNTIME: params_of(RUNTIME, {"name": FOREIGN_RUNTIME_CLASS})}])
    assert run.rc == 0, run.output()
    result = run.result("Foreign")
    assert result["changed"] is False and result["action"] == "skipped"
    assert any(FOREIGN_RUNTIME_CLASS in w and "adopt" in w for w in result.get("warnings", [])), result
    assert observer.writes() == []


# extended_resources role: (variables, what the message must contain)
ROLE_CASES = [
    ({"extended_resources_node_name": ""}, ['""', "non-empty lowercase RFC 1123 DNS subdomain"]),
    ({"extended_resources_node_name": "   "}, ['"   "', "DNS subdomain"]),
    ({"extended_resources_node_name": "hostile-1\n"}, ['"hostile-1\\n"', "DNS subdomain"]),
    ({"extended_resources_node_name": "Hostile-1"}, ['"Hostile-1"', "lowercase"]),
    ({"extended_resources_node_name": "n" * 254}, ["n" * 254, "at most 253"]),
    ({"extended_resources_static": {"hostile.example.com/dongle\n": 1}}, ["dongle\\n", "letters, digits"]),
    ({"extended_resources_static": {DONGLE: "4\n"}}, [DONGLE, "must match"]),
    ({"extended_resources_domains": [""]}, ["''", "must not be empty"]),
    ({"extended_resources_state": "gone"}, ["extended_resources_state", "gone"]),
]


RECORD_FAILURE = "{{ {'msg': ansible_failed_result.msg | default(''), 'result': ansible_failed_result} }}"


@pytest.mark.timeout(600)
def test_hostile_role_variables_fail_cleanly_and_write_nothing(cluster, ansible):
    bring_nodes(cluster)
    observer = cluster.observe_writes(**WATCHED)
    tasks = []
    for i, (variables, _words) in enumerate(ROLE_CASES):
        role_vars = {"extended_resources_node_name": NODES[0], "extended_resources_static": {DONGLE: 1},
                     "extended_resources_wait": "none"}
        role_vars.update(variables)
        tasks.append({"name": "Role case %02d" % i, "block": [
            {"name": "Run the role %02d" % i, "ansible.builtin.include_role": {"name": "kubehw.devices.extended_resources"},
             "vars": role_vars},
            {"name": "Role case %02d did not fail" % i, "ansible.builtin.set_fact": {"role_case_%02d" % i: "passed"}},
        ], "rescue": [
            {"name": "Record role case %02d" % i, "ansible.builtin.set_fact": {
                "role_case_%02d" % i: RECORD_FAILURE}},
        ]})
    run = ansible(tasks)
    assert "Traceback (most recent call last)" not in run.stdout + run.stderr, run.output()
    for i, (variables, words) in enumerate(ROLE_CASES):
        record = run.result("Record role case %02d" % i)["ansible_facts"]["role_case_%02d" % i]
        text = "\n".join(messages(record))
        for word in words:
            assert word in text, (variables, word, text)
        assert "Traceback (most recent call last)" not in json.dumps(record)
    assert observer.writes() == []


def test_two_hosts_naming_one_node_fail_the_role(cluster, ansible, tmp_path):
    """Two inventory hosts with the same extended_resources_node_name would fight over one node."""
    bring_nodes(cluster)
    import sys

    import yaml

    play = [{"name": "Two hosts, one node", "hosts": "all", "connection": "local", "gather_facts": False,
             "vars": {"ansible_python_interpreter": sys.executable, "extended_resources_node_name": NODES[0],
                      "extended_resources_wait": "none"},
             "roles": [{"role": "kubehw.devices.extended_resources"}]}]
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {
        "host-a": {"extended_resources_static": {DONGLE: 1}},
        "host-b": {"extended_resources_static": {DONGLE: 2}}}}}))
    observer = cluster.observe_writes(**WATCHED)
    mark = cluster.mark()
    proc = ansible.run(play, inventory=str(inventory))
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output
    assert "several hosts of the play name the same node (%s)" % NODES[0] in output, output
    assert "Traceback (most recent call last)" not in output
    if cluster.controlled:
        assert cluster.requests(mark) == []     # not even a read: the role stops before its first task
    assert observer.writes() == []
