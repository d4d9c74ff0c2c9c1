# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubeconfig files for the test equipment (the fault proxy's clients), in the form kubectl and the official client read."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import os

import yaml


def _b64_file(path):
    with open(path, "rb") as f:
        return base64.b64encode(f.read()).decode("ascii")


def kubeconfig_dict(server_url, ca_cert_path, token, context="kubehw-test", user="kubehw-test-admin",
                    cluster="kubehw-test", namespace=None, client_cert=None, client_key=None):
    """A kubeconfig as a dict, with the CA (and client certificate) embedded so it stands alone.

    token may be None when client_cert/client_key (paths, see auth.make_client_cert) identify the user.
    """
    ca_data = _b64_file(ca_cert_path)
    credentials = {}
    if token:
        credentials["token"] = token
    if client_cert:
        credentials["client-certificate-data"] = _b64_file(client_cert)
        credentials["client-key-data"] = _b64_file(client_key)
    ctx = {"cluster": cluster, "user": user}
    if namespace:
        ctx["namespace"] = namespace
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [{"name": cluster, "cluster": {"server": server_url, "certificate-authority-data": ca_data}}],
        "users": [{"name": user, "user": credentials}],
        "contexts": [{"name": context, "context": ctx}],
        "current-context": context,
    }


def write_kubeconfig(path, server_url, ca_cert_path, token, context="kubehw-test", user="kubehw-test-admin",
                     cluster="kubehw-test", namespace=None, client_cert=None, client_key=None):
    """Write a kubeconfig to path (mode 0600, as it holds credentials) and return path."""
    data = kubeconfig_dict(server_url, ca_cert_path, token, context=context, user=user, cluster=cluster,
                           namespace=namespace, client_cert=client_cert, client_key=client_key)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        os.makedirs(directory)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        yaml.safe_dump(data, f, default_flow_style=False, sort_keys=False)
    return path
