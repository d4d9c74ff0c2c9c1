# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Hostile inputs: every one fails cleanly, names the value and the rule, and writes nothing.

No input may widen what is touched: empty and blank targets, trailing newlines and
control characters in every name, the string answers of AWX surveys in the wrong place, oversize
values, and objects the collection did not create. Each case is one task of one play run with
``ignore_errors`` (one ansible-playbook for all the module cases, one for the role cases), then
checked one by one: the task failed, its message contains the offending value (or option) and the
rule, no Python traceback reached the output, and the suite's own control plane logged **no write
request** (POST, PUT, PATCH, DELETE) for the whole play: no request at all, where every case is refused on its input
alone.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import uuid

import pytest

from tests.support.k8s_objects import read_out

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
    (ER, {"names": None, "name": "hostile-1\n"}, "'hostile-1\\n'", "DNS subdomain"),
    (ER, {"names": None, "name": "hostile-1\r"}, "'hostile-1\\r'", "DNS subdomain"),
    (ER, {"names": None, "name": "hostile-1\x00"}, "'hostile-1\\x00'", "DNS subdomain"),
    (ER, {"names": None, "name": "Hostile-1"}, "'Hostile-1'", "lowercase"),
    (ER, {"names": None, "name": "h\u00f6stile-1"}, "h\u00f6stile-1", "DNS subdomain"),
    (ER, {"names": None, "name": "n" * 254}, "n" * 254, "no more than 253"),
    (ER, {"names": []}, "names", "empty list"),
    (ER, {"names": [""]}, "names[0]", "must not be empty or blank"),
    (ER, {"names": ["hostile-1", "\t"]}, "names[1]", "must not be empty or blank"),
    (ER, {"names": "hostile-1,"}, "names[1]", "must not be empty or blank"),  # a survey's comma list
    (ER, {"names": None, "label_selectors": []}, "label_selectors", "empty list"),
    (ER, {"names": None, "label_selectors": [""]}, "label_selectors[0]", "empty selector matches every object"),
    (ER, {"names": None, "label_selectors": "   "}, "label_selectors[0]", "must not be empty or blank"),
    (ER, {"names": None, "label_selectors": ["kubehw-hostile=yes\n"]}, "kubehw-hostile=yes", "control characters"),
    (ER, {"names": None, "label_selectors": ["kubehw-hostile=yes,,x=y"]}, "kubehw-hostile=yes,,x=y", "empty term"),
    (ER, {"names": None, "label_selectors": ["kubehw-hostile=yes,"]}, "kubehw-hostile=yes,", "empty term"),
    (ER, {"names": None, "field_selectors": [""]}, "field_selectors[0]", "empty selector"),
    (ER, {"names": None, "field_selectors": ["metadata.name=hostile-1\n"]}, "metadata.name=hostile-1",
     "control characters"),
    # with state=exact and no resources, a target that widened to every node would strip a whole domain from the
    # cluster
    (ER, {"names": None, "name": " ", **EXACT_NOTHING}, "' '", "must not be empty or blank"),
    (ER, {"names": None, "label_selectors": [""], **EXACT_NOTHING}, "label_selectors[0]", "empty selector"),
    (ER, {"names": None, **EXACT_NOTHING}, "all_nodes", "no target"),
    (ER, {"names": None}, "all_nodes", "no target"),
    (ER, {"names": None, "all_nodes": "false"}, "all_nodes", "no target"),
    (ER, {"all_nodes": "yes"}, "all_nodes", "cannot be combined with names"),
    (ER, {"names": None, "name": "hostile-1", "all_nodes": True}, "all_nodes", "cannot be combined with name"),
    (ER, {"names": None, "all_nodes": "maybe"}, "all_nodes", "bool"),
    # --- k8s_node_extended_resource: names, quantities and sizes
    (ER, {"resources": {"hostile.example.com/dongle\n": 1}}, "dongle\\n", "letters, digits"),
    (ER, {"resources": {"hostile.example.com\n/dongle": 1}}, "hostile.example.com\\n", "lowercase"),
    (ER, {"resources": {"hostile.example.com/dongle\t": 1}}, "dongle\\t", "letters, digits"),
    (ER, {"resources": {"hostile.example.com/d\u00f6ngle": 1}}, "d\u00f6ngle", "letters, digits"),
    (ER, {"resources": {"my-kubernetes.io/dongle": 1}}, "my-kubernetes.io", "native"),
    (ER, {"resources": {"hostile.example.com/" + "d" * 64: 1}}, "d" * 64, "no more than 63"),
    (ER, {"resources": {"a" * 250 + ".com/dongle": 1}}, "a" * 250, "no more than 253"),
    (ER, {"resources": {DONGLE: "4\n"}}, DONGLE, "must match"),
    (ER, {"resources": {DONGLE: "yes"}}, DONGLE, "must match"),
    (ER, {"resources": {DONGLE: "3.5"}}, DONGLE, "whole numbers"),
    (ER, {"resources": {DONGLE: "-3"}}, DONGLE, "greater than or equal to 0"),
    (ER, {"resources": {DONGLE: 10 ** 19}}, DONGLE, "at most"),
    (ER, {"resources": {DONGLE: "1e99"}}, DONGLE, "out of range"),
    (ER, {"resources": "hostile.example.com/dongle=4"}, "resources", "must be a dict"),
    (ER, {"resources": {"dongle": 4}}, "'dongle'", "exactly one '/'"),
    (ER, {"resources": {"a/b/c": 4}}, "a/b/c", "exactly one '/'"),
    (ER, {"resources": {"kubernetes.io/dongle": 4}}, "kubernetes.io/dongle", "reserved"),
    (ER, {"resources": {"sub.kubernetes.io/dongle": 4}}, "sub.kubernetes.io/dongle", "reserved"),
    (ER, {"resources": {"Hostile.example.com/dongle": 4}}, "Hostile.example.com/dongle", "lowercase"),
    (ER, {"resources": {"hostile.example.com/bad name": 4}}, "hostile.example.com/bad name", "letters, digits"),
    (ER, {"resources": {"requests.example.com/dongle": 4}}, "requests.example.com/dongle", "quota"),
    (ER, {"resources": {DONGLE: 1, "hostile.example.com/": 1}}, "hostile.example.com/", "must not be empty"),
    (ER, {"resources": {DONGLE: "500m"}}, DONGLE, "whole numbers"),
    (ER, {"resources": {DONGLE: -1}}, DONGLE, "greater than or equal to 0"),
    (ER, {"state": "exact"}, "state=exact", "domain or managed_prefixes"),
    (ER, {"state": "exact", "domain": "example.org"}, DONGLE, "outside"),
    (ER, {"state": "exact", "domain": [""], "resources": {}}, "''", "must not be empty"),
    (ER, {"state": "exact", "domain": ["hostile.example.com\n"], "resources": {}}, "hostile.example.com\\n",
     "lowercase"),
    (ER, {"state": "exact", "managed_prefixes": ["hostile.example.com/dongle\n"], "resources": {}},
     "hostile.example.com/dongle\\n", "start of a name"),
    (ER, {"parallel": 0}, "parallel", "at least 1"),
    (ER, {"parallel": 100000}, "parallel", "at most 100"),
    (ER, {"parallel": "three"}, "parallel", "int"),
    (ER, {"wait_timeout": -1}, "wait_timeout", "must not be negative"),
    (ER, {"state": "EXACT"}, "EXACT", "must be one of"),
    # --- extended_resource_info
    (INFO, {"name": ""}, "''", "must not be empty or blank"),
    (INFO, {"name": "hostile-1\n"}, "'hostile-1\\n'", "DNS subdomain"),
    (INFO, {"names": []}, "names", "empty list"),
    (INFO, {"label_selectors": [""]}, "label_selectors[0]", "empty selector"),
    (INFO, {}, "all_nodes", "no target"),
    (INFO, {"all_nodes": True, "wait_allocatable": {"hostile.example.com/dongle\n": 1}}, "dongle\\n",
     "letters, digits"),
    (INFO, {"all_nodes": True, "wait_allocatable": {DONGLE: "-1"}}, DONGLE, "greater than or equal to 0"),
    (INFO, {"all_nodes": True, "wait_allocatable": {DONGLE: "many"}}, DONGLE, "must match"),
    # --- resource_smoke_test (creates a pod: must refuse before the POST)
    (SMOKE, {"resource": ""}, "''", "exactly one '/'"),
    (SMOKE, {"resource": "hostile.example.com/dongle\n"}, "dongle\\n", "letters, digits"),
    (SMOKE, {"resource": DONGLE, "count": 0}, "count", "at least 1"),
    (SMOKE, {"resource": DONGLE, "count": "3 GPUs"}, "count", "int"),
    (SMOKE, {"resource": DONGLE, "timeout": 0}, "timeout", "at least 1"),
    (SMOKE, {"resource": DONGLE, "node": ""}, "''", "must not be empty or blank"),
    (SMOKE, {"resource": DONGLE, "node": "hostile-1\n"}, "'hostile-1\\n'", "DNS subdomain"),
    (SMOKE, {"resource": DONGLE, "namespace": " "}, "' '", "must not be empty or blank"),
    (SMOKE, {"resource": DONGLE, "namespace": "kube system"}, "kube system", "DNS label"),
    (SMOKE, {"resource": DONGLE, "name_prefix": ""}, "name_prefix", "must not be empty or blank"),
    (SMOKE, {"resource": DONGLE, "name_prefix": "Smoke-\n"}, "Smoke-\\n", "DNS subdomain"),
    (SMOKE, {"device_class": "GPU.example.com\n"}, "GPU.example.com\\n", "DNS subdomain"),
    # --- device_plugin_deploy
    (DEPLOY, {"name": "hostile-plugin\n"}, "hostile-plugin\\n", "DNS"),
    (DEPLOY, {"name": "Hostile"}, "Hostile", "DNS"),
    (DEPLOY, {"namespace": "kube system"}, "kube system", "DNS"),
    (DEPLOY, {"preset": "nvidia\n"}, "got: nvidia\n", "must be one of"),  # ansible-core's message, raw
    (DEPLOY, {"labels": {"team\n": "gpu"}}, "team\\n", "name part"),
    (DEPLOY, {"labels": {"team": "gpu\n"}}, "gpu\\n", "labels value"),
    (DEPLOY, {"update_strategy": {"type": "RollingUpdate", "max_unavailable": "10%\n"}}, "10%\\n", "max_unavailable"),
    (DEPLOY, {"env": {"BAD NAME": "1"}}, "BAD NAME", "env name"),
    (DEPLOY, {"device_domain": "hostile.example.com\n"}, "hostile.example.com\\n", "DNS"),
    # the NVIDIA preset writes <name>-config for time-slicing: one made by someone else is refused
    (DEPLOY, {"preset": "nvidia", "name": FOREIGN_CM_PLUGIN, "devices": None, "device_domain": None,
              "time_slicing": {"replicas": {"nvidia.com/gpu": 2}}}, "%s-config" % FOREIGN_CM_PLUGIN, "adopt_configmap"),
    # --- k8s_runtime_class
    (RUNTIME, {"name": ""}, "''", "DNS"),
    (RUNTIME, {"name": "hostile-rc\n"}, "hostile-rc\\n", "DNS"),
    (RUNTIME, {"handler": "hostile\n"}, "hostile\\n", "DNS"),
    (RUNTIME, {"handler": "Hostile"}, "Hostile", "DNS"),
    (RUNTIME, {"labels": {"team": "gpu\n"}}, "gpu\\n", "label"),
]

BASES = {ER: ER_BASE, INFO: {"include_pods": False}, SMOKE: {"namespace": NAMESPACE}, DEPLOY: DEPLOY_BASE,
         RUNTIME: RUNTIME_BASE}
# What the cases name: nothing of these may be written (WriteObserver on a cluster other than the suite's own).
WATCHED = dict(namespaces=[NAMESPACE], names=NODES + [NAMESPACE, FOREIGN_RUNTIME_CLASS, RUNTIME_BASE["name"]])


def params_of(module, overrides):
    params = dict(BASES[module])
    for key, value in overrides.items():
        if value is None:
            params.pop(key, None)
        else:
            params[key] = value
    return params


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


def test_the_table_is_large_enough():
    assert len(CASES) + len(ROLE_CASES) >= 60


@pytest.mark.timeout(600)
@pytest.mark.parametrize("module", [ER, INFO, SMOKE, DEPLOY, RUNTIME])
def test_hostile_module_inputs_fail_cleanly_and_write_nothing(cluster, ansible, module):
    """One play per module (its cases as tasks with ignore_errors), then every case checked."""
    bring_nodes(cluster)
    if module in (DEPLOY, RUNTIME):
        make_foreign_objects(cluster)
    cases = [(i, case) for i, case in enumerate(CASES) if case[0] == module]
    observer = cluster.observe_writes(**WATCHED)
    mark = cluster.mark()
    run = ansible([{"name": "Hostile %02d" % i, module: params_of(module, overrides), "ignore_errors": True}
                   for i, (_module, overrides, _offender, _rule) in cases])
    assert "Traceback (most recent call last)" not in run.stdout + run.stderr, run.output()
    problems = []
    for i, (_module, overrides, offender, rule) in cases:
        problem = clean_failure_problem(run.result("Hostile %02d" % i), offender, rule)
        if problem:
            problems.append("case %02d %r: %s" % (i, overrides, problem))
    assert problems == [], "\n".join(problems)
    assert observer.writes() == []
    if cluster.controlled and module != DEPLOY:
        # refused before any request, not even a read (device_plugin_deploy's foreign ConfigMap case reads it first)
        assert cluster.requests(mark) == []


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
