# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Control planes of killed runs do not outlive the next run: a start stops and removes its siblings whose owners are
all gone, and leaves those of live processes alone."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import subprocess

import pytest

from tests.support import control_plane, k8s_binaries


def _running(plane):
    """The pids of plane's processes that are still running (its pid files)."""
    run = os.path.join(plane.state_dir, "run")
    pids = [int(open(os.path.join(run, name)).read()) for name in os.listdir(run)] if os.path.isdir(run) else []
    return [pid for pid in pids if control_plane.process_alive(pid)]


def test_a_start_reaps_the_control_planes_of_killed_runs_and_only_those(tmp_path):
    bins = k8s_binaries.locate()
    if bins is None:
        pytest.skip("no Kubernetes binaries (tests/support/k8s_binaries.py)")
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
