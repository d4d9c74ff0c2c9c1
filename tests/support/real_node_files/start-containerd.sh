#!/usr/bin/env bash
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Starts containerd in the real node, with the configuration the collection's roles wrote: init.sh at boot, and
# tests/support/real_node.py's restart_containerd() after a test changed that configuration. Its pid goes to
# /run/kubehw-node/containerd.pid, its output to /var/log/kubehw-node/containerd.log; returns once it answers
# (ctr version), and fails after 60 s without an answer.
set -u
containerd >>/var/log/kubehw-node/containerd.log 2>&1 &
echo $! >/run/kubehw-node/containerd.pid
for _ in $(seq 1 120); do
    ctr version >/dev/null 2>&1 && exit 0
    sleep 0.5
done
echo "start-containerd: containerd did not answer within 60 s" >&2
exit 1
