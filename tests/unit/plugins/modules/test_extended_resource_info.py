# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""extended_resource_info reads quantities by value, as the apiserver stores them."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubehw.devices.plugins.modules.extended_resource_info import (
    missing_allocatable,
    pod_extended_requests,
)


def node(allocatable):
    return {"metadata": {"name": "n1"}, "status": {"allocatable": allocatable}}


def test_allocatable_is_compared_by_value():
    assert missing_allocatable(node({"example.com/dongle": "1Ki"}), {"example.com/dongle": 1024}) == {}
    assert missing_allocatable(node({"example.com/dongle": "2k"}), {"example.com/dongle": 2001}) == {
        "example.com/dongle": "2k"}
    assert missing_allocatable(node({}), {"example.com/dongle": 1}) == {"example.com/dongle": "0"}
    assert missing_allocatable(node({"example.com/dongle": "junk"}), {"example.com/dongle": 1}) == {
        "example.com/dongle": "junk"}


def test_pod_requests_sum_containers_by_value_and_take_limits_for_missing_requests():
    pod = {"spec": {"containers": [
        {"resources": {"limits": {"example.com/dongle": "1k", "cpu": "2"}}},
        {"resources": {"limits": {"example.com/dongle": "3"}, "requests": {"example.com/dongle": "2"}}},
    ]}}
    assert pod_extended_requests(pod) == {"example.com/dongle": 1002}
