# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""TokenRequest (serviceaccounts/token) as kube-apiserver v1.32 serves it: the integration suite
gets its identities this way on any cluster."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from tests.simcluster.tests.test_api import Raw

TOKEN_PATH = "/api/v1/namespaces/default/serviceaccounts/%s/token"


@pytest.fixture
def sim(simcluster_factory):
    return simcluster_factory({"nodes": []}, controllers=False)


def make_account(raw, name="robot"):
    code, body, _headers = raw.request("POST", "/api/v1/namespaces/default/serviceaccounts",
                                       {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}})
    assert code == 201, body
    return body


def request_token(raw, name="robot", spec=None):
    return raw.request("POST", TOKEN_PATH % name, {"apiVersion": "authentication.k8s.io/v1",
                                                   "kind": "TokenRequest", "spec": spec or {}})


def test_token_authenticates_as_the_service_account_until_it_is_deleted(sim):
    admin = Raw(sim)
    make_account(admin)
    code, body, _headers = request_token(admin)
    assert code == 201, body
    assert body["kind"] == "TokenRequest" and body["apiVersion"] == "authentication.k8s.io/v1"
    assert body["metadata"]["name"] == "robot" and body["metadata"]["namespace"] == "default"
    assert body["spec"]["expirationSeconds"] == 3600 and body["spec"]["audiences"]
    token = body["status"]["token"]
    assert token and body["status"]["expirationTimestamp"].endswith("Z")
    robot = Raw(sim, token=token)
    code, denied, _headers = robot.request("GET", "/api/v1/nodes")
    assert code == 403, denied
    assert denied["message"] == ('nodes is forbidden: User "system:serviceaccount:default:robot" cannot list '
                                 'resource "nodes" in API group "" at the cluster scope')
    assert [r["user"] for r in sim.requests if r["path"] == "/api/v1/nodes"] == ["system:serviceaccount:default:robot"]
    # bound to the account's uid: deleting the account (or making a new one of that name) ends the token
    assert admin.request("DELETE", "/api/v1/namespaces/default/serviceaccounts/robot")[0] == 200
    make_account(admin)
    code, body, _headers = robot.request("GET", "/api/v1/nodes")
    assert code == 401 and body["reason"] == "Unauthorized"


def test_missing_account_and_short_expiration_are_refused(sim):
    admin = Raw(sim)
    code, body, _headers = request_token(admin, "ghost")
    assert code == 404 and body["message"] == 'serviceaccounts "ghost" not found'
    make_account(admin)
    code, body, _headers = request_token(admin, spec={"expirationSeconds": 60})
    assert code == 422 and body["reason"] == "Invalid"
    assert "spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes" in body["message"]


def test_token_request_needs_create_on_serviceaccounts_token(sim):
    admin = Raw(sim)
    make_account(admin)
    make_account(admin, "other")
    token = request_token(admin, "other")[1]["status"]["token"]
    code, body, _headers = request_token(Raw(sim, token=token))
    assert code == 403
    assert body["message"] == ('serviceaccounts "robot" is forbidden: User "system:serviceaccount:default:other" '
                               'cannot create resource "serviceaccounts/token" in API group "" in the namespace '
                               '"default"')
