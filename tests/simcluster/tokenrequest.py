# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The TokenRequest API (POST /api/v1/namespaces/<ns>/serviceaccounts/<name>/token).

Follows kube-apiserver v1.32, pkg/registry/core/serviceaccount/storage/token.go (TokenREST.Create)
and the API reference (TokenRequest v1, authentication.k8s.io):
- authorized as `create` on `serviceaccounts/token`; a missing service account answers 404
  `serviceaccounts "<name>" not found`;
- `spec.expirationSeconds` defaults to 3600; less than 600 answers 422
  `spec.expirationSeconds: Invalid value: N: may not specify a duration less than 10 minutes`,
  more than 2^32 `... may not specify a duration larger than 2^32 seconds`;
- `spec.audiences` defaults to the apiserver's audiences (`--api-audiences`, by default the issuer);
- the answer is 201 with the TokenRequest: `metadata` of the service account (name, namespace,
  creationTimestamp), the defaulted spec and `status: {token, expirationTimestamp}`.
The token authenticates as `system:serviceaccount:<ns>:<name>` (groups `system:serviceaccounts`,
`system:serviceaccounts:<ns>`, `system:authenticated`) until it expires or the service account is
deleted (the token is bound to the account's uid). Not simulated: the token is an opaque random
string, not a signed JWT, and `boundObjectRef` is stored but not enforced.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import json
import secrets

from tests.simcluster.store import StoreError, not_found

DEFAULT_EXPIRATION = 3600
MIN_EXPIRATION = 600
MAX_EXPIRATION = 2 ** 32
# kubeadm's default --service-account-issuer, which is also the default audience
DEFAULT_AUDIENCES = ["https://kubernetes.default.svc.cluster.local"]


def _invalid(name, field, value, detail):
    message = 'TokenRequest.authentication.k8s.io "%s" is invalid: %s: Invalid value: %s: %s' % (
        name, field, json.dumps(value), detail)
    details = {"name": name} if name else {}   # omitted when empty, as in every Status
    return StoreError(422, "Invalid", message, dict(details, **{
        "group": "authentication.k8s.io", "kind": "TokenRequest",
        "causes": [{"reason": "FieldValueInvalid", "message": "Invalid value: %s: %s" % (json.dumps(value), detail),
                    "field": field}]}))


def create_token(server, req, namespace, name):
    """Answer a TokenRequest; the token is registered with the server's authenticator."""
    account = server.store.get("serviceaccounts", namespace, name)
    if account is None:
        raise not_found("serviceaccounts", name)
    try:
        body = json.loads(req.body.decode("utf-8")) if req.body else {}
    except ValueError as e:
        raise StoreError(400, "BadRequest", "error decoding request body: %s" % e, {})
    if not isinstance(body, dict):
        raise StoreError(400, "BadRequest", "the body of the request was in an unknown format", {})
    spec = dict(body.get("spec") or {})
    # the errors name the TokenRequest as sent: "" when its metadata has no name (measured on v1.36.2)
    request_name = ((body.get("metadata") if isinstance(body.get("metadata"), dict) else None) or {}).get("name") or ""
    expiration = spec.get("expirationSeconds")
    if expiration is None:
        expiration = DEFAULT_EXPIRATION
    if not isinstance(expiration, int) or isinstance(expiration, bool):
        raise StoreError(400, "BadRequest", "json: cannot unmarshal %s into Go struct field "
                         "TokenRequestSpec.spec.expirationSeconds of type int64" % type(expiration).__name__, {})
    if expiration < MIN_EXPIRATION:
        raise _invalid(request_name, "spec.expirationSeconds", expiration, "may not specify a duration less than 10 minutes")
    if expiration > MAX_EXPIRATION:
        raise _invalid(request_name, "spec.expirationSeconds", expiration, "may not specify a duration larger than 2^32 seconds")
    spec["expirationSeconds"] = expiration
    spec["audiences"] = list(spec.get("audiences") or DEFAULT_AUDIENCES)
    spec.setdefault("boundObjectRef", None)
    meta = account["metadata"]
    token = secrets.token_urlsafe(48)
    expires = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=expiration)
    server.authenticator.add_token(token, "system:serviceaccount:%s:%s" % (namespace, name),
                                   bound_to=("serviceaccounts", namespace, name, meta.get("uid")),
                                   expires=expires)
    return (201, {
        "kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": meta.get("creationTimestamp")},
        "spec": spec,
        "status": {"token": token, "expirationTimestamp": expires.strftime("%Y-%m-%dT%H:%M:%SZ")},
    }, {})
