"""Kafka Streams' smoke test as an application case: the driver's words judged as
streams_smoke_test.py judges them, the section validated (a key of the other application named),
the properties the processors get, and the outcome compared with the reference's row."""
from __future__ import annotations

import pytest

from conformance.apps.streams_smoke import TOPICS, driver_result, driver_verdict, properties
from conformance.dsl import parse_case
from conformance.dsl.loader import CaseError
from conformance.runner.row import application_outcome

#: The end of a real driver's stdout (Kafka Streams 4.3.1, exactly_once_v2, embedded, 3 nodes).
VERIFIED = """\
Verification time=6027
-------------------
Result Verification
-------------------
recordGenerated=20000
recordProcessed=20000
ALL-RECORDS-DELIVERED
verifying topic tagg
verifying suppressed min-suppressed
verifying topic 'min'
verifying topic 'avg'

SUCCESS""".splitlines()


def test_success_is_a_pass_for_either_guarantee():
    for guarantee in ("exactly_once_v2", "at_least_once"):
        ok, why = driver_verdict(VERIFIED, guarantee, crash=True)
        assert ok and "SUCCESS" in why
    assert driver_result(VERIFIED) == "SUCCESS"


def test_more_than_generated_passes_only_at_least_once_with_crashes():
    lines = VERIFIED[:5] + ["recordProcessed=20011", "PROCESSED-MORE-THAN-GENERATED", "FAILURE"]
    assert driver_result(lines) == "FAILURE"
    assert driver_verdict(lines, "at_least_once", crash=True)[0] is False   # FAILURE said last word
    lines = VERIFIED[:5] + ["recordProcessed=20011", "PROCESSED-MORE-THAN-GENERATED"]
    assert driver_verdict(lines, "at_least_once", crash=True)[0] is True
    assert driver_verdict(lines, "at_least_once", crash=False)[0] is False
    assert driver_verdict(lines, "exactly_once_v2", crash=True)[0] is False


def test_a_transaction_left_open_and_a_wrong_result_are_failures_with_the_drivers_words():
    ok, why = driver_verdict(["FAILED"], "exactly_once_v2", crash=True)
    assert not ok and "transaction never ended" in why
    lines = VERIFIED[:9] + ["min fail: key=7 actual=3 expected=2", "", "FAILURE"]
    ok, why = driver_verdict(lines, "exactly_once_v2", crash=True)
    assert not ok and "min fail: key=7" in why
    ok, why = driver_verdict(["1000 records produced"], "exactly_once_v2", crash=False)
    assert not ok and "never reached its verification" in why


def test_processor_properties_are_the_system_tests_with_replication_bounded_by_nodes(tmp_path):
    props = dict(line.split("=", 1) for line in properties("127.0.0.1:9", "exactly_once_v2", tmp_path, 1).splitlines())
    assert props["processing.guarantee"] == "exactly_once_v2" and props["bootstrap.servers"] == "127.0.0.1:9"
    assert props["replication.factor"] == "1" and props["num.standby.replicas"] == "2"
    assert props["acceptable.recovery.lag"] == str(2 ** 63 - 1) and props["state.dir"] == str(tmp_path)
    assert properties("x", "at_least_once", tmp_path, 5).count("replication.factor=3") == 1
    assert "data" in TOPICS and "fk" in TOPICS


def test_the_section_is_validated_and_names_no_topics():
    case = parse_case({"title": "t", "topology": {"nodes": 3},
                       "application": {"kind": "streams_smoke", "processing_guarantee": "at_least_once", "crash": False}},
                      "c.yaml", "apps/c")
    app = case.application
    assert (app.kind, app.processing_guarantee, app.crash) == ("streams_smoke", "at_least_once", False)
    assert case.topology.topics == ()


@pytest.mark.parametrize("section, field", [
    ({"kind": "streams_smoke", "processing_guarantee": "exactly_once"}, "application.processing_guarantee"),
    ({"kind": "streams_smoke", "crash": "yes"}, "application.crash"),
    ({"kind": "streams_smoke", "bounce_target": "brokers"}, "application.bounce_target"),
    ({"kind": "transactions_test", "crash": True}, "application.crash"),
])
def test_a_bad_section_names_the_file_and_the_field(section, field):
    with pytest.raises(CaseError) as ei:
        parse_case({"title": "t", "application": section}, "c.yaml", "apps/c")
    assert "c.yaml" in str(ei.value) and field in str(ei.value)


def test_the_outcome_is_the_drivers_result_and_the_error_kinds():
    summary = {"application": "streams_smoke", "driver_result": "SUCCESS",
               "wire_errors": {"Produce": {"CONCURRENT_TRANSACTIONS": 64, "OUT_OF_ORDER_SEQUENCE_NUMBER": 3}}}
    assert application_outcome(summary) == {
        "driver_result": "SUCCESS", "wire_errors": {"Produce": ["CONCURRENT_TRANSACTIONS", "OUT_OF_ORDER_SEQUENCE_NUMBER"]}}
