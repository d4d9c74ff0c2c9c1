#!/usr/bin/env python
# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The baseline of the 5,000-node benchmark: a bare concurrent Python client.

What a user who knows the node names would write without the collection: the official client,
a ThreadPoolExecutor of ``parallel`` workers, one JSON-patch PATCH per node to the status
subresource, responses not deserialized into models. No read, no comparison, no lost-update guard,
no validation: the fastest honest way to send the same writes, so the module is measured against it.

  python bare_client.py KUBECONFIG NAMES_FILE PARALLEL RESOURCE VALUE
prints one JSON line {"patched": N, "failed": N}.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import sys
from concurrent.futures import ThreadPoolExecutor

from kubernetes import client, config


def main():
    kubeconfig, names_file, parallel, resource, value = sys.argv[1:6]
    parallel = int(parallel)
    with open(names_file) as f:
        names = [line.strip() for line in f if line.strip()]
    configuration = client.Configuration()
    config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    configuration.connection_pool_maxsize = parallel  # one kept-alive connection per worker
    core = client.CoreV1Api(client.ApiClient(configuration))
    pointer = "/status/capacity/" + resource.replace("~", "~0").replace("/", "~1")
    body = [{"op": "add", "path": pointer, "value": value}]

    def patch(name):
        resp = core.patch_node_status(name, body, _content_type="application/json-patch+json",
                                      _preload_content=False)
        resp.data  # read the answer so the connection goes back to the pool
        return resp.status == 200

    with ThreadPoolExecutor(max_workers=parallel) as pool:
        outcomes = list(pool.map(patch, names))
    print(json.dumps({"patched": sum(outcomes), "failed": len(outcomes) - sum(outcomes)}))


if __name__ == "__main__":
    main()
