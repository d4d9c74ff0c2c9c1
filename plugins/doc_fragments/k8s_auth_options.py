# -*- coding: utf-8 -*-
# Copyright: kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # Connection options shared by every module that talks to the Kubernetes API and by the inventory plugin.
    # Names, aliases and environment variables match kubernetes.core, so
    # inventories, module_defaults and AWX credentials written for it work unchanged.
    # Only what is true for both belongs here: the modules' action group is the attribute
    # kubehw.devices.attributes.action_group.
    DOCUMENTATION = r"""
options:
  kubeconfig:
    description:
      - Path to a kubeconfig file, or the kubeconfig itself as a dictionary.
      - Can also be given with E(K8S_AUTH_KUBECONFIG).
      - When neither O(kubeconfig) nor O(host) is set, the in-cluster service account
        is used when running inside a pod (for example in an AWX execution environment),
        otherwise the default kubeconfig (E(KUBECONFIG) or C(~/.kube/config)).
    type: raw
  context:
    description:
      - The kubeconfig context to use. Can also be given with E(K8S_AUTH_CONTEXT).
    type: str
  host:
    description:
      - URL of the Kubernetes API server. Overrides the server of the kubeconfig.
      - Can also be given with E(K8S_AUTH_HOST).
    type: str
  api_key:
    description:
      - Bearer token used to authenticate. Can also be given with E(K8S_AUTH_API_KEY).
    type: str
  username:
    description:
      - User name for HTTP basic authentication. Can also be given with E(K8S_AUTH_USERNAME).
      - Kubernetes 1.19 and later do not accept basic authentication; use O(api_key) or client certificates.
    type: str
  password:
    description:
      - Password for HTTP basic authentication. Can also be given with E(K8S_AUTH_PASSWORD).
    type: str
  client_cert:
    description:
      - Path to a client certificate. Can also be given with E(K8S_AUTH_CERT_FILE).
    type: path
    aliases: [cert_file]
  client_key:
    description:
      - Path to the key of the client certificate. Can also be given with E(K8S_AUTH_KEY_FILE).
    type: path
    aliases: [key_file]
  ca_cert:
    description:
      - Path to the CA certificate used to verify the API server. Can also be given with E(K8S_AUTH_SSL_CA_CERT).
    type: path
    aliases: [ssl_ca_cert]
  validate_certs:
    description:
      - Whether to verify the API server's TLS certificate. Verification stays on unless this is set to V(false).
      - Can also be given with E(K8S_AUTH_VERIFY_SSL).
    type: bool
    aliases: [verify_ssl]
  proxy:
    description:
      - URL of an HTTP proxy to reach the API server through. Can also be given with E(K8S_AUTH_PROXY).
    type: str
  no_proxy:
    description:
      - Comma-separated hosts, domains, IP addresses or CIDRs to reach without the proxy.
      - Can also be given with E(K8S_AUTH_NO_PROXY).
    type: str
  proxy_headers:
    description:
      - Headers sent to the proxy.
    type: dict
    suboptions:
      proxy_basic_auth:
        description:
          - C(user:password) for the proxy's basic authentication.
        type: str
      basic_auth:
        description:
          - C(user:password) for basic authentication.
        type: str
      user_agent:
        description:
          - User agent sent to the proxy.
        type: str
  impersonate_user:
    description:
      - User to impersonate. Can also be given with E(K8S_AUTH_IMPERSONATE_USER).
    type: str
  impersonate_groups:
    description:
      - Groups to impersonate. Can also be given as a comma-separated E(K8S_AUTH_IMPERSONATE_GROUPS).
    type: list
    elements: str
  request_timeout:
    description:
      - Seconds to wait for the API server's answer to each request, once connected.
    type: float
    default: 30
  connect_timeout:
    description:
      - Seconds to wait for a connection to the API server (TCP and TLS) before the request fails.
      - An address that has not answered yet and refuses the connection, does not resolve, or does not connect
        within this time is reported at once, without retries; asking again does not mend a wrong O(host), port or
        network.
    type: float
    default: 5
  retry_timeout:
    description:
      - Seconds in all for which one request is asked again, with backoff (honouring C(Retry-After)), when the
        server answers 429 or 5xx or the connection drops after the server has answered once (an apiserver
        restarting, a load balancer's hiccup).
      - V(0) fails at the first such error.
    type: float
    default: 45
requirements:
  - kubernetes >= 24.2.0
"""
