# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Input tables' cases written as changes to a base: what the hostile-input tables of the unit and integration
suites share."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def overridden(base, overrides):
    """A copy of base with overrides applied; an override of None removes the key (a case that leaves it out)."""
    params = dict(base)
    for key, value in overrides.items():
        if value is None:
            params.pop(key, None)
        else:
            params[key] = value
    return params
