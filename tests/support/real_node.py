# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A real node for the tests: a real kubelet and containerd in a throwaway Debian root file system run with
systemd-nspawn, registered with a test control plane (tests/support/control_plane.py).

    reason = unavailable()                       why no real node can run on this machine, or None
    node = RealNode(control_plane, state_dir, name)
    node.prepare()      the root file system (extensions/molecule/_shared/target.sh unpack, the suite of
                        SUITE), its containerd installed and configured by the collection's own roles
                        (real_node_files/runtime.yml through community.general.chroot), the images, the
                        kubelet's configuration and credentials
    node.start()        boots it (real_node_files/init.sh as PID 2) and waits until the Node is Ready
    node.run(argv)      a command inside the node (nsenter); node.kubelet_down(), node.kubelet_up();
    node.inventory(folder, **host_vars)  an inventory whose gpu_nodes host is the node, its modules run inside it
                        node.restart_containerd(); node.log(name)
    node.stop()         ends every process of the node, removes its cgroups and its root file system (its logs are
                        kept in <state_dir>/logs)

Why this shape (measured on 2-core machines without systemd as PID 1 and with a cgroup v1 hierarchy, see
../shared/k8s/node/README.md where present): a booted systemd of a current suite cannot run there, so the node's
PID 2 is a script; nspawn mounts the v1 controllers read-only (the script remounts them); the kubelet refuses cgroup
v1 unless failCgroupV1 is false; its setupNode() would write kernel tunables of the shared kernel (the script hides
them behind copies). The node has a network namespace of its own, so its pods' bridge, addresses and forwarding
never touch the host's network: on its loopback it holds the host's address (its node IP) and the kubernetes
Service's, and socat relays through Unix sockets in a shared folder carry the node's connections to the apiserver
(127.0.0.1 on the host) and the apiserver's to the kubelet (the host's address, a port of the node's own).
Containerd 2.x (Debian sid) because containerd 1.6 (bookworm) has no CDI.

Images come from local archives (tests/support/image_archive.py), never a registry: PAUSE_IMAGE (the sandbox image
containerd asks for), DEVICE_PLUGIN_IMAGE (Kubernetes' sample device plugin, `example.com/resource`),
DRA_DRIVER_IMAGE (Kubernetes' DRA test driver, `test-driver.cdi.k8s.io`), SHELL_IMAGE (busybox).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import signal
import socket
import subprocess
import time

import yaml

from tests.support import k8s_binaries
from tests.support.control_plane import free_ports
from tests.support.image_archive import write_image
from tests.support.kubeconfig import write_kubeconfig
from tests.support.playbook_runner import collections_path, run_playbook
from tests.support.tls import make_client_cert

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FILES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "real_node_files")
TARGET_SH = os.path.join(REPO_ROOT, "extensions", "molecule", "_shared", "target.sh")
SUITE = "sid"
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
DEVICE_PLUGIN_IMAGE = "kubehw.local/sample-device-plugin:v1.36.2"
DRA_DRIVER_IMAGE = "kubehw.local/dra-test-driver:v1.36.2"
SHELL_IMAGE = "kubehw.local/busybox:1"
# The pods' network, inside the node's own network namespace: a bridge whose address is the pods' gateway, through
# which they reach the node's addresses (the kubernetes Service's among them).
POD_NETWORK = {"cniVersion": "1.0.0", "name": "kubehw-real-node", "plugins": [
    {"type": "bridge", "bridge": "kubehw0", "isGateway": True, "ipMasq": False,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.0.0/24"}]], "routes": [{"dst": "0.0.0.0/0"}]}}]}
# The first address of the test control plane's service range (control_plane.py), in its certificate: the node and
# its pods reach the apiserver there, as pods of any cluster reach the kubernetes Service.
SERVICE_IP = "10.0.0.1"
CAP_SYS_RESOURCE = 24
HOST_TOOLS = ("systemd-nspawn", "nsenter", "mmdebstrap", "socat")


class RealNodeError(RuntimeError):
    pass


def unavailable():
    """Why a real node cannot run on this machine (one line), or None when it can."""
    if os.geteuid() != 0:
        return "not root (systemd-nspawn and the kubelet need it)"
    missing = [tool for tool in HOST_TOOLS if shutil.which(tool) is None]
    if missing:
        return "%s missing (make setup installs them)" % ", ".join(missing)
    if not os.path.isdir("/sys/fs/cgroup/memory") or not os.path.isdir("/sys/fs/cgroup/cpu"):
        return "no cgroup v1 memory and cpu controllers at /sys/fs/cgroup (the node's setup needs them)"
    if k8s_binaries.locate_node() is None:
        return "no kubelet and Kubernetes test plugins (%s) in %s" % (
            ", ".join(k8s_binaries.NODE_NAMES), " or ".join(k8s_binaries.candidates()))
    if _host_address() is None:
        return "no IPv4 address other than loopback (the kubelet refuses a loopback node IP)"
    return None


def _host_address():
    """The address this machine's default route leaves from (the node shares the host's network)."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("203.0.113.1", 9))       # a documentation address; a UDP connect sends no packet
        address = probe.getsockname()[0]
    except OSError:
        return None
    finally:
        probe.close()
    return None if address.startswith("127.") else address


# Kernel tunables the kubelet would change (setupNode) and the pods' network would (forwarding): the host's must stay.
WATCHED_SYSCTLS = ("vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
                   "net/ipv4/ip_forward")


def cgroups_named(match):
    """The host's cgroup directories (every hierarchy under /sys/fs/cgroup) whose name ``match(name)`` accepts, not
    those below one found."""
    found = []
    for hierarchy in os.listdir("/sys/fs/cgroup"):
        for directory, subdirectories, _files in os.walk(os.path.join("/sys/fs/cgroup", hierarchy)):
            hits = [name for name in subdirectories if match(name)]
            found.extend(os.path.join(directory, name) for name in hits)
            subdirectories[:] = [name for name in subdirectories if name not in hits]
    return sorted(found)


def host_footprint(state_dir):
    """What a real node must leave as it found it on the host: mounts under its state_dir, /proc/sys and
    /sys/fs/cgroup (other mounts come and go with the other stages running beside it), cgroups of real nodes, network
    interfaces, WATCHED_SYSCTLS. Compare the values before and after."""
    watched = (os.path.abspath(state_dir) + "/", "/proc/sys/", "/sys/fs/cgroup/")
    with open("/proc/self/mountinfo") as handle:
        mounts = sorted(point for point in (line.split()[4] for line in handle)
                        if (point + "/").startswith(watched))
    cgroups = cgroups_named(lambda name: name.startswith("kubehw-real-node-"))
    sysctls = {}
    for tunable in WATCHED_SYSCTLS:
        with open(os.path.join("/proc/sys", tunable)) as handle:
            sysctls[tunable] = handle.read().strip()
    return {"mounts": mounts, "cgroups": cgroups, "interfaces": sorted(os.listdir("/sys/class/net")),
            "sysctls": sysctls}


def _lacks_capability(bit):
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("CapBnd:"):
                return not int(line.split()[1], 16) & (1 << bit)
    return False


class RealNode:
    """control_plane: a started ControlPlane; state_dir: where the node's root file system and logs go."""

    def __init__(self, control_plane, state_dir, name):
        self.control_plane = control_plane
        self.state_dir = os.path.abspath(state_dir)
        self.target_dir = os.path.join(self.state_dir, "target")
        self.root = os.path.join(self.target_dir, "root")
        self.name = name
        self.cgroup_root = "kubehw-real-node-" + name
        self.address = _host_address()
        self.bin_dir = k8s_binaries.locate_node()
        self.sockets = os.path.join(self.state_dir, "sockets")
        self.process = None
        self._core = None       # the control plane's CoreV1Api, made at the first look at the Node
        self.relays = []
        self.kubelet_port, self.healthz_port = free_ports(2)

    # -- prepare
    def prepare(self):
        os.makedirs(self.state_dir, exist_ok=True)
        if os.path.exists(os.path.join(self.state_dir, "set-up.log")):
            os.remove(os.path.join(self.state_dir, "set-up.log"))
        self._timed("root file system unpacked", self._target, "unpack")
        shutil.copy("/etc/resolv.conf", os.path.join(self.root, "etc", "resolv.conf"))
        self._timed("containerd installed and configured by the roles", self.configure_runtime)
        self._write_node_files()
        self._timed("images written", self._write_images)

    def _timed(self, what, step, *args):
        """Run one step of the node's set-up and record how long it took (<state_dir>/set-up.log, which
        scripts/cluster_stage.sh prints after the run)."""
        started = time.monotonic()
        result = step(*args)
        self._note("%s in %.1f s" % (what, time.monotonic() - started))
        return result

    def _note(self, line):
        with open(os.path.join(self.state_dir, "set-up.log"), "a") as handle:
            handle.write("real node %s: %s\n" % (self.name, line))

    def _target(self, command):
        env = dict(os.environ, KUBEHW_TARGET_SUITE=SUITE)
        proc = subprocess.run(["bash", TARGET_SH, command, self.name, self.target_dir], env=env,
                              capture_output=True, text=True, check=False)
        if proc.returncode:
            raise RealNodeError("target.sh %s failed: %s" % (command, proc.stderr.strip()[-2000:]))

    def configure_runtime(self):
        """Run real_node_files/runtime.yml (the collection's roles) against the root file system, then the roles'
        part again, which must change nothing."""
        inventory = os.path.join(self.state_dir, "inventory.yml")
        with open(inventory, "w") as handle:
            yaml.safe_dump({"all": {"hosts": {self.name: {
                "ansible_connection": "community.general.chroot", "ansible_host": self.root,
                # each module piped to the root file system's Python: one chroot per task instead of five
                "ansible_pipelining": True, "ansible_python_interpreter": "/usr/bin/python3"}}}}, handle)
        workdir = os.path.join(self.state_dir, "ansible")
        os.makedirs(workdir, exist_ok=True)
        collections = collections_path(os.path.join(workdir, "collections"))
        run = run_playbook(os.path.join(FILES, "runtime.yml"), workdir, inventory=inventory, collections=collections,
                           timeout=600)
        if run.returncode:
            raise RealNodeError("the node's runtime play failed:\n%s" % run.output()[-4000:])
        # The roles again on what they wrote (containerd 2.1, a version 3 main file they edited): nothing to change.
        again = run_playbook(os.path.join(FILES, "runtime.yml"), workdir, inventory=inventory, collections=collections,
                             extra_vars={"node_roles_only": True}, timeout=600)
        changed = [r.get("task") for r in again.results if r.get("changed")]
        if again.returncode or changed:
            raise RealNodeError("the roles' second run on the node changed %s:\n%s" % (changed, again.output()[-4000:]))
        return run

    def _write_node_files(self):
        etc = os.path.join(self.root, "etc", "kubehw-node")
        os.makedirs(etc, exist_ok=True)
        os.makedirs(os.path.join(self.root, "etc", "cni", "net.d"), exist_ok=True)
        with open(os.path.join(self.root, "etc", "cni", "net.d", "10-kubehw-real-node.conflist"), "w") as handle:
            json.dump(POD_NETWORK, handle)
        cert, key = make_client_cert(self.control_plane.pki, "system:node:" + self.name, ["system:nodes"],
                                     name="node-" + self.name)
        write_kubeconfig(os.path.join(etc, "kubeconfig"), "https://%s:443" % SERVICE_IP,
                         self.control_plane.ca_cert, None, user="system:node:" + self.name,
                         client_cert=cert, client_key=key)
        shutil.copy(self.control_plane.ca_cert, os.path.join(etc, "ca.crt"))
        with open(os.path.join(etc, "kubelet.yaml"), "w") as handle:
            yaml.safe_dump(self.kubelet_config(), handle)
        with open(os.path.join(etc, "node.env"), "w") as handle:
            handle.write("NODE_NAME=%s\nNODE_IP=%s\nSERVICE_IP=%s\nKUBELET_PORT=%d\nKUBELET_CGROUP_ROOT=%s\n"
                         % (self.name, self.address, SERVICE_IP, self.kubelet_port, self.cgroup_root))
        for script in ("init.sh", "start-containerd.sh"):
            shutil.copy(os.path.join(FILES, script), os.path.join(etc, script))
        if _lacks_capability(CAP_SYS_RESOURCE):
            shutil.copy(os.path.join(FILES, "runc-keep-oom-score.sh"),
                        os.path.join(self.root, "usr", "local", "sbin", "runc"))

    def kubelet_config(self):
        return {
            "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            # no systemd as PID 1 in the node; cgroup v1 hosts are refused by default since v1.35
            "cgroupDriver": "cgroupfs", "cgroupRoot": "/" + self.cgroup_root, "failCgroupV1": False,
            "failSwapOn": False, "containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock",
            # ports of its own (the apiserver reaches it through the host's address), no iptables chains
            "address": self.address, "port": self.kubelet_port, "healthzBindAddress": "127.0.0.1",
            "healthzPort": self.healthz_port, "readOnlyPort": 0, "makeIPTablesUtilChains": False,
            "protectKernelDefaults": False,
            # only clients with a certificate of the control plane's CA (the apiserver, for logs) are served
            "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": False},
                               "x509": {"clientCAFile": "/etc/kubehw-node/ca.crt"}},
            "authorization": {"mode": "AlwaysAllow"},
            # a shared test machine: never evict for the host's disk or memory, never collect the local images
            "evictionHard": {"memory.available": "50Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
            "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
            "rotateCertificates": False, "serverTLSBootstrap": False, "registerNode": True, "maxPods": 20,
        }

    def _write_images(self):
        images = os.path.join(self.state_dir, "images")
        os.makedirs(images, exist_ok=True)

        def binary(name):
            return os.path.join(self.bin_dir, name)

        write_image(os.path.join(images, "pause.tar"), PAUSE_IMAGE, ["/pause"], {"pause": binary("pause")})
        write_image(os.path.join(images, "device-plugin.tar"), DEVICE_PLUGIN_IMAGE, ["/sample-device-plugin"],
                    {"sample-device-plugin": binary("sample-device-plugin")})
        # on the PATH, as the kubernetes_test preset of dra_driver_deploy runs it
        write_image(os.path.join(images, "dra-driver.tar"), DRA_DRIVER_IMAGE, ["dra-test-driver"],
                    {"usr/local/bin/dra-test-driver": binary("dra-test-driver")})
        write_image(os.path.join(images, "shell.tar"), SHELL_IMAGE, ["/bin/sh"],
                    {"bin/busybox": os.path.join(self.root, "bin", "busybox"), "bin/sh": "@busybox"})

    # -- run
    def _start_relays(self):
        """The host's halves of the relays: the node's apiserver socket to the apiserver, and the host's address at
        the kubelet's port to the node's kubelet socket."""
        os.makedirs(self.sockets, exist_ok=True)
        log = open(os.path.join(self.state_dir, "relays.log"), "ab")
        for argv in (["socat", "UNIX-LISTEN:%s,fork,unlink-early,mode=600" % os.path.join(self.sockets, "apiserver.sock"),
                      "TCP:127.0.0.1:%d" % self.control_plane.api_port],
                     ["socat", "TCP-LISTEN:%d,bind=%s,fork,reuseaddr" % (self.kubelet_port, self.address),
                      "UNIX-CONNECT:%s" % os.path.join(self.sockets, "kubelet.sock")]):
            self.relays.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                                start_new_session=True))
        log.close()

    def start(self, timeout=180):
        started = time.monotonic()
        self._start_relays()
        env = dict(os.environ, SYSTEMD_NSPAWN_UNIFIED_HIERARCHY="0", SYSTEMD_NSPAWN_TMPFS_TMP="0",
                   SYSTEMD_SECCOMP="0")
        log = open(os.path.join(self.state_dir, "nspawn.log"), "wb")
        self.process = subprocess.Popen(
            ["systemd-nspawn", "-D", self.root, "-M", self.name, "--as-pid2", "--register=no", "--keep-unit",
             "--capability=all", "--console=pipe", "--private-network",
             "--bind=%s:/run/kubehw-host" % self.sockets,
             # the kubelet's OOM watcher reads the kernel log
             "--bind-ro=/dev/kmsg",
             "--bind-ro=%s:/opt/kubehw-node/bin" % self.bin_dir,
             "--bind-ro=%s:/opt/kubehw-node/images" % os.path.join(self.state_dir, "images"),
             "/etc/kubehw-node/init.sh"],
            env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        with open(os.path.join(self.target_dir, "nspawn.pid"), "w") as handle:
            handle.write(str(self.process.pid))
        self.wait_ready(timeout)
        self._note("Ready %.1f s after the start" % (time.monotonic() - started))
        return self

    def init_pid(self):
        """The node's PID 1 (nspawn's stub init) as the host sees it."""
        if self.process is None or self.process.poll() is not None:
            raise RealNodeError("the node is not running; %s" % self.log("nspawn", 20))
        children = subprocess.run(["pgrep", "-P", str(self.process.pid)], capture_output=True, text=True,
                                  check=False).stdout.split()
        if not children:
            raise RealNodeError("the node has no init process yet")
        return int(children[0])

    def inventory(self, folder, **host_vars):
        """The path of an inventory (written in ``folder``) whose one gpu_nodes host is the node: its Python entered in
        the node's namespaces, each module piped to it, so the modules read the node's files, packages and runtime."""
        python = os.path.join(str(folder), "node-python")
        with open(python, "w") as handle:
            handle.write('#!/bin/sh\nexec nsenter -t %d -m -p -u -i -n -- /usr/bin/python3 "$@"\n' % self.init_pid())
        os.chmod(python, 0o755)
        host = dict({"ansible_connection": "local", "ansible_pipelining": True, "ansible_python_interpreter": python},
                    **host_vars)
        path = os.path.join(str(folder), "inventory.yml")
        with open(path, "w") as handle:
            json.dump({"all": {"children": {"gpu_nodes": {"hosts": {self.name: host}}}}}, handle)
        return path

    def run(self, argv, check=True, timeout=60):
        """Run argv inside the node (its mount, PID, network, UTS and IPC namespaces)."""
        proc = subprocess.run(["nsenter", "-t", str(self.init_pid()), "-m", "-p", "-u", "-i", "-n", "--"]
                              + list(argv), capture_output=True, text=True, check=False, timeout=timeout)
        if check and proc.returncode:
            raise RealNodeError("%s in the node: rc %d, %s" % (" ".join(argv), proc.returncode, proc.stderr.strip()))
        return proc

    def node_object(self):
        """The Node object as the apiserver has it (the control plane's admin kubeconfig), or None before it
        registers."""
        from kubernetes import client, config
        from kubernetes.client.rest import ApiException

        if self._core is None:
            self._core = client.CoreV1Api(config.new_client_from_config(config_file=self.control_plane.kubeconfig))
        try:
            return json.loads(self._core.read_node(self.name, _preload_content=False).data)
        except ApiException as err:
            if err.status == 404:
                return None
            raise

    def wait_ready(self, timeout=120):
        deadline = time.monotonic() + timeout
        while not self.ready():
            if self.process.poll() is not None:
                raise RealNodeError("the node ended (rc %s): %s\n%s" % (
                    self.process.returncode, self.log("nspawn", 30), self.log("init", 30)))
            if time.monotonic() > deadline:
                raise RealNodeError("node %s not Ready after %ss; kubelet log:\n%s\ninit log:\n%s" % (
                    self.name, timeout, self.log("kubelet", 40), self.log("init", 30)))
            time.sleep(0.5)

    def log(self, name, lines=60):
        """The last lines of the node's log `name`: kubelet, containerd, init (in the node), nspawn (on the host)."""
        path = (os.path.join(self.state_dir, "nspawn.log") if name == "nspawn"
                else os.path.join(self.root, "var", "log", "kubehw-node", name + ".log"))
        if not os.path.exists(path):
            path = os.path.join(self.state_dir, "logs", name + ".log")
        try:
            with open(path, errors="replace") as handle:
                return "".join(handle.readlines()[-lines:])
        except OSError as err:
            return "(no %s log: %s)" % (name, err)

    def kubelet_down(self):
        """Stop the kubelet and keep it stopped (the node's containers go on running)."""
        self.run(["touch", "/run/kubehw-node/hold"])
        self.run(["sh", "-c", "kill $(cat /run/kubehw-node/kubelet.pid)"], check=False)
        self.run(["sh", "-c", "while kill -0 $(cat /run/kubehw-node/kubelet.pid) 2>/dev/null; do sleep 0.1; done"],
                 timeout=60)

    def kubelet_up(self):
        self.run(["rm", "-f", "/run/kubehw-node/hold"])

    def ready(self, node=None):
        """Whether the node (read now, unless given) reports Ready=True."""
        node = self.node_object() if node is None else node
        conditions = ((node or {}).get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)

    def restart_containerd(self, timeout=60):
        """Stop containerd and start it again as init.sh does (real_node_files/start-containerd.sh), then wait until
        the kubelet reports the runtime again. A kubelet whose status update falls while containerd is down reports
        its runtime as <type>://Unknown until its next update (up to nodeStatusUpdateFrequency later); a test that
        reads the node right after a restart would otherwise see that, depending on timing."""
        self.run(["sh", "-c", "kill $(cat /run/kubehw-node/containerd.pid); "
                              "while kill -0 $(cat /run/kubehw-node/containerd.pid) 2>/dev/null; do sleep 0.1; done; "
                              "exec /etc/kubehw-node/start-containerd.sh"],
                 timeout=90)
        deadline = time.monotonic() + timeout
        while True:
            node = self.node_object()
            runtime = (((node or {}).get("status") or {}).get("nodeInfo") or {}).get("containerRuntimeVersion") or ""
            if runtime and not runtime.endswith("://Unknown") and self.ready(node):
                return
            if time.monotonic() > deadline:
                raise RealNodeError("node %s: the kubelet reports runtime %r, Ready %s, %ss after containerd restarted; "
                                    "kubelet log:\n%s" % (self.name, runtime, self.ready(node), timeout,
                                                          self.log("kubelet", 40)))
            time.sleep(0.5)

    # -- stop
    def stop(self):
        if self.process is not None and self.process.poll() is None:
            try:
                # Killing the node's PID 1 ends every process of its PID namespace at once.
                os.kill(self.init_pid(), signal.SIGKILL)
            except (RealNodeError, ProcessLookupError):
                pass
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=20)
        self.keep_logs()
        for relay in self.relays:
            if relay.poll() is None:
                os.killpg(relay.pid, signal.SIGTERM)
                relay.wait(timeout=10)
        self.relays = []
        self.remove_cgroups()
        self._target("stop")

    def keep_logs(self):
        """Copy the node's logs to <state_dir>/logs (the root file system goes with the node)."""
        source = os.path.join(self.root, "var", "log", "kubehw-node")
        if os.path.isdir(source):
            shutil.rmtree(os.path.join(self.state_dir, "logs"), ignore_errors=True)
            shutil.copytree(source, os.path.join(self.state_dir, "logs"))

    def own_cgroups(self):
        """The cgroup directories of the host that belong to this node (the kubelet's cgroup root, wherever the
        node's cgroup placed it), deepest first."""
        found = []
        for top in cgroups_named(lambda name: name == self.cgroup_root):
            found.append(top)
            found.extend(os.path.join(d, s) for d, subs, _f in os.walk(top) for s in subs)
        return sorted(found, key=lambda path: -path.count("/"))

    def remove_cgroups(self, timeout=30):
        deadline = time.monotonic() + timeout
        for directory in self.own_cgroups():
            while True:
                try:
                    os.rmdir(directory)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
