# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test equipment shared by the test suites (not shipped code); see README.md beside this file."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type
