# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Authentication of the simulated cluster, as kube-apiserver v1.32 with ``--anonymous-auth=true`` (the kubeadm
default) answers it: a client certificate signed by the cluster CA first (CN the user, each O a group), then bearer
tokens (an unknown or expired one is 401 ``Unauthorized``), else ``system:anonymous`` (or 401 when anonymous auth is
off); then the Impersonate-User/Impersonate-Group headers, each authorized by RBAC (rbac.py).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import secrets

from tests.simcluster.errors import status_body
from tests.simcluster.rbac import authorize, forbidden_status
from tests.simcluster.users import (
    ADMIN_USER, ANONYMOUS_USER, AUTHENTICATED_GROUP, MASTERS_GROUP, SERVICEACCOUNT_PREFIX, UNAUTHENTICATED_GROUP,
)


def unauthorized_status():
    """The 401 answer of a failed authentication, exactly as kube-apiserver sends it."""
    return status_body(401, "Unauthorized", "Unauthorized")


def _header(headers, name):
    """Case-insensitive header lookup on a dict or an http.client.HTTPMessage."""
    if headers is None:
        return None
    getter = getattr(headers, "get_all", None)
    if getter is not None:
        values = getter(name)
        return values[0] if values else None
    lname = name.lower()
    for key, value in headers.items():
        if key.lower() == lname:
            return value
    return None


def _header_all(headers, name):
    if headers is None:
        return []
    getter = getattr(headers, "get_all", None)
    if getter is not None:
        return list(getter(name) or [])
    lname = name.lower()
    out = []
    for key, value in headers.items():
        if key.lower() == lname:
            out.extend(value if isinstance(value, (list, tuple)) else [value])
    return out


def with_implicit_groups(user, groups):
    """Groups the apiserver adds itself: service-account groups and system:authenticated."""
    groups = list(groups or [])
    if user.startswith(SERVICEACCOUNT_PREFIX):
        parts = user[len(SERVICEACCOUNT_PREFIX):].split(":")
        if len(parts) == 2:
            for extra in ("system:serviceaccounts", "system:serviceaccounts:" + parts[0]):
                if extra not in groups:
                    groups.append(extra)
    if AUTHENTICATED_GROUP not in groups:
        groups.append(AUTHENTICATED_GROUP)
    return groups


def user_from_peer_cert(peer_cert):
    """CN is the user, each O a group; None without a (verified) certificate."""
    if not peer_cert:
        return None
    user, groups = None, []
    for rdn in peer_cert.get("subject") or ():
        for key, value in rdn:
            if key == "commonName":
                user = value
            elif key == "organizationName":
                groups.append(value)
    if not user:
        return None
    return {"user": user, "groups": with_implicit_groups(user, groups)}


class Authenticator:
    """Bearer tokens: a generated admin token plus the config's ``tokens:`` list.

    config keys used: ``tokens`` (list of {token, user, groups}), ``admin_token`` (optional,
    fixes the admin token, e.g. for a long-running ``python -m tests.simcluster``),
    ``anonymous_auth`` (default true, like kube-apiserver's ``--anonymous-auth``).
    """

    def __init__(self, config=None):
        config = config or {}
        self.admin_token = config.get("admin_token") or secrets.token_urlsafe(32)
        self.anonymous_auth = bool(config.get("anonymous_auth", True))
        self._tokens = {}
        self.add_token(self.admin_token, ADMIN_USER, [MASTERS_GROUP])
        for entry in config.get("tokens") or []:
            self.add_token(entry["token"], entry["user"], entry.get("groups") or [])

    def add_token(self, token, user, groups=None, bound_to=None, expires=None):
        """Register (or replace) a bearer token; tests may add identities to a running cluster.

        bound_to: (resource, namespace, name, uid) of the object a TokenRequest token is bound to
        (tokenrequest.py): the token stops authenticating once that object is gone. expires: an
        aware datetime after which the token is refused.
        """
        if not token or not user:
            raise ValueError("a token entry needs a non-empty token and user")
        self._tokens[token] = {"user": user, "groups": with_implicit_groups(user, groups),
                               "bound_to": bound_to, "expires": expires}

    def remove_token(self, token):
        self._tokens.pop(token, None)

    def authenticate(self, headers, peer_cert=None):
        """Return dict(user=..., groups=[...]) or None (answer 401 Unauthorized).

        peer_cert is ssl.SSLSocket.getpeercert() of the connection: a client certificate the
        TLS layer verified against the cluster CA authenticates first, as the apiserver's x509
        authenticator runs before the token authenticators.
        """
        from_cert = user_from_peer_cert(peer_cert)
        if from_cert is not None:
            return from_cert
        auth = (_header(headers, "Authorization") or "").strip()
        parts = auth.split(" ", 2)
        if len(parts) >= 2 and parts[0].lower() == "bearer" and parts[1]:
            info = self._tokens.get(parts[1])
            if info is None:
                return None
            if info.get("expires") and datetime.datetime.now(datetime.timezone.utc) >= info["expires"]:
                return None
            out = {"user": info["user"], "groups": list(info["groups"])}
            if info.get("bound_to"):
                out["bound_to"] = info["bound_to"]
            return out
        # no bearer token: Basic and other schemes are left to the anonymous authenticator
        if self.anonymous_auth:
            return {"user": ANONYMOUS_USER, "groups": [UNAUTHENTICATED_GROUP]}
        return None

    def identify(self, store, headers, peer_cert=None):
        """Authenticate, then apply Impersonate-User/Impersonate-Group headers.

        Returns (user_info, None) or (None, (http_code, status_body)).
        """
        info = self.authenticate(headers, peer_cert)
        if info is not None and info.get("bound_to"):
            # a service-account token dies with its account (a new account of that name has another uid)
            resource, namespace, name, uid = info.pop("bound_to")
            bound = store.get(resource, namespace, name)
            if bound is None or bound["metadata"].get("uid") != uid:
                info = None
        if info is None:
            return None, (401, unauthorized_status())
        imp_user = _header(headers, "Impersonate-User")
        imp_groups = _header_all(headers, "Impersonate-Group")
        if not imp_user and not imp_groups:
            return info, None
        if not imp_user:
            return None, (500, status_body(
                500, "InternalError",
                "Internal error occurred: requested %s without impersonating a user"
                % ", ".join('{Group %s}' % g for g in imp_groups)))
        checks = [("users", imp_user)] + [("groups", g) for g in imp_groups]
        for resource, name in checks:
            allowed, reason = authorize(store, info, "impersonate", resource, "", None, name)
            if not allowed:
                return None, (403, forbidden_status(info, "impersonate", resource, "", "", None, name, reason))
        groups = list(imp_groups)
        if imp_user == ANONYMOUS_USER:
            if UNAUTHENTICATED_GROUP not in groups:
                groups.append(UNAUTHENTICATED_GROUP)
        else:
            groups = with_implicit_groups(imp_user, groups)
        return {"user": imp_user, "groups": groups, "impersonated_by": info["user"]}, None
