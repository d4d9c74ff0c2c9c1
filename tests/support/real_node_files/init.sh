#!/usr/bin/env bash
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# PID 2 of the real node (tests/support/real_node.py starts it with systemd-nspawn --as-pid2): the host's cgroup v1
# controllers made writable for the kubelet, the kernel tunables the kubelet would set hidden from it, containerd
# with the configuration the collection's roles wrote, the node's images imported, then the kubelet, restarted
# whenever it exits unless /run/kubehw-node/hold exists (how a test stops it for a while).
# Files: /etc/kubehw-node/{kubelet.yaml,kubeconfig,node.env,start-containerd.sh}, /opt/kubehw-node/{bin,images}; logs in
# /var/log/kubehw-node/.
set -u
log=/var/log/kubehw-node
mkdir -p "$log" /run/kubehw-node /var/lib/kubelet
exec >>"$log/init.log" 2>&1
# shellcheck source=/dev/null
. /etc/kubehw-node/node.env

# systemd-nspawn mounts the v1 controllers read-only; the kubelet and runc write there.
for hierarchy in /sys/fs/cgroup/*; do
    case "$hierarchy" in */unified) continue ;; esac
    mount -o remount,bind,rw "$hierarchy" || echo "init: could not make $hierarchy writable"
done
# The kubelet's cgroup root, in every hierarchy, with the cpuset it needs to hold tasks.
for hierarchy in /sys/fs/cgroup/*; do
    case "$hierarchy" in */unified) continue ;; esac
    mkdir -p "$hierarchy/$KUBELET_CGROUP_ROOT"
done
cp /sys/fs/cgroup/cpuset/cpuset.cpus "/sys/fs/cgroup/cpuset/$KUBELET_CGROUP_ROOT/cpuset.cpus"
cp /sys/fs/cgroup/cpuset/cpuset.mems "/sys/fs/cgroup/cpuset/$KUBELET_CGROUP_ROOT/cpuset.mems"

# The kubelet's setupNode() writes these; the node shares the host's kernel, so it sees copies.
mkdir -p /run/kubehw-node/sysctl
for tunable in vm/overcommit_memory vm/panic_on_oom kernel/panic kernel/panic_on_oops; do
    copy="/run/kubehw-node/sysctl/${tunable//\//.}"
    cat "/proc/sys/$tunable" >"$copy"
    mount --bind "$copy" "/proc/sys/$tunable"
done

# The node's own network namespace: the host's address (the node IP) and the kubernetes Service's address on its
# loopback; socat relays those to the host through the sockets of /run/kubehw-host (real_node.py runs the host's
# halves): 10.0.0.1:443 to the apiserver, and the apiserver's calls to the kubelet back in.
ip link set lo up
ip addr add "$NODE_IP/32" dev lo
ip addr add "$SERVICE_IP/32" dev lo
socat "TCP-LISTEN:443,bind=$SERVICE_IP,fork,reuseaddr" UNIX-CONNECT:/run/kubehw-host/apiserver.sock &
socat UNIX-LISTEN:/run/kubehw-host/kubelet.sock,fork,unlink-early "TCP:$NODE_IP:$KUBELET_PORT" &

/etc/kubehw-node/start-containerd.sh || echo "init: containerd is not answering; the image imports will fail"
for image in /opt/kubehw-node/images/*.tar; do
    ctr -n k8s.io images import "$image" || echo "init: import of $image failed"
done
touch /run/kubehw-node/images-imported

while :; do
    if [ -e /run/kubehw-node/hold ]; then sleep 0.2; continue; fi
    /opt/kubehw-node/bin/kubelet --config=/etc/kubehw-node/kubelet.yaml --kubeconfig=/etc/kubehw-node/kubeconfig \
        --hostname-override="$NODE_NAME" --node-ip="$NODE_IP" --v=2 >>"$log/kubelet.log" 2>&1 &
    echo $! >/run/kubehw-node/kubelet.pid
    wait $!
    echo "init: kubelet exited ($?)"
    sleep 0.5
done
