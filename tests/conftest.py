# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Root pytest configuration for the kubehw.devices test suites."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

_HERE = os.path.dirname(os.path.abspath(__file__))

# The simulated cluster's fixtures (`simcluster`), registered once its plugin module exists.
pytest_plugins = [
    name for name, path in (
        ('tests.simcluster.pytest_plugin', os.path.join(_HERE, 'simcluster', 'pytest_plugin.py')),
    ) if os.path.exists(path)
]
