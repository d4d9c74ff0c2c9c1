# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The resource.k8s.io versions the simulated apiserver serves (``dra_versions`` of the configuration, default
``[v1]`` as kube-apiserver 1.34+ serves it; ``[v1beta1]`` for a configuration that claims v1.32; ``[]`` for a
cluster without DRA): their discovery, and the conversion of requests and answers between v1beta1/v1beta2 and
the stored v1 shape (devices' ``basic`` wrapper, requests' ``exactly``). Sources: tests/simcluster/FACTS.md,
"Dynamic Resource Allocation".
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import uuid

from tests.simcluster.discovery import api_groups, group_entry
from tests.simcluster.http_front import Request
from tests.simcluster.store import RESOURCES


GROUP = "resource.k8s.io"
KNOWN_VERSIONS = ("v1", "v1beta2", "v1beta1")
DEFAULT_VERSIONS = ("v1",)
DRA_RESOURCES = ("deviceclasses", "resourceslices", "resourceclaims", "resourceclaimtemplates")


def served_versions(api):
    """resource.k8s.io versions this simulated apiserver serves (ApiServer.dra_versions, set from the config)."""
    versions = getattr(api, "dra_versions", None)
    if versions is None:
        return list(DEFAULT_VERSIONS)
    unknown = [v for v in versions if v not in KNOWN_VERSIONS]
    if unknown:
        raise ValueError("dra_versions: unknown versions %s (known: %s)" % (unknown, ", ".join(KNOWN_VERSIONS)))
    return list(versions)


# The release /version reports for the newest resource.k8s.io version served: the reference control plane for v1
# (../shared/k8s), the first release that served each beta, v1.32 for a cluster without the group
SERVER_RELEASES = {"v1": "v1.36.2", "v1beta2": "v1.33.0", "v1beta1": "v1.32.0"}


def server_release(api):
    """The gitVersion /version answers: a cluster that serves resource.k8s.io/v1 says v1.36.2, one that serves only
    v1beta1 says v1.32.0, as the real releases would."""
    served = served_versions(api)
    newest = next((version for version in KNOWN_VERSIONS if version in served), "v1beta1")
    return SERVER_RELEASES[newest]


def _served_group_entry(versions):
    gvs = [{"groupVersion": "%s/%s" % (GROUP, v), "version": v} for v in versions]
    return {"name": GROUP, "versions": gvs, "preferredVersion": gvs[0]}


def discovery(api, path):
    """The answer for a discovery path that involves resource.k8s.io, or None to let the server answer."""
    versions = served_versions(api)
    if path == "/apis":
        groups = []
        for group in api_groups():
            if not group:
                continue
            if group == GROUP:
                if versions:
                    groups.append(_served_group_entry(versions))
            else:
                groups.append(group_entry(group))
        return (200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}, {})
    parts = [p for p in path.split("/") if p]
    if len(parts) < 2 or parts[0] != "apis" or parts[1] != GROUP:
        return None
    if len(parts) == 2 and versions:
        body = _served_group_entry(versions)
        body.update({"kind": "APIGroup", "apiVersion": "v1"})
        return (200, body, {})
    if len(parts) == 3 and parts[2] in versions:
        resources = []
        for plural in DRA_RESOURCES:
            _g, _v, kind, namespaced, _short = RESOURCES[plural]
            resources.append({"name": plural, "singularName": kind.lower(), "namespaced": namespaced, "kind": kind,
                              "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update",
                                        "watch"]})
            if plural == "resourceclaims":
                resources.append({"name": plural + "/status", "singularName": "", "namespaced": True, "kind": kind,
                                  "verbs": ["get", "patch", "update"]})
        return (200, {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "%s/%s" % (GROUP, parts[2]),
                      "resources": resources}, {})
    return (404, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                  "message": "the server could not find the requested resource", "reason": "NotFound",
                  "details": {}, "code": 404}, {})


def version_served(api, resource, version):
    """Whether ``resource`` is served in ``version`` (other resources: only in their one version)."""
    if resource not in DRA_RESOURCES:
        return RESOURCES[resource][1] == version
    return version in served_versions(api)


def _path_version(path):
    parts = [p for p in path.split("/") if p]
    return parts[2] if len(parts) >= 3 and parts[0] == "apis" and parts[1] == GROUP else None


# ---------------------------------------------------------------- conversion (storage: v1)

_EXACT_FIELDS = ("deviceClassName", "selectors", "allocationMode", "count", "adminAccess", "tolerations")


def _claim_spec(spec, to_v1):
    requests = ((spec or {}).get("devices") or {}).get("requests")
    if not isinstance(requests, list):
        return
    out = []
    for req in requests:
        if not isinstance(req, dict):
            out.append(req)
            continue
        if to_v1:
            exact = dict((k, req[k]) for k in _EXACT_FIELDS if k in req)
            new = dict((k, v) for k, v in req.items() if k not in _EXACT_FIELDS)
            if exact:
                new["exactly"] = exact
        else:
            new = dict((k, v) for k, v in req.items() if k != "exactly")
            new.update(req.get("exactly") or {})
        out.append(new)
    spec["devices"]["requests"] = out


def convert(resource, obj, version, to_v1):
    """An object of ``resource`` between ``version`` and the stored v1 shape (v1beta2 has the v1 shapes)."""
    if not isinstance(obj, dict):
        return obj
    obj = copy.deepcopy(obj)
    if obj.get("apiVersion"):
        obj["apiVersion"] = "%s/%s" % (GROUP, "v1" if to_v1 else version)
    if version != "v1beta1":
        return obj
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else None
    if resource == "resourceslices" and spec and isinstance(spec.get("devices"), list):
        devices = []
        for dev in spec["devices"]:
            if not isinstance(dev, dict):
                devices.append(dev)
            elif to_v1:
                flat = {"name": dev.get("name")}
                flat.update(dev.get("basic") or {})
                devices.append(flat)
            else:
                devices.append({"name": dev.get("name"),
                                "basic": dict((k, v) for k, v in dev.items() if k != "name")})
        spec["devices"] = devices
    elif resource == "resourceclaims" and spec:
        _claim_spec(spec, to_v1)
    elif resource == "resourceclaimtemplates" and spec and isinstance(spec.get("spec"), dict):
        _claim_spec(spec["spec"], to_v1)
    return obj


def around(api, req, resource, call):
    """Run ``call(req)`` for a request; requests in another version than v1 are converted both ways."""
    if resource not in DRA_RESOURCES:
        return call(req)
    version = _path_version(req.path)
    if version == "v1":
        return _dry_run_create(resource, req, call(req))
    body = req.body
    if body:
        try:
            data = json.loads(body.decode("utf-8"))
        except ValueError:
            data = None
        if isinstance(data, dict) and req.method in ("POST", "PUT"):
            body = json.dumps(convert(resource, data, version, True)).encode("utf-8")
    path = req.path.replace("/apis/%s/%s/" % (GROUP, version), "/apis/%s/v1/" % GROUP, 1)
    converted = Request(req.method, path, req.query, req.headers, body, peer_cert=req.peer_cert)
    result = _dry_run_create(resource, req, call(converted))
    if not isinstance(result, tuple):
        # watches stream the stored v1 shape: not converted (the collection does not watch v1beta1)
        return result
    code, answer, headers = result
    if isinstance(answer, dict) and answer.get("kind", "").endswith("List") and "items" in answer:
        answer = dict(answer, apiVersion="%s/%s" % (GROUP, version),
                      items=[convert(resource, i, version, False) for i in answer["items"]])
    elif isinstance(answer, dict) and answer.get("kind") != "Status":
        answer = convert(resource, answer, version, False)
    return (code, answer, headers)


def _dry_run_create(resource, req, result):
    """A dry-run create answers the object as the registry prepared it: generation 1 for a DeviceClass
    (measured on v1.36.2), a uid, no resourceVersion (nothing was written)."""
    if (resource == "deviceclasses" and req.method == "POST" and req.q("dryRun") and isinstance(result, tuple)
            and result[0] == 201 and isinstance(result[1], dict)):
        meta = result[1].setdefault("metadata", {})
        meta.setdefault("generation", 1)
        meta.setdefault("uid", str(uuid.uuid4()))
    return result
