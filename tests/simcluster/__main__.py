# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run the simulated cluster as a process:

    python -m tests.simcluster --config tests/simcluster/examples/demo.yaml --write-kubeconfig /tmp/kc

prints the URL (first line of stdout) and serves until SIGTERM or SIGINT.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import os
import signal
import sys
import threading

from tests.simcluster import SimCluster
from tests.simcluster.config import ConfigError, load_config


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tests.simcluster",
                                     description="Serve a simulated Kubernetes API (test equipment).")
    parser.add_argument("--config", help="YAML configuration (default: tests/simcluster/examples/default.yaml)")
    parser.add_argument("--write-kubeconfig", metavar="PATH", help="write a kubeconfig (admin token, CA embedded)")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    parser.add_argument("--no-tls", action="store_true", help="serve plain HTTP")
    parser.add_argument("--admin-token", help="use this admin token instead of a random one")
    parser.add_argument("--no-controllers", action="store_true",
                        help="serve the API only (no kubelets, scheduler, DaemonSet controller)")
    parser.add_argument("--kubelets", choices=("in-process", "stand-in"), default="in-process",
                        help="where the configured nodes' kubelets run: in the controller worker, or the kubelet "
                             "stand-in of tests/support/kubelet.py through the API (as the integration suite runs)")
    args = parser.parse_args(argv)

    try:
        config = load_config(args.config) if args.config else None
    except (ConfigError, OSError) as e:
        parser.error("cannot read --config: %s" % e)
    if args.admin_token:
        config = config or load_config(os.path.join(os.path.dirname(__file__), "examples", "default.yaml"))
        config["admin_token"] = args.admin_token

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: stop.set())
    signal.signal(signal.SIGINT, lambda *a: stop.set())

    sim = SimCluster(config, tls=not args.no_tls, port=args.port, controllers=not args.no_controllers,
                     kubelets=args.kubelets)
    sim.start()
    try:
        if args.write_kubeconfig:
            sim.write_kubeconfig(args.write_kubeconfig)
        print(sim.url, flush=True)
        if args.write_kubeconfig:
            print("kubeconfig written to %s" % args.write_kubeconfig, file=sys.stderr, flush=True)
        while not stop.wait(0.5):
            pass
    finally:
        sim.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
