# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Who a request is, as the simulated cluster's authentication, authorization and request log read it: the users and
groups kube-apiserver knows of itself, and a user's name and groups.

A user is the dict Authenticator.authenticate and identify return (authn.py: ``{"user", "groups"}``), a dict keyed
``name`` or ``username`` (as tests write them), or a bare user name.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def user_name(user):
    """The name of a user (None for None); what RBAC matches User subjects with and the request log records."""
    if isinstance(user, dict):
        return user.get("user") or user.get("name") or user.get("username")
    return user


def user_groups(user):
    """The groups of a user; a bare name has none."""
    return list(user.get("groups") or []) if isinstance(user, dict) else []


# The users and groups kube-apiserver knows of itself (kubeadm's admin user among them).
ADMIN_USER = "kubernetes-admin"
MASTERS_GROUP = "system:masters"
AUTHENTICATED_GROUP = "system:authenticated"
UNAUTHENTICATED_GROUP = "system:unauthenticated"
ANONYMOUS_USER = "system:anonymous"
SERVICEACCOUNT_PREFIX = "system:serviceaccount:"
