# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Discovery documents of the groups served in v1 (/api/v1, /apis, /apis/<group>, /apis/<group>/v1);
resource.k8s.io's are dra_versions.py's.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from tests.simcluster.store import RESOURCES, STATUS_RESOURCES


def api_groups():
    """The API groups of RESOURCES in their order, "" for the core group."""
    out = []
    for group, _v, _k, _n, _s in RESOURCES.values():
        if group not in out:
            out.append(group)
    return out


def group_entry(group):
    """An APIGroup entry of a group served in v1 only."""
    gv = {"groupVersion": "%s/v1" % group, "version": "v1"}
    return {"name": group, "versions": [gv], "preferredVersion": gv}


def resource_list(group, version):
    """The APIResourceList of a group version."""
    resources = []
    for plural, (g, v, kind, namespaced, short) in RESOURCES.items():
        if g != group or v != version:
            continue
        verbs = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
        entry = {"name": plural, "singularName": kind.lower(), "namespaced": namespaced, "kind": kind,
                 "verbs": verbs}
        if short:
            entry["shortNames"] = short
        resources.append(entry)
        if plural in STATUS_RESOURCES:
            resources.append({"name": plural + "/status", "singularName": "", "namespaced": namespaced,
                              "kind": kind, "verbs": ["get", "patch", "update"]})
    return {"kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": "%s/%s" % (group, version) if group else version, "resources": resources}
