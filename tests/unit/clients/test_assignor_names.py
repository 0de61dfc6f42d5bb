"""partition.assignment.strategy read as Java reads it, by the Python drivers' shared parser (the Go
and KafkaJS drivers carry the same rules; test_group_membership.py checks every driver's answers)."""

import pytest

from conformance.clients.driver import JAVA_ASSIGNORS, OpError, assignor_names

RANGE, COOP = "org.apache.kafka.clients.consumer.RangeAssignor", "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"


def test_class_names_become_protocol_names_in_order_trimmed_and_deduplicated():
    assert assignor_names(f" {COOP} ,{RANGE},{COOP}") == ["cooperative-sticky", "range"]
    assert sorted(JAVA_ASSIGNORS.values()) == ["cooperative-sticky", "range", "roundrobin", "sticky"]


@pytest.mark.parametrize("value", ["range", "RangeAssignor", "", "  ", f"{RANGE},", f"{RANGE},,{COOP}",
                                   "com.example.MyAssignor"])
def test_what_java_refuses_or_no_driver_can_map_is_invalid_argument(value):
    with pytest.raises(OpError) as refused:
        assignor_names(value)
    info = refused.value.info
    assert info["name"] == "INVALID_ARGUMENT" and info["origin"] == "driver"
    assert "partition.assignment.strategy" in info["message"] and repr(value) in info["message"]


def test_a_name_the_library_lacks_is_refused_with_why():
    with pytest.raises(OpError, match="eager only"):
        assignor_names(COOP, {"range", "roundrobin"}, "eager only")
    assert assignor_names(RANGE, {"range"}) == ["range"]
