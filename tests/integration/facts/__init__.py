# Copyright (c) kubehw.devices contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fidelity probes of tests/integration/test_facts.py: clusters.py (the two clusters and the probe context),
rows.py (the row registry and shared helpers) and one module per topic of tests/simcluster/FACTS.md. No module
here is named test_*.py: pytest collects only test_facts.py, whose test_fact runs every registered row."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type
