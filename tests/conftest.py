# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Root pytest configuration for the kubehw.devices test suites (the fixtures live beside each suite)."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type


def pytest_report_header(config):
    """The ansible-core this pytest runs with, first in every stage's log: make test's summary reads it from there."""
    try:
        from ansible.release import __version__
    except ImportError:
        return None
    return "ansible-core %s" % __version__
