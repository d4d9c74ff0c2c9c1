# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Shared configuration of the plugin unit tests."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

try:
    from ansible.module_utils import _internal
except ImportError:  # ansible-core 2.17 has no such module
    _internal = None


@pytest.fixture(autouse=True)
def modules_run_as_on_the_target(monkeypatch):
    """A module runs in a Python process of its own, where no controller code of ansible-core is imported, so
    AnsibleModule.warn() and deprecate() collect into the module's result. Once any test of the same pytest process
    imports controller code (ansible.template, as the role unit tests do), ansible-core marks the process as the
    controller and warn() goes to the controller's display instead, so the module results would lose their warnings:
    each plugin test sees the target's setting."""
    if hasattr(_internal, "is_controller"):     # ansible-core 2.19 on; before, warn() always collects
        monkeypatch.setattr(_internal, "is_controller", False)
