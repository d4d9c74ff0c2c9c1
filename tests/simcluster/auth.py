# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""TLS material, authentication and RBAC authorization of the simulated cluster.

The answers follow kube-apiserver v1.32 with ``--authorization-mode=Node,RBAC`` and
``--anonymous-auth=true`` (the kubeadm defaults):

* ``Authorization: Bearer <token>`` with an unknown token is 401 ``Unauthorized``;
* a request without a bearer token (no header, or ``Basic``, which no authenticator
  has handled since 1.19) is ``system:anonymous`` in group ``system:unauthenticated``,
  so it is usually refused with 403 by RBAC, or 401 when anonymous auth is turned off;
* ``system:masters`` is allowed everything before RBAC is asked;
* RBAC evaluates the ClusterRoles, ClusterRoleBindings, Roles and RoleBindings that are
  stored in the cluster like any other object, so tests create them through the API.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import ipaddress
import os
import secrets

from tests.simcluster.store import RESOURCES


ADMIN_USER = "kubernetes-admin"
MASTERS_GROUP = "system:masters"
AUTHENTICATED_GROUP = "system:authenticated"
UNAUTHENTICATED_GROUP = "system:unauthenticated"
ANONYMOUS_USER = "system:anonymous"
SERVICEACCOUNT_PREFIX = "system:serviceaccount:"

RBAC_GROUP = "rbac.authorization.k8s.io"

# API groups of resources that are authorized but not stored (impersonation, reviews).
_EXTRA_GROUPS = {
    "users": "",
    "groups": "",
    "uids": "",
    "userextras": "authentication.k8s.io",
    "selfsubjectaccessreviews": "authorization.k8s.io",
    "selfsubjectrulesreviews": "authorization.k8s.io",
    "subjectaccessreviews": "authorization.k8s.io",
    "tokenreviews": "authentication.k8s.io",
    "leases": "coordination.k8s.io",
}


# ---------------------------------------------------------------- TLS

def make_tls(directory):
    """Write a throwaway CA and a server certificate for 127.0.0.1/localhost.

    Returns (ca_cert_path, server_cert_path, server_key_path). EC P-256 keys keep this at a
    few milliseconds, so every test can have its own cluster and its own trust root.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    not_before = now - datetime.timedelta(minutes=5)
    not_after = now + datetime.timedelta(days=2)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, u"simcluster-ca")])
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                     key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, key_cert_sign=True, crl_sign=True,
                                     encipher_only=False, decipher_only=False), critical=True)
        .add_extension(ca_ski, critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    server_key = ec.generate_private_key(ec.SECP256R1())
    server_cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, u"kube-apiserver")]))
        .issuer_name(ca_name)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                     key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, key_cert_sign=False, crl_sign=False,
                                     encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName([
            x509.DNSName(u"localhost"),
            x509.DNSName(u"kubernetes.default.svc"),
            x509.IPAddress(ipaddress.ip_address(u"127.0.0.1")),
            x509.IPAddress(ipaddress.ip_address(u"::1")),
        ]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    if not os.path.isdir(directory):
        os.makedirs(directory)
    ca_path = os.path.join(directory, "ca.crt")
    cert_path = os.path.join(directory, "apiserver.crt")
    key_path = os.path.join(directory, "apiserver.key")
    with open(ca_path, "wb") as f:
        f.write(ca_cert.public_bytes(serialization.Encoding.PEM))
    with open(cert_path, "wb") as f:
        f.write(server_cert.public_bytes(serialization.Encoding.PEM))
    _write_key(key_path, server_key)
    # kept next to ca.crt so make_client_cert can issue client certificates from the same CA
    _write_key(os.path.join(directory, "ca.key"), ca_key)
    return ca_path, cert_path, key_path


def _write_key(path, key):
    from cryptography.hazmat.primitives import serialization

    # the keys are throwaways, but keep them private like real ones
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))


def make_client_cert(directory, user, groups=(), name=None):
    """Issue a client certificate from the CA that make_tls wrote into directory.

    As with kubeadm's admin.conf, the subject CN is the user and each O is a group.
    Returns (cert_path, key_path).
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    with open(os.path.join(directory, "ca.crt"), "rb") as f:
        ca_cert = x509.load_pem_x509_certificate(f.read())
    with open(os.path.join(directory, "ca.key"), "rb") as f:
        ca_key = serialization.load_pem_private_key(f.read(), password=None)
    now = datetime.datetime.now(datetime.timezone.utc)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
    subject.append(x509.NameAttribute(NameOID.COMMON_NAME, user))
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(subject))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    base = name or "client-" + "".join(c if c.isalnum() else "-" for c in user)
    cert_path = os.path.join(directory, base + ".crt")
    key_path = os.path.join(directory, base + ".key")
    with open(cert_path, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(key_path, key)
    return cert_path, key_path


def server_ssl_context(ca_path, cert_path, key_path):
    """The server side TLS context: serves cert_path, and asks for (but does not require) a
    client certificate signed by the cluster CA, as kube-apiserver's --client-ca-file does."""
    import ssl

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert_path, key_path)
    ctx.load_verify_locations(cafile=ca_path)
    ctx.verify_mode = ssl.CERT_OPTIONAL
    return ctx


# ---------------------------------------------------------------- Status bodies

def status_body(code, reason, message, details=None):
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details is not None:
        body["details"] = details
    return body


def unauthorized_status():
    """The 401 answer of a failed authentication, exactly as kube-apiserver sends it."""
    return status_body(401, "Unauthorized", "Unauthorized")


# ---------------------------------------------------------------- authentication

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


def _with_implicit_groups(user, groups):
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


def _user_from_peer_cert(peer_cert):
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
    return {"user": user, "groups": _with_implicit_groups(user, groups)}


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
        self._tokens[token] = {"user": user, "groups": _with_implicit_groups(user, groups),
                               "bound_to": bound_to, "expires": expires}

    def remove_token(self, token):
        self._tokens.pop(token, None)

    def authenticate(self, headers, peer_cert=None):
        """Return dict(user=..., groups=[...]) or None (answer 401 Unauthorized).

        peer_cert is ssl.SSLSocket.getpeercert() of the connection: a client certificate the
        TLS layer verified against the cluster CA authenticates first, as the apiserver's x509
        authenticator runs before the token authenticators.
        """
        from_cert = _user_from_peer_cert(peer_cert)
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
            groups = _with_implicit_groups(imp_user, groups)
        return {"user": imp_user, "groups": groups, "impersonated_by": info["user"]}, None


# ---------------------------------------------------------------- authorization

def request_verb(method, name=None, watch=False):
    """The authorizer verb of a resource request, as the apiserver's RequestInfo derives it."""
    method = method.upper()
    if method in ("GET", "HEAD"):
        if watch:
            return "watch"
        return "get" if name else "list"
    if method == "POST":
        return "create"
    if method == "PUT":
        return "update"
    if method == "PATCH":
        return "patch"
    if method == "DELETE":
        return "delete" if name else "deletecollection"
    return method.lower()


def api_group_of(resource):
    if resource in RESOURCES:
        return RESOURCES[resource][0]
    return _EXTRA_GROUPS.get(resource, "")


def _user_name(user):
    # the server may hand a user dict keyed "user" (authenticate) or "name" (its own impersonation)
    if isinstance(user, dict):
        return user.get("user") or user.get("name") or user.get("username")
    return user


def _user_groups(user):
    return list(user.get("groups") or []) if isinstance(user, dict) else []


def _subject_matches(subject, user_name, groups, binding_namespace):
    kind = subject.get("kind")
    name = subject.get("name")
    if kind == "User":
        return name == user_name
    if kind == "Group":
        return name in groups
    if kind == "ServiceAccount":
        # a RoleBinding's ServiceAccount subject without a namespace means the binding's own
        sa_namespace = subject.get("namespace") or binding_namespace
        if not sa_namespace or not name:
            return False
        return user_name == "%s%s:%s" % (SERVICEACCOUNT_PREFIX, sa_namespace, name)
    return False


def _verb_matches(rule, verb):
    verbs = rule.get("verbs") or []
    return "*" in verbs or verb in verbs


def _group_matches(rule, group):
    groups = rule.get("apiGroups") or []
    return "*" in groups or group in groups


def _resource_matches(rule, combined, subresource):
    for rule_resource in rule.get("resources") or []:
        if rule_resource == "*" or rule_resource == combined:
            return True
        # "*/status" grants the status subresource of every resource
        if subresource and rule_resource == "*/" + subresource:
            return True
    return False


def _name_matches(rule, name):
    names = rule.get("resourceNames") or []
    return not names or (bool(name) and name in names)


def _url_matches(rule, path):
    for url in rule.get("nonResourceURLs") or []:
        if url == "*" or url == path:
            return True
        if url.endswith("*") and path.startswith(url[:-1]):
            return True
    return False


def rule_allows(rule, verb, api_group, resource, subresource, name, path=None):
    if not _verb_matches(rule, verb):
        return False
    if path is not None:
        return _url_matches(rule, path)
    if rule.get("nonResourceURLs") and not rule.get("resources"):
        return False
    combined = resource + "/" + subresource if subresource else resource
    return (_group_matches(rule, api_group) and _resource_matches(rule, combined, subresource)
            and _name_matches(rule, name))


def _role_rules(store, role_ref, binding_namespace, errors):
    kind = role_ref.get("kind")
    name = role_ref.get("name")
    if kind == "ClusterRole":
        role = store.get("clusterroles", None, name)
        if role is None:
            errors.append('clusterrole.rbac.authorization.k8s.io "%s" not found' % name)
            return None
    elif kind == "Role" and binding_namespace:
        role = store.get("roles", binding_namespace, name)
        if role is None:
            errors.append('role.rbac.authorization.k8s.io "%s" not found' % name)
            return None
    else:
        return None
    return role.get("rules") or []


def _evaluate(store, user, verb, api_group, resource, subresource, namespace, name, path):
    user_name = _user_name(user)
    groups = _user_groups(user)
    errors = []
    bindings = [("ClusterRoleBinding", None, b) for b in store.list("clusterrolebindings")[0]]
    if namespace and path is None:
        bindings += [("RoleBinding", namespace, b) for b in store.list("rolebindings", namespace)[0]]
    for binding_kind, binding_ns, binding in bindings:
        subjects = binding.get("subjects") or []
        matched = [s for s in subjects if _subject_matches(s, user_name, groups, binding_ns)]
        if not matched:
            continue
        role_ref = binding.get("roleRef") or {}
        rules = _role_rules(store, role_ref, binding_ns, errors)
        if rules is None:
            continue
        for rule in rules:
            if rule_allows(rule, verb, api_group, resource, subresource, name, path):
                subject = matched[0]
                binding_name = binding["metadata"]["name"]
                if binding_ns:
                    binding_name += "/" + binding_ns
                # the same wording as the RBAC authorizer's allow reason
                return True, 'RBAC: allowed by %s "%s" of %s "%s" to %s "%s"' % (
                    binding_kind, binding_name, role_ref.get("kind"), role_ref.get("name"),
                    subject.get("kind"), subject.get("name"))
    if not errors:
        return False, ""
    if len(errors) == 1:
        return False, "RBAC: " + errors[0]
    return False, "RBAC: [" + ", ".join(errors) + "]"


def authorize(store, user, verb, resource, subresource, namespace, name, api_group=None):
    """Return (allowed, reason) for a resource request.

    user is the dict from Authenticator.authenticate (or a bare user name). api_group defaults
    to the group the resource is served from. reason is the RBAC authorizer's reason: on a
    denial it is "" unless a binding points at a missing role, and then it belongs at the end
    of the forbidden message (see forbidden_message).
    """
    if MASTERS_GROUP in _user_groups(user):
        return True, ""
    if api_group is None:
        api_group = api_group_of(resource)
    return _evaluate(store, user, verb, api_group, resource, subresource or "", namespace or "", name or "", None)


# Paths the bootstrap ClusterRoles system:discovery and system:public-info-viewer open to
# everyone; evaluated even when the store holds no such roles.
PUBLIC_PATHS = ("/healthz", "/livez", "/readyz", "/version", "/version/")
DISCOVERY_PATHS = ("/api", "/api/*", "/apis", "/apis/*", "/openapi", "/openapi/*") + PUBLIC_PATHS


def authorize_path(store, user, verb, path):
    """Return (allowed, reason) for a non-resource request (discovery, /version, /healthz)."""
    if MASTERS_GROUP in _user_groups(user):
        return True, ""
    groups = _user_groups(user)
    open_paths = PUBLIC_PATHS
    if AUTHENTICATED_GROUP in groups:
        open_paths = DISCOVERY_PATHS
    if verb == "get" and _url_matches({"nonResourceURLs": list(open_paths)}, path):
        return True, ""
    return _evaluate(store, user, verb, "", "", "", "", "", path)


def forbidden_message(user, verb, resource, subresource, api_group, namespace, name, reason=""):
    """The message of kube-apiserver's 403 answer for a resource request.

    ``nodes "n1" is forbidden: User "u" cannot patch resource "nodes/status" in API group ""
    at the cluster scope``; the group is appended to the resource before "is forbidden" for
    non-core groups (``daemonsets.apps is forbidden: ...``).
    """
    user_name = _user_name(user) or ""
    qualified = resource + "." + api_group if api_group else resource
    combined = resource + "/" + subresource if subresource else resource
    if namespace:
        what = 'User "%s" cannot %s resource "%s" in API group "%s" in the namespace "%s"' % (
            user_name, verb, combined, api_group, namespace)
    else:
        what = 'User "%s" cannot %s resource "%s" in API group "%s" at the cluster scope' % (
            user_name, verb, combined, api_group)
    if reason:
        what += ": " + reason
    if name:
        return '%s "%s" is forbidden: %s' % (qualified, name, what)
    return "%s is forbidden: %s" % (qualified, what)


def forbidden_status(user, verb, resource, subresource, api_group, namespace, name, reason=""):
    """The whole 403 Status body for a resource request."""
    if api_group is None:
        api_group = api_group_of(resource)
    details = {}
    if name:
        details["name"] = name
    if api_group:
        details["group"] = api_group
    details["kind"] = resource
    return status_body(403, "Forbidden",
                       forbidden_message(user, verb, resource, subresource, api_group, namespace, name, reason),
                       details)


def forbidden_path_status(user, verb, path, reason=""):
    """The 403 Status body for a non-resource request (``forbidden: User "x" cannot get path "/"``)."""
    msg = 'forbidden: User "%s" cannot %s path "%s"' % (_user_name(user) or "", verb, path)
    if reason:
        msg += ": " + reason
    return status_body(403, "Forbidden", msg, {})


# ---------------------------------------------------------------- bootstrap policy

def bootstrap_rbac():
    """The few bootstrap RBAC objects a fresh kubeadm cluster has that tests lean on.

    Returns a list of (resource, object) for SimCluster to create at start, so
    ``kubectl get clusterrole cluster-admin`` and bindings to it work as on a real cluster.
    """
    def role(name, rules):
        return ("clusterroles", {
            "metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
                         "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}},
            "rules": rules})

    def binding(name, role_name, groups):
        return ("clusterrolebindings", {
            "metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
                         "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}},
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": role_name},
            "subjects": [{"apiGroup": RBAC_GROUP, "kind": "Group", "name": g} for g in groups]})

    return [
        role("cluster-admin", [
            {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
            {"nonResourceURLs": ["*"], "verbs": ["*"]}]),
        role("system:discovery", [
            {"nonResourceURLs": list(DISCOVERY_PATHS), "verbs": ["get"]}]),
        role("system:public-info-viewer", [
            {"nonResourceURLs": list(PUBLIC_PATHS), "verbs": ["get"]}]),
        binding("cluster-admin", "cluster-admin", [MASTERS_GROUP]),
        binding("system:discovery", "system:discovery", [AUTHENTICATED_GROUP]),
        binding("system:public-info-viewer", "system:public-info-viewer",
                [AUTHENTICATED_GROUP, UNAUTHENTICATED_GROUP]),
    ]
