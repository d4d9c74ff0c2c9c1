# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The watch mirror (tests/support/watch_mirror.py) against a real apiserver, through the fault proxy, whose request
log shows what the mirror asked: it lists once and then only watches, opens an ended watch again from where it was,
lists again after a 410, and its stop ends the open watch at once."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import functools
import time
import uuid

import pytest

from tests.support.cluster import wait_for
from tests.support.fault_proxy import FaultProxy
from tests.support.watch_mirror import WatchMirror

kubernetes = pytest.importorskip("kubernetes")

LABEL = "watch-mirror-test"


@pytest.fixture
def proxied(upstream_kubeconfig, tmp_path):
    """(CoreV1Api through the fault proxy, CoreV1Api straight to the apiserver, the proxy, a namespace)."""
    proxy = FaultProxy(upstream_kubeconfig).start()
    through = kubernetes.config.new_client_from_config(config_file=proxy.write_kubeconfig(str(tmp_path / "kubeconfig")))
    direct = kubernetes.config.new_client_from_config(config_file=upstream_kubeconfig)
    namespace = "mirror-%s" % uuid.uuid4().hex[:8]
    kubernetes.client.CoreV1Api(direct).create_namespace({"metadata": {"name": namespace}})
    yield kubernetes.client.CoreV1Api(through), kubernetes.client.CoreV1Api(direct), proxy, namespace
    kubernetes.client.CoreV1Api(direct).delete_namespace(namespace)
    proxy.stop()
    through.close()
    direct.close()


def config_map(name, value="1"):
    return {"metadata": {"name": name, "labels": {LABEL: "yes"}}, "data": {"a": value}}


def names(mirror):
    return sorted(obj["metadata"]["name"] for obj in mirror.objects())


def requests(proxy, namespace):
    """(verb, resourceVersion) of the mirror's requests: 'list' or 'watch'."""
    path = "/api/v1/namespaces/%s/configmaps" % namespace
    return [("watch" if r["query"].get("watch") else "list", r["query"].get("resourceVersion"))
            for r in proxy.requests if r["path"] == path]


def test_one_list_then_events_and_an_ended_watch_goes_on_from_its_resource_version(proxied):
    through, direct, proxy, namespace = proxied
    direct.create_namespaced_config_map(namespace, config_map("before"))
    changes = []
    mirror = WatchMirror("configmaps", functools.partial(through.list_namespaced_config_map, namespace),
                         on_change=lambda: changes.append(1), label_selector=LABEL, watch_seconds=1).start()
    try:
        assert mirror.wait_synced(10)
        assert names(mirror) == ["before"] and changes
        direct.create_namespaced_config_map(namespace, config_map("added"))
        direct.patch_namespaced_config_map("before", namespace, {"data": {"a": "2"}})
        wait_for(lambda: names(mirror) == ["added", "before"], what="the created ConfigMap in the mirror")
        wait_for(lambda: [o for o in mirror.objects() if o["data"] == {"a": "2"}], what="the patch in the mirror")
        # the apiserver ends each watch after a second: the next one starts where the last event left off
        wait_for(lambda: len([r for r in requests(proxy, namespace) if r[0] == "watch"]) >= 3, what="a third watch")
        direct.delete_namespaced_config_map("added", namespace)
        wait_for(lambda: names(mirror) == ["before"], what="the deletion in the mirror")
        seen = requests(proxy, namespace)
        assert seen[0][0] == "list" and [verb for verb, _version in seen[1:]] == ["watch"] * (len(seen) - 1)
        versions = [version for _verb, version in seen[1:]]
        assert versions == sorted(versions, key=int) and len(set(versions)) >= 2, seen
        assert mirror.errors == []
    finally:
        mirror.stop()


def test_a_410_lists_again_and_stop_ends_the_open_watch_at_once(proxied):
    through, direct, proxy, namespace = proxied
    mirror = WatchMirror("configmaps", functools.partial(through.list_namespaced_config_map, namespace),
                         label_selector=LABEL).start()
    try:
        assert mirror.wait_synced(10) and names(mirror) == []
        wait_for(lambda: proxy.open_watches, what="the mirror's watch")
        # compacted under the open watch: it ends with ERROR 410; what is written meanwhile comes with the new list
        proxy.compact(expire_watches=True)
        direct.create_namespaced_config_map(namespace, config_map("after-410"))
        wait_for(lambda: names(mirror) == ["after-410"], what="the ConfigMap written after the 410")
        assert [verb for verb, _version in requests(proxy, namespace)][:3] == ["list", "watch", "list"]
        wait_for(lambda: proxy.open_watches, what="the watch after the new list")
        started = time.monotonic()
        mirror.stop()
        # at once, not after the watch's WATCH_SECONDS (the bound leaves room for a loaded machine)
        wait_for(lambda: not proxy.open_watches, timeout=10, what="the watch to end with stop()")
        assert time.monotonic() - started < 10
        assert mirror.errors == []
    finally:
        mirror.stop()
