# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Control planes of killed runs do not outlive the next run: a start stops and removes its siblings whose owners are
all gone, and leaves those of live processes alone. Ports come from below the kernel's ephemeral range, and a start
whose component finds its port taken all the same starts again on new ports."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import socket
import subprocess

import pytest

from tests.support import control_plane, k8s_binaries


def _running(plane):
    """The pids of plane's processes that are still running (its pid files)."""
    run = os.path.join(plane.state_dir, "run")
    pids = [int(open(os.path.join(run, name)).read()) for name in os.listdir(run)] if os.path.isdir(run) else []
    return [pid for pid in pids if control_plane.process_alive(pid)]


def _binaries():
    bins = k8s_binaries.locate()
    if bins is None:
        pytest.skip("no Kubernetes binaries (tests/support/k8s_binaries.py)")
    return bins


def test_a_start_reaps_the_control_planes_of_killed_runs_and_only_those(tmp_path):
    bins = _binaries()
    base = str(tmp_path)
    killed_run = subprocess.Popen(["sleep", "600"])
    live_run = subprocess.Popen(["sleep", "600"])
    planes = []
    try:
        for owner in (killed_run, live_run):
            plane = control_plane.ControlPlane(bins, os.path.join(base, "run-%d" % owner.pid)).start()
            planes.append(plane)
            plane.add_owner(owner.pid)
            assert plane.remove_owner() == [owner.pid]
        abandoned, kept = planes
        abandoned_pids = _running(abandoned)
        assert len(abandoned_pids) == 4 and len(_running(kept)) == 4
        killed_run.kill()
        killed_run.wait()
        newcomer = control_plane.ControlPlane(bins, os.path.join(base, "newcomer")).start()
        planes.append(newcomer)
        assert [pid for pid in abandoned_pids if control_plane.process_alive(pid)] == []
        assert not os.path.exists(abandoned.state_dir)
        assert len(_running(kept)) == 4 and len(_running(newcomer)) == 4
    finally:
        for plane in planes:
            plane.stop(wipe=True)
        for proc in (killed_run, live_run):
            proc.kill()
            proc.wait()


def test_ports_come_from_below_the_kernels_ephemeral_range(tmp_path):
    range_file = tmp_path / "ip_local_port_range"
    range_file.write_text("32768\t60999\n")
    assert control_plane.unassigned_port_range(str(range_file)) == (10000, 32767)
    range_file.write_text("10500\t60999\n")
    assert control_plane.unassigned_port_range(str(range_file)) is None     # fewer than 1,000 ports below it
    assert control_plane.unassigned_port_range(str(tmp_path / "missing")) is None
    ports = control_plane.free_ports(6, (20000, 20400))
    assert all(20000 <= port < 20400 for port in ports)
    # distinct, and none is another's neighbour (etcd takes port + 1 too)
    assert len(set(ports) | set(port + 1 for port in ports)) == 12
    # on this machine: below its own range
    machine = control_plane.unassigned_port_range()
    if machine is not None:
        assert all(machine[0] <= port < machine[1] for port in control_plane.free_ports(4))


def _taking(monkeypatch, index, taken, attempts):
    """free_ports as the start calls it, with the port at `index` (0 apiserver, 1 etcd, 2 controller manager,
    3 scheduler) replaced by `taken` in the first `attempts` calls; returns the list of what each call gave."""
    real, calls = control_plane.free_ports, []

    def free_ports(count, port_range=None):
        ports = real(count, port_range)
        if len(calls) < attempts:
            ports[index] = taken
        calls.append(ports)
        return ports

    monkeypatch.setattr(control_plane, "free_ports", free_ports)
    return calls


def test_a_component_whose_port_is_taken_starts_again_on_new_ports(tmp_path, monkeypatch):
    bins = _binaries()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        calls = _taking(monkeypatch, 3, holder.getsockname()[1], attempts=1)
        plane = control_plane.ControlPlane(bins, str(tmp_path / "plane"))
        try:
            plane.start()
            assert len(calls) == 2, calls
            # the scheduler lost its port after etcd, the apiserver and the controller manager had started: all of
            # them run again on the second attempt's ports, and the kubeconfigs name its apiserver
            assert len(_running(plane)) == 4
            assert plane.api_port == calls[1][0]
            with open(plane.kubeconfig) as f:
                assert "https://127.0.0.1:%d\n" % calls[1][0] in f.read()
            assert control_plane.PORT_TAKEN in plane.log_tail("kube-scheduler", lines=1000)
        finally:
            plane.stop(wipe=True)


def test_a_port_taken_on_every_attempt_fails_the_start_and_leaves_nothing_running(tmp_path, monkeypatch):
    bins = _binaries()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        calls = _taking(monkeypatch, 1, holder.getsockname()[1], attempts=control_plane.PORT_ATTEMPTS)
        plane = control_plane.ControlPlane(bins, str(tmp_path / "plane"))
        try:
            with pytest.raises(control_plane.ControlPlaneError) as failed:
                plane.start()
            assert len(calls) == control_plane.PORT_ATTEMPTS
            message = str(failed.value)
            assert message.startswith("etcd exited") and control_plane.PORT_TAKEN in message, message
            assert "(%d attempts, each with new ports)" % control_plane.PORT_ATTEMPTS in message
            assert _running(plane) == []
        finally:
            plane.stop(wipe=True)
