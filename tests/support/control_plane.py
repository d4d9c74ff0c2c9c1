# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A real Kubernetes control plane for the tests, from the up.sh/down.sh of a folder such as ../shared/k8s.

    plane = ControlPlane("/path/to/shared/k8s", state_dir)   # state (certificates, etcd data, logs) under state_dir
    plane.start()            # free ports, FRESH etcd; plane.kubeconfig (admin), plane.agent_kubeconfig (the
                             # identity a kubelet stand-in writes as), plane.audit_log
    plane.stop()

A control plane belongs to the processes listed in its state folder's ``owners/`` (the one that started it, and any
that share it). `start()` first stops and removes the sibling control planes whose owners have all gone (a run killed
before it could stop its own), so an interrupted run leaves nothing running past the next one.

`locate()` finds the folder: $KUBEHW_K8S_HOME when set, else ../shared/k8s beside the checkout; None without up.sh.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil
import socket
import subprocess

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def locate():
    """The folder holding up.sh and the control-plane binaries: $KUBEHW_K8S_HOME when set (and only there, so a
    user can say "none"), else ../shared/k8s beside the checkout; None when it has no up.sh."""
    candidate = os.environ.get("KUBEHW_K8S_HOME") or os.path.join(os.path.dirname(REPO_ROOT), "shared", "k8s")
    if os.path.isfile(os.path.join(candidate, "up.sh")):
        return os.path.abspath(candidate)
    return None


def free_ports(count):
    """count distinct TCP ports free on 127.0.0.1 now (each with its neighbour free too, for etcd's peer port)."""
    found, held = [], []
    try:
        while len(found) < count:
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
            held.append(sock)
            neighbour = socket.socket()
            try:
                neighbour.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
            finally:
                neighbour.close()
            if port not in found and port + 1 not in found:
                found.append(port)
    finally:
        for sock in held:
            sock.close()
    return found


class ControlPlaneError(RuntimeError):
    pass


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def owners(state_dir):
    """The pids of the processes a control plane's state folder belongs to. A folder without ``owners/`` (made before
    owners were recorded) belongs to the pid its name ends with (``<worker>-<pid>``), if any."""
    folder = os.path.join(state_dir, "owners")
    if os.path.isdir(folder):
        return [int(name) for name in os.listdir(folder) if name.isdigit()]
    tail = os.path.basename(state_dir.rstrip(os.sep)).rsplit("-", 1)[-1]
    return [int(tail)] if tail.isdigit() else []


def reap_abandoned(home, base):
    """Stop and remove every control plane under base (folders holding up.sh's ``run/``) whose owners are all gone;
    returns their folders."""
    reaped = []
    for name in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        state = os.path.join(base, name)
        if not os.path.isdir(os.path.join(state, "run")) or any(_alive(pid) for pid in owners(state)):
            continue
        subprocess.run(["bash", os.path.join(home, "down.sh"), state], capture_output=True, timeout=60, check=False,
                       env=dict(os.environ, WIPE="1"))
        shutil.rmtree(state, ignore_errors=True)
        reaped.append(state)
    return reaped


class ControlPlane:
    """state_dir: where up.sh keeps this control plane's state; bin_dir: where it unpacks the binaries (default: in
    state_dir), a folder runs can share so they unpack them once."""

    def __init__(self, home, state_dir, bin_dir=None):
        self.home = home
        self.state_dir = os.path.abspath(state_dir)
        self.bin_dir = os.path.abspath(bin_dir) if bin_dir else None
        self.kubeconfig = os.path.join(self.state_dir, "admin.kubeconfig")
        self.agent_kubeconfig = os.path.join(self.state_dir, "agent.kubeconfig")
        self.audit_log = os.path.join(self.state_dir, "logs", "audit.log")
        self.ca_cert = os.path.join(self.state_dir, "pki", "ca.crt")
        self.output = ""

    def add_owner(self, pid=None):
        """Record a process this control plane belongs to (the one starting it is recorded by start())."""
        folder = os.path.join(self.state_dir, "owners")
        os.makedirs(folder, exist_ok=True)
        open(os.path.join(folder, str(pid or os.getpid())), "w").close()

    def remove_owner(self, pid=None):
        """Forget a process; returns the pids still owning the control plane."""
        try:
            os.remove(os.path.join(self.state_dir, "owners", str(pid or os.getpid())))
        except FileNotFoundError:
            pass
        return owners(self.state_dir)

    def start(self, timeout=180):
        reap_abandoned(self.home, os.path.dirname(self.state_dir))
        api, etcd, kcm, sched = free_ports(4)
        env = dict(os.environ, K8S_API_PORT=str(api), K8S_ETCD_PORT=str(etcd), K8S_KCM_PORT=str(kcm),
                   K8S_SCHED_PORT=str(sched), FRESH="1")
        # The node lifecycle controller looks at nodes every 5 s by default: a test's new node would wait up to that
        # long for its not-ready taint to go. 1 s keeps every other behaviour and makes a node join within a second.
        # A node whose kubelet stopped turns Unknown after 20 s without a heartbeat instead of 50 s, so a test can
        # reboot a node; the kubelet stand-in heartbeats every 4 s (tests/support/kubelet.py).
        env["KCM_EXTRA_ARGS"] = (env.get("KCM_EXTRA_ARGS", "") +
                                 " --node-monitor-period=1s --node-monitor-grace-period=20s").strip()
        if self.bin_dir:
            env["KUBEHW_K8S_BIN"] = self.bin_dir
        os.makedirs(self.state_dir, exist_ok=True)
        self.stop()     # a leftover of an interrupted run under the same folder
        self.add_owner()
        proc = subprocess.run(["bash", os.path.join(self.home, "up.sh"), self.state_dir], env=env, capture_output=True,
                              text=True, timeout=timeout, check=False)
        self.output = proc.stdout + proc.stderr
        if proc.returncode != 0:
            self.stop()
            raise ControlPlaneError("%s/up.sh %s failed (exit %d):\n%s"
                                    % (self.home, self.state_dir, proc.returncode, self.output))
        return self

    def stop(self, wipe=False):
        """Stop the control plane; wipe: also remove its state folder."""
        subprocess.run(["bash", os.path.join(self.home, "down.sh"), self.state_dir], capture_output=True, timeout=60,
                       check=False, env=dict(os.environ, WIPE="1" if wipe else "0"))
