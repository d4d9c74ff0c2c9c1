# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A real Kubernetes control plane for the tests, `make demo` and the benchmarks, started by this launcher from a
folder of release binaries (kube-apiserver, kube-controller-manager, kube-scheduler, etcd), as controller-runtime's
envtest starts its own.

    bin_dir = k8s_binaries.locate()          # $KUBEHW_K8S_ASSETS, ../shared/k8s/bin, or what `make setup`
                                             # downloaded; None when there are none
    plane = ControlPlane(bin_dir, state_dir).start()   # free ports (PORT_FLOOR), a fresh etcd; certificates,
                                                       # tokens, logs in state_dir
    plane.kubeconfig, plane.agent_kubeconfig, plane.ca_cert, plane.audit_log
    plane.stop(wipe=True)

What it starts: etcd on 127.0.0.1; kube-apiserver with a CA and serving certificate of its own, static tokens for
``admin`` and ``agent`` (both system:masters; give ``agent.kubeconfig`` to whatever plays the kubelet, so the audit log
tells its writes apart), the controller manager's and the scheduler's identities, Node and RBAC authorization,
NodeRestriction, service-account token signing and a Metadata-level audit log (``logs/audit.log``); then
kube-controller-manager and kube-scheduler. ``DRAExtendedResource`` is on (the DRA modules' extended resource names).
The controller manager looks at nodes every second and marks a node whose kubelet stopped Unknown after 40 s, so a
test's node joins at once and a reboot is quick; nothing else differs from the binaries' defaults.

A control plane belongs to the processes listed in its state folder's ``owners/`` (the one that started it, and any
that share it). `start()` first stops and removes the sibling control planes whose owners have all gone (a run killed
before it could stop its own), so an interrupted run leaves nothing running past the next one.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import os
import random
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.request

from tests.support.tls import make_client_cert, make_tls, write_private_key

COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
FEATURE_GATES = "DRAExtendedResource=true"
# static tokens: (token, user, uid, groups)
TOKENS = (("kubehw-admin-token", "admin", "admin-uid", "system:masters"),
          ("kubehw-agent-token", "agent", "agent-uid", "system:masters"),
          ("kubehw-kcm-token", "system:kube-controller-manager", "kcm-uid", ""),
          ("kubehw-scheduler-token", "system:kube-scheduler", "scheduler-uid", ""))
AUDIT_POLICY = "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [\"RequestReceived\"]\nrules:\n- level: Metadata\n"


# Ports are picked below the kernel's ephemeral range (net.ipv4.ip_local_port_range), from PORT_FLOOR up: the kernel
# hands ports of that range to every bind(0) and every outgoing connection of the machine, so a port found free there
# may be some client's by the time a component binds it (a CI run once lost kube-scheduler's that way); below it only
# a process that names the port can take it.
PORT_FLOOR = 10000
# start() tries again with new ports when a component finds its port taken all the same (another control plane
# starting at the same moment picked it too): up to this many times in all
PORT_ATTEMPTS = 3


def unassigned_port_range(path="/proc/sys/net/ipv4/ip_local_port_range"):
    """(first, last): the ports from PORT_FLOOR up to just below the kernel's ephemeral range, or None where that
    range cannot be read or leaves fewer than 1,000 ports below it."""
    try:
        with open(path) as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    if low - PORT_FLOOR < 1000:
        return None
    return PORT_FLOOR, low - 1


def _bind(port):
    """A socket bound to 127.0.0.1:port (0: a port the kernel picks), or None where the port is taken."""
    sock = socket.socket()
    try:
        sock.bind(("127.0.0.1", port))
    except OSError:
        sock.close()
        return None
    return sock


def free_ports(count, port_range=None):
    """count distinct TCP ports free on 127.0.0.1 now, each with its neighbour free too (for etcd's peer port): below
    the kernel's ephemeral range (unassigned_port_range()), else any the kernel picks."""
    port_range = port_range or unassigned_port_range()
    found, held = [], []    # held: every socket stays bound until all are found, so no port is found twice
    tries = count * 200
    try:
        while len(found) < count:
            if tries == 0:
                raise ControlPlaneError("no %d free ports on 127.0.0.1 (with their neighbours) in %s" % (
                    count, "%d-%d" % port_range if port_range else "the kernel's ephemeral range"))
            tries -= 1
            sock = _bind(random.randint(port_range[0], port_range[1] - 1) if port_range else 0)
            if sock is None:
                continue
            held.append(sock)
            port = sock.getsockname()[1]
            neighbour = _bind(port + 1)
            if neighbour is None:
                continue
            held.append(neighbour)
            found.append(port)
    finally:
        for sock in held:
            sock.close()
    return found


class ControlPlaneError(RuntimeError):
    pass


class PortTaken(ControlPlaneError):
    """A component exited while starting because its port was taken (PORT_TAKEN in its log)."""


# what etcd and the Kubernetes components log (from Go's net package) when their port is taken
PORT_TAKEN = "address already in use"


def process_alive(pid):
    """The process runs (a zombie, exited but not yet reaped by its parent, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def owners(state_dir):
    """The pids of the processes a control plane's state folder belongs to. A folder without ``owners/`` (made before
    owners were recorded) belongs to the pid its name ends with (``<worker>-<pid>``), if any."""
    folder = os.path.join(state_dir, "owners")
    if os.path.isdir(folder):
        return [int(name) for name in os.listdir(folder) if name.isdigit()]
    tail = os.path.basename(state_dir.rstrip(os.sep)).rsplit("-", 1)[-1]
    return [int(tail)] if tail.isdigit() else []


def stop_processes(state_dir):
    """Stop the processes recorded in state_dir/run/*.pid, newest component first (TERM, then KILL after 10 s). A pid
    whose process is not the recorded component (the pid was reused) is left alone."""
    run = os.path.join(state_dir, "run")
    for name in reversed(COMPONENTS):
        path = os.path.join(run, name + ".pid")
        try:
            with open(path) as f:
                pid = int(f.read().strip() or 0)
        except (OSError, ValueError):
            continue
        try:
            exe = os.readlink("/proc/%d/exe" % pid)
        except OSError:
            exe = ""
        # two pytest workers may reap the same abandoned plane at once: a process or pid file the other one
        # removed first is gone, as wanted
        try:
            if pid and os.path.basename(exe.replace(" (deleted)", "")) == name:
                os.kill(pid, signal.SIGTERM)
                deadline = time.monotonic() + 10
                while process_alive(pid) and time.monotonic() < deadline:
                    time.sleep(0.1)
                if process_alive(pid):
                    os.kill(pid, signal.SIGKILL)
            os.remove(path)
        except (ProcessLookupError, FileNotFoundError):
            continue


def reap_abandoned(base):
    """Stop and remove every control plane under base (folders holding ``run/``) whose owners are all gone; returns
    their folders."""
    reaped = []
    for name in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        state = os.path.join(base, name)
        if not os.path.isdir(os.path.join(state, "run")) or any(process_alive(pid) for pid in owners(state)):
            continue
        stop_processes(state)
        shutil.rmtree(state, ignore_errors=True)
        reaped.append(state)
    return reaped


def _kubeconfig(path, port, ca_pem, user, token):
    ca = base64.b64encode(ca_pem).decode("ascii")
    text = ("apiVersion: v1\nkind: Config\nclusters:\n- name: kubehw-test\n  cluster:\n"
            "    server: https://127.0.0.1:%d\n    certificate-authority-data: %s\nusers:\n- name: %s\n  user:\n"
            "    token: %s\ncontexts:\n- name: %s@kubehw-test\n  context:\n    cluster: kubehw-test\n    user: %s\n"
            "current-context: %s@kubehw-test\n" % (port, ca, user, token, user, user, user))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


class ControlPlane:
    """bin_dir: a folder with the four executables (k8s_binaries.locate()); state_dir: where this control plane keeps
    its certificates, etcd data, logs and pid files; controller_manager_args: flags added after (so overriding) the
    controller manager's own here (a benchmark of thousands of nodes raises its API rate and node grace period)."""

    def __init__(self, bin_dir, state_dir, controller_manager_args=()):
        self.bin_dir = os.path.abspath(bin_dir)
        self.state_dir = os.path.abspath(state_dir)
        self.pki = os.path.join(self.state_dir, "pki")
        self.logs = os.path.join(self.state_dir, "logs")
        self.kubeconfig = os.path.join(self.state_dir, "admin.kubeconfig")
        self.agent_kubeconfig = os.path.join(self.state_dir, "agent.kubeconfig")
        self.audit_log = os.path.join(self.logs, "audit.log")
        self.ca_cert = os.path.join(self.pki, "ca.crt")
        self.api_port = None
        self._procs = {}    # the components this object started: name -> Popen
        self._log_starts = {}   # name -> where its log stood when this object last started it (log_tail(since=))
        self.controller_manager_args = list(controller_manager_args)

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

    # -- start
    def start(self, timeout=120):
        reap_abandoned(os.path.dirname(self.state_dir))
        missing = [name for name in COMPONENTS if not os.access(os.path.join(self.bin_dir, name), os.X_OK)]
        if missing:
            raise ControlPlaneError("%s has no executable %s" % (self.bin_dir, ", ".join(missing)))
        self.stop()     # a leftover of an interrupted run under the same folder
        for folder in (self.pki, self.logs, os.path.join(self.state_dir, "run")):
            os.makedirs(folder, exist_ok=True)
        self.add_owner()
        deadline = time.monotonic() + timeout
        for _attempt in range(PORT_ATTEMPTS):
            try:
                return self._start_on(free_ports(4), deadline)
            except PortTaken as err:
                taken = err
        raise ControlPlaneError("%s (%d attempts, each with new ports)" % (taken, PORT_ATTEMPTS))

    def _start_on(self, ports, deadline):
        """Start the components on these ports (apiserver, etcd and etcd + 1, controller manager, scheduler) with a
        fresh etcd; raise PortTaken, with everything stopped again, when a component finds its port taken."""
        api, etcd, kcm, sched = ports
        shutil.rmtree(os.path.join(self.state_dir, "etcd-data"), ignore_errors=True)
        os.makedirs(os.path.join(self.state_dir, "etcd-data"), mode=0o700)
        self.api_port = api
        try:
            self._write_credentials(api)
            self._spawn("etcd", [
                "--name", "kubehw-test", "--data-dir", os.path.join(self.state_dir, "etcd-data"),
                "--listen-client-urls", "http://127.0.0.1:%d" % etcd,
                "--advertise-client-urls", "http://127.0.0.1:%d" % etcd,
                "--listen-peer-urls", "http://127.0.0.1:%d" % (etcd + 1),
                "--initial-advertise-peer-urls", "http://127.0.0.1:%d" % (etcd + 1),
                "--initial-cluster", "kubehw-test=http://127.0.0.1:%d" % (etcd + 1)])
            self._wait("etcd", "http://127.0.0.1:%d/health" % etcd, lambda body: b'"health":"true"' in body, deadline)
            self._spawn("kube-apiserver", self._apiserver_args(api, etcd))
            self._wait("kube-apiserver", "https://127.0.0.1:%d/readyz" % api, lambda body: body == b"ok", deadline,
                       token="kubehw-admin-token")
            self._spawn("kube-controller-manager", self._component_args("kcm", kcm) + [
                "--use-service-account-credentials=true", "--root-ca-file", self.ca_cert,
                "--service-account-private-key-file", os.path.join(self.pki, "sa.key"),
                "--cluster-signing-cert-file", self.ca_cert,
                "--cluster-signing-key-file", os.path.join(self.pki, "ca.key"),
                "--service-cluster-ip-range", "10.0.0.0/24",
                # a test's new node joins within a second; a stopped kubelet's node turns Unknown after 40 s
                "--node-monitor-period=1s", "--node-monitor-grace-period=40s"] + self.controller_manager_args)
            self._spawn("kube-scheduler", self._component_args("scheduler", sched))
            for name, port in (("kube-controller-manager", kcm), ("kube-scheduler", sched)):
                self._wait(name, "https://127.0.0.1:%d/healthz" % port, lambda body: body == b"ok", deadline)
        except ControlPlaneError:
            self.stop()
            raise
        return self

    def _write_credentials(self, api):
        ca_path, _cert, _key = make_tls(self.pki, sans=("10.0.0.1", "kubernetes", "kubernetes.default"))
        make_client_cert(self.pki, "kube-apiserver-kubelet-client",
                         name="apiserver-kubelet-client")
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ec

        sa_key = ec.generate_private_key(ec.SECP256R1())
        write_private_key(os.path.join(self.pki, "sa.key"), sa_key)
        with open(os.path.join(self.pki, "sa.pub"), "wb") as f:
            f.write(sa_key.public_key().public_bytes(serialization.Encoding.PEM,
                                                     serialization.PublicFormat.SubjectPublicKeyInfo))
        fd = os.open(os.path.join(self.pki, "tokens.csv"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            for token, user, uid, groups in TOKENS:
                f.write('%s,%s,%s%s\n' % (token, user, uid, ',"%s"' % groups if groups else ""))
        with open(os.path.join(self.state_dir, "audit-policy.yaml"), "w") as f:
            f.write(AUDIT_POLICY)
        with open(ca_path, "rb") as f:
            ca_pem = f.read()
        for filename, (token, user, _uid, _groups) in zip(
                ("admin.kubeconfig", "agent.kubeconfig", "kcm.kubeconfig", "scheduler.kubeconfig"), TOKENS):
            _kubeconfig(os.path.join(self.state_dir, filename), api, ca_pem, user, token)

    def _apiserver_args(self, api, etcd):
        pki = self.pki
        return [
            "--secure-port", str(api), "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
            "--etcd-servers", "http://127.0.0.1:%d" % etcd, "--service-cluster-ip-range", "10.0.0.0/24",
            "--tls-cert-file", os.path.join(pki, "apiserver.crt"),
            "--tls-private-key-file", os.path.join(pki, "apiserver.key"), "--client-ca-file", self.ca_cert,
            "--token-auth-file", os.path.join(pki, "tokens.csv"), "--authorization-mode", "Node,RBAC",
            "--enable-admission-plugins", "NodeRestriction",
            "--service-account-issuer", "https://kubernetes.default.svc",
            "--service-account-key-file", os.path.join(pki, "sa.pub"),
            "--service-account-signing-key-file", os.path.join(pki, "sa.key"),
            "--allow-privileged=true", "--endpoint-reconciler-type", "none",
            # a real node's kubelet (tests/support/real_node.py): reached by its address, with a client certificate
            "--kubelet-preferred-address-types", "InternalIP,Hostname",
            "--kubelet-client-certificate", os.path.join(pki, "apiserver-kubelet-client.crt"),
            "--kubelet-client-key", os.path.join(pki, "apiserver-kubelet-client.key"),
            "--audit-policy-file", os.path.join(self.state_dir, "audit-policy.yaml"),
            "--audit-log-path", self.audit_log, "--audit-log-maxsize", "512", "--audit-log-maxbackup", "2",
            "--feature-gates=" + FEATURE_GATES]

    def _component_args(self, identity, port):
        kubeconfig = os.path.join(self.state_dir, identity + ".kubeconfig")
        return ["--kubeconfig", kubeconfig, "--authentication-kubeconfig", kubeconfig,
                "--authorization-kubeconfig", kubeconfig, "--bind-address", "127.0.0.1", "--secure-port", str(port),
                "--leader-elect=false", "--feature-gates=" + FEATURE_GATES]

    def _spawn(self, name, args):
        """Start a component in a session of its own (so a test's signals never reach it), its output appended to
        logs/<name>.log, its pid in run/<name>.pid."""
        log = open(os.path.join(self.logs, name + ".log"), "ab")
        try:
            self._log_starts[name] = log.tell()
            proc = subprocess.Popen([os.path.join(self.bin_dir, name)] + args, stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True, close_fds=True)
        finally:
            log.close()
        with open(os.path.join(self.state_dir, "run", name + ".pid"), "w") as f:
            f.write(str(proc.pid))
        self._procs[name] = proc

    def _wait(self, name, url, healthy, deadline, token=None):
        context = ssl.create_default_context(cafile=self.ca_cert) if name == "kube-apiserver" else None
        if url.startswith("https") and context is None:
            # the controllers serve /healthz with a self-signed certificate of their own
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        request = urllib.request.Request(url, headers={"Authorization": "Bearer " + token} if token else {})
        since = self._log_starts.get(name, 0)   # this start's lines only, not an earlier attempt's
        while True:
            proc = self._procs[name]
            if proc.poll() is not None:
                tail = self.log_tail(name, since=since)
                error = PortTaken if PORT_TAKEN in tail else ControlPlaneError
                raise error("%s exited (code %s) while starting:\n%s" % (name, proc.returncode, tail))
            try:
                with urllib.request.urlopen(request, timeout=2, context=context) as resp:
                    if healthy(resp.read().strip()):
                        return
            except (OSError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise ControlPlaneError("%s not healthy at %s in time:\n%s"
                                        % (name, url, self.log_tail(name, since=since)))
            time.sleep(0.1)

    def log_tail(self, name, lines=20, since=0):
        """The last lines of a component's log (of what it wrote from byte `since` on)."""
        try:
            with open(os.path.join(self.logs, name + ".log"), "rb") as f:
                f.seek(since)
                return b"\n".join(f.read().splitlines()[-lines:]).decode("utf-8", "replace")
        except OSError:
            return "(no log)"

    def stop(self, wipe=False):
        """Stop the control plane (also one another process started under the same folder); wipe: also remove its
        state folder."""
        for name in reversed(COMPONENTS):
            proc = self._procs.pop(name, None)
            if proc is None:
                continue
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            try:
                os.remove(os.path.join(self.state_dir, "run", name + ".pid"))
            except FileNotFoundError:
                pass
        stop_processes(self.state_dir)
        if wipe:
            shutil.rmtree(self.state_dir, ignore_errors=True)
