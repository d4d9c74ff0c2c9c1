# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""pytest fixtures of the simulated cluster.

simcluster           a started SimCluster with examples/default.yaml (function scope); a test can
                     choose another configuration with @pytest.mark.simcluster_config(dict_or_path)
simcluster_factory   simcluster_factory(config=None, **kwargs) -> a started SimCluster, stopped at teardown
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from tests.simcluster import SimCluster


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "simcluster_config(config): configuration (dict or YAML path) for the simulated cluster")


@pytest.fixture
def simcluster_factory():
    started = []

    def factory(config=None, **kwargs):
        sim = SimCluster(config, **kwargs)
        sim.start()
        started.append(sim)
        return sim

    yield factory
    for sim in reversed(started):
        sim.stop()


@pytest.fixture
def simcluster(request, simcluster_factory):
    marker = request.node.get_closest_marker("simcluster_config")
    config = marker.args[0] if marker and marker.args else None
    return simcluster_factory(config)
