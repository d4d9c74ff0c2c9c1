# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""extended_resource_info reads quantities by value, as the apiserver stores them."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kubehw.devices.plugins.modules.extended_resource_info import (
    missing_allocatable,
    pod_extended_requests,
    still_offered,
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


def test_a_resource_is_released_when_zero_by_value_or_absent_in_the_field_asked():
    # a stopped device plugin as the kubelet shows it: unhealthy at once (0 allocatable), capacity kept for a while
    stopping = {"metadata": {"name": "n1"}, "status": {"capacity": {"nvidia.com/gpu": "4", "example.com/dongle": "0k"},
                                                       "allocatable": {"nvidia.com/gpu": "0"}}}
    wanted = ["nvidia.com/gpu", "example.com/dongle", "example.com/never-there"]
    assert still_offered(stopping, wanted, "allocatable") == {}
    assert still_offered(stopping, wanted, "capacity") == {"nvidia.com/gpu": "4"}
    assert still_offered({"metadata": {"name": "n1"}}, wanted, "capacity") == {}
    assert still_offered(node({"example.com/dongle": "1Ki"}), ["example.com/dongle"], "allocatable") == {
        "example.com/dongle": "1Ki"}


def test_pod_requests_sum_containers_by_value_and_take_limits_for_missing_requests():
    pod = {"spec": {"containers": [
        {"resources": {"limits": {"example.com/dongle": "1k", "cpu": "2"}}},
        {"resources": {"limits": {"example.com/dongle": "3"}, "requests": {"example.com/dongle": "2"}}},
    ]}}
    assert pod_extended_requests(pod) == {"example.com/dongle": 1002}


def test_the_claims_report_names_the_pods_and_the_node_and_the_scheduler_reason_of_pending_claims():
    from ansible_collections.kubehw.devices.plugins.module_utils import _dra_report

    devices = {"gpu-1": [{"driver": "gpu.example.com", "pool": "gpu-1", "device": "gpu-0"}]}
    allocated_claim = {"metadata": {"namespace": "ml", "name": "trainer-gpu-x1y2z"}, "spec": {},
                       "status": {"allocation": {"devices": {"results": [
                           {"request": "gpu", "driver": "gpu.example.com", "pool": "gpu-1", "device": "gpu-0"}]}},
                           "reservedFor": [{"resource": "pods", "name": "trainer", "uid": "u1"}]}}
    pending_claim = {"metadata": {"namespace": "ml", "name": "big-gpu-a1b2c"},
                     "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "c"}}]}}}
    waiting = {"metadata": {"namespace": "ml", "name": "big"},
               "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "two-gpus"}]},
               "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "big-gpu-a1b2c"}],
                          "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                          "message": "0/3 nodes are available: 3 cannot allocate all claims."}]}}
    other_namespace = {"metadata": {"namespace": "other", "name": "big"},
                       "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "big-gpu-a1b2c"}]}}
    allocated, pending = _dra_report.claim_report([allocated_claim, pending_claim], devices,
                                                  _dra_report.claim_consumers([waiting, other_namespace]))
    assert allocated == {"gpu-1": [{"namespace": "ml", "name": "trainer-gpu-x1y2z", "reserved_for": ["pods/trainer"],
                                    "devices": ["gpu.example.com/gpu-1/gpu-0"], "node": "gpu-1"}]}
    assert pending == [{"namespace": "ml", "name": "big-gpu-a1b2c", "reserved_for": [], "requests": ["gpu"],
                        "pods": ["big"], "reason": "Unschedulable",
                        "message": "0/3 nodes are available: 3 cannot allocate all claims."}]


def test_pods_are_listed_for_the_dra_report_only_when_a_claim_is_pending():
    from ansible_collections.kubehw.devices.plugins.module_utils import _dra_report

    class Api(object):
        version = None

        def __init__(self, claims):
            self.claims = claims

        def served_versions(self):
            return ["v1"]

        def list(self, plural, what):
            return self.claims if plural == "resourceclaims" else []

    listed = []
    allocated = {"metadata": {"namespace": "ml", "name": "a"}, "status": {"allocation": {"devices": {"results": []}}}}
    _dra_report.report(Api([allocated]), ["gpu-1"], list_pods=lambda: listed.append(1) or [])
    assert listed == []
    out = _dra_report.report(Api([allocated, {"metadata": {"namespace": "ml", "name": "p"}}]), ["gpu-1"],
                             list_pods=lambda: listed.append(1) or [])
    assert listed == [1] and out["pending_claims"][0]["pods"] == []


def test_the_claim_the_scheduler_made_for_an_extended_resource_request_names_its_pod():
    from ansible_collections.kubehw.devices.plugins.module_utils import _dra_report

    pod = {"metadata": {"namespace": "ml", "name": "asks-example-gpu"}, "spec": {},
           "status": {"extendedResourceClaimStatus": {"resourceClaimName": "asks-example-gpu-extended-resources-x1",
                                                      "requestMappings": []}}}
    users = _dra_report.claim_consumers([pod])
    assert list(users) == [("ml", "asks-example-gpu-extended-resources-x1")]
