# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""TLS material, authentication and RBAC authorization of the simulated cluster: the one name the rest of the
simulated cluster and the tests import them by (``from tests.simcluster import auth``).

The answers follow kube-apiserver v1.32 with ``--authorization-mode=Node,RBAC`` and
``--anonymous-auth=true`` (the kubeadm defaults):

* ``Authorization: Bearer <token>`` with an unknown token is 401 ``Unauthorized``;
* a request without a bearer token (no header, or ``Basic``, which no authenticator
  has handled since 1.19) is ``system:anonymous`` in group ``system:unauthenticated``,
  so it is usually refused with 403 by RBAC, or 401 when anonymous auth is turned off;
* ``system:masters`` is allowed everything before RBAC is asked;
* RBAC evaluates the ClusterRoles, ClusterRoleBindings, Roles and RoleBindings that are
  stored in the cluster like any other object, so tests create them through the API.

The parts, one concern a file: tls.py (the CA, server and client certificates, the server's TLS context), users.py
(the users and groups the apiserver knows of itself, a user's name and groups), authn.py (client certificates,
bearer tokens, anonymous, impersonation), rbac.py (RBAC, the 403 answers, the bootstrap policy).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from tests.simcluster.authn import Authenticator, unauthorized_status
from tests.simcluster.rbac import (
    DISCOVERY_PATHS, PUBLIC_PATHS, RBAC_GROUP, api_group_of, authorize, authorize_path, bootstrap_rbac,
    forbidden_message, forbidden_path_status, forbidden_status, request_verb, rule_allows,
)
from tests.simcluster.tls import make_client_cert, make_tls, server_ssl_context
from tests.simcluster.users import (
    ADMIN_USER, ANONYMOUS_USER, AUTHENTICATED_GROUP, MASTERS_GROUP, SERVICEACCOUNT_PREFIX, UNAUTHENTICATED_GROUP,
)

__all__ = [
    "ADMIN_USER", "ANONYMOUS_USER", "AUTHENTICATED_GROUP", "Authenticator", "DISCOVERY_PATHS", "MASTERS_GROUP",
    "PUBLIC_PATHS", "RBAC_GROUP", "SERVICEACCOUNT_PREFIX", "UNAUTHENTICATED_GROUP", "api_group_of", "authorize",
    "authorize_path", "bootstrap_rbac", "forbidden_message", "forbidden_path_status", "forbidden_status",
    "make_client_cert", "make_tls", "request_verb", "rule_allows", "server_ssl_context", "unauthorized_status",
]
