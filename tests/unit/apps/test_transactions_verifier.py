"""The transactions_test verifier counts what Kafka's test asserts, on the tools' real output:
VerifiableProducer's JSON lines (the acked values, in ack order) and ConsoleConsumer's one value
a line (with the lines kafka-tools 4.3.1 prints besides)."""
from __future__ import annotations

import pytest

from conformance.apps.verify import acked_values, compare, consumed_values
from conformance.dsl.loader import CaseError, parse_case

# VerifiableProducer 4.3.1 stdout, as a run printed it (a deprecation note first, then JSON).
PRODUCER = """\
Option --producer.config has been deprecated and will be removed in a future version. Use --command-config instead.
{"timestamp":1795711988287,"name":"startup_complete"}
{"timestamp":1795711993709,"name":"producer_send_success","key":null,"value":"0","offset":0,"topic":"input-topic-f0eaf1","partition":0}
{"timestamp":1795711993710,"name":"producer_send_success","key":null,"value":"1","offset":1,"topic":"input-topic-f0eaf1","partition":0}
{"timestamp":1795711993711,"name":"producer_send_error","exception":"class org.apache.kafka.common.errors.TimeoutException","message":"Expiring 1 record(s)","topic":"input-topic-f0eaf1","key":null,"value":"2"}
{"timestamp":1795711993712,"name":"producer_send_success","key":null,"value":"3","offset":0,"topic":"input-topic-f0eaf1","partition":1}
{"timestamp":1795711999341,"name":"shutdown_complete"}
{"timestamp":1795711999362,"name":"tool_data","sent":4,"acked":3,"target_throughput":-1,"avg_throughput":451.1}
""".splitlines()


def test_acked_values_are_the_successes_in_ack_order():
    assert acked_values(PRODUCER) == [0, 1, 3]


def test_consumed_values_counts_lines_that_are_not_values():
    lines = ["The consumer rebalance protocol (KIP-848) is production-ready! Set group.protocol=consumer to try it out.",
             "3", "0", "", "1"]
    assert consumed_values(lines) == ([3, 0, 1], 1)


def test_exactly_once_counts_nothing():
    r = compare([0, 1, 2, 3], [2, 0, 3, 1])
    assert (r["duplicates"], r["losses"], r["unexpected"], r["read"]) == (0, 0, 0, 4)
    assert "in_order" not in r


def test_duplicates_losses_and_unexpected_are_counted_apart():
    # 1 read three times (2 duplicates), 3 twice (1), 2 and 4 never read, 9 never input
    r = compare([0, 1, 2, 3, 4], [0, 1, 1, 3, 1, 3, 9])
    assert r == {"read": 7, "distinct": 4, "duplicates": 3, "losses": 2, "unexpected": 1}


def test_order_names_the_first_difference():
    r = compare([0, 1, 2, 3], [0, 2, 1, 3], check_order=True)
    assert (r["in_order"], r["first_out_of_order"]) == (False, 1)
    r = compare([0, 1, 2], [0, 1], check_order=True)  # a loss at the end is out of order too
    assert (r["in_order"], r["first_out_of_order"], r["losses"]) == (False, 2, 1)
    assert compare([0, 1, 2], [0, 1, 2], check_order=True)["in_order"] is True


def test_a_cell_derives_its_topics_and_check_order_shrinks_it():
    case = parse_case({"title": "t", "topology": {"nodes": 3},
                       "application": {"kind": "transactions_test", "bounce_target": "brokers",
                                       "failure_mode": "hard_bounce", "check_order": True, "messages": 90}},
                      "c.yaml", "c")
    app = case.application
    assert (app.messages, app.input_partitions, app.output_partitions) == (30, 1, 1)
    assert [(t.name, t.partitions, t.replication_factor, t.configs) for t in case.topology.topics] == [
        ("input-topic", 1, 3, {"min.insync.replicas": "2"}), ("output-topic", 1, 3, {"min.insync.replicas": "2"})]
    assert case.needs_proxy() and {"kill", "restart", "multi_node"} <= case.needed_capabilities()


@pytest.mark.parametrize("section, path", [
    ({"kind": "streams"}, "application.kind"),
    ({"kind": "transactions_test", "bounce_target": "zookeeper"}, "application.bounce_target"),
    ({"kind": "transactions_test", "down_s": -1}, "application.down_s"),
    ({"kind": "transactions_test", "explode": 1}, "application.explode"),
])
def test_an_invalid_application_names_its_field(section, path):
    with pytest.raises(CaseError) as err:
        parse_case({"title": "t", "application": section}, "c.yaml", "c")
    assert path in str(err.value)


def test_an_application_case_has_no_steps_or_own_topics():
    with pytest.raises(CaseError):
        parse_case({"title": "t", "application": {"kind": "transactions_test"}, "steps": []}, "c.yaml", "c")
    with pytest.raises(CaseError) as err:
        parse_case({"title": "t", "topology": {"topics": [{"name": "x"}]},
                    "application": {"kind": "transactions_test"}}, "c.yaml", "c")
    assert "topology.topics" in str(err.value)
