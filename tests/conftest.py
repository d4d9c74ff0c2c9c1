# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Root pytest configuration for the kubehw.devices test suites (the fixtures live beside each suite)."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

COLLECTIONS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".cache", "collections")


def pytest_configure(config):
    """Ansible's collection finder over .cache/collections (make setup's), before any test imports the collection, as
    ansible-test's unit runs install it: the collection's modules import as they do under ansible-core, and templates
    rendered in a test find the collection's filters by their full names (kubehw.devices.image_reference), as
    ansible-playbook does. Without ansible-core (a tooling test's bare interpreter) there is nothing to install."""
    del config
    try:
        from ansible.utils.collection_loader import AnsibleCollectionConfig
        from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder
    except ImportError:
        return
    if AnsibleCollectionConfig.collection_finder is None and os.path.isdir(COLLECTIONS):
        _AnsibleCollectionFinder(paths=[COLLECTIONS])._install()


def pytest_report_header(config):
    """The ansible-core this pytest runs with, first in every stage's log: make test's summary reads it from there."""
    try:
        from ansible.release import __version__
    except ImportError:
        return None
    return "ansible-core %s" % __version__
