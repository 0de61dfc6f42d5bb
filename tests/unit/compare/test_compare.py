"""Normalisation masks what differs by nature (ids, epochs, timings); the diff names paths."""
from __future__ import annotations

from conformance.compare import normalise_outcome, render, structural_diff
from conformance.runner.checks import evaluate, expect_matches
from conformance.runner.namespace import Namespace
from conformance.dsl.model import Expect


def outcome(values, pid=1000, epoch=0, elapsed=3.5):
    return {
        "steps": [{"step": 0, "actor": "p1", "op": "init_transactions", "ok": True, "elapsed_ms": elapsed,
                   "data": {"producer_id": pid, "producer_epoch": epoch}},
                  {"step": 1, "actor": "p1", "op": "commit_transaction", "ok": False, "elapsed_ms": elapsed,
                   "error": {"name": "PRODUCER_FENCED", "code": 90, "fatal": True, "message": f"epoch {epoch}",
                             "client_class": "KafkaError._FENCED"}}],
        "reads": {"read_committed": {"t1-0": [{"offset": i, "key": "k", "value": v} for i, v in enumerate(values)]}},
    }


def test_masked_fields_compare_equal():
    a = normalise_outcome(outcome(["a"], pid=1, epoch=0, elapsed=1.0))
    b = normalise_outcome(outcome(["a"], pid=77, epoch=5, elapsed=99.0))
    assert structural_diff(a, b) == []
    assert "message" not in a["steps"][1]["error"]
    assert a["steps"][1]["error"]["name"] == "PRODUCER_FENCED"


def test_offsets_and_values_are_kept_and_diffed():
    a = normalise_outcome(outcome(["a", "b"]))
    b = normalise_outcome(outcome(["a", "c", "d"]))
    diff = structural_diff(a, b)
    paths = {d["path"]: d for d in diff}
    assert paths["reads.read_committed.t1-0[1].value"]["reference"] == "b"
    assert paths["reads.read_committed.t1-0[1].value"]["actual"] == "c"
    assert paths["reads.read_committed.t1-0[2]"]["reference"] == "<missing>"
    assert paths["reads.read_committed.t1-0[2]"]["actual"] == {"offset": 2, "key": "k", "value": "d"}
    text = render(diff, "apache-kafka", "embedded")
    assert "apache-kafka" in text and "t1-0[2]" in text


def test_namespace_round_trip():
    ns = Namespace("abc123")
    args = ns.args({"topic": "t1", "offsets": [{"topic": "t1", "partition": 0, "offset": 3}], "ids": ["x"]})
    assert args["topic"] == "t1-abc123"
    assert args["offsets"][0]["topic"] == "t1-abc123"
    assert ns.config({"transactional.id": "x", "acks": "all"}) == {"transactional.id": "x-abc123", "acks": "all"}
    back = ns.unmap({"t1-abc123-0": [{"topic": "t1-abc123"}], "msg": "topic t1-abc123 gone"})
    assert back == {"t1-0": [{"topic": "t1"}], "msg": "topic t1 gone"}


def test_expect_matching():
    fenced = {"ok": False, "error": {"name": "PRODUCER_FENCED", "fatal": True}}
    assert expect_matches(Expect(ok=False, errors=("PRODUCER_FENCED",), flags={"fatal": True}), fenced)[0]
    assert not expect_matches(Expect(ok=False, errors=("PRODUCER_FENCED",), flags={"fatal": False}), fenced)[0]
    assert not expect_matches(Expect(), fenced)[0]
    assert expect_matches(Expect(any=True), fenced)[0]
    assert not expect_matches(Expect(ok=False), {"ok": True})[0]
    assert expect_matches(Expect(data={"count": 2}), {"ok": True, "data": {"count": 2}})[0]
    assert not expect_matches(Expect(data={"count": 2}), {"ok": True, "data": {"count": 3}})[0]


def test_checks_catch_aborted_records_in_read_committed(tmp_path):
    """The Tansu failure mode: read_committed returns aborted records -> the records check fails."""
    from conformance.dsl import load_case

    case = load_case(__import__("conformance.dsl", fromlist=["CASES_ROOT"]).CASES_ROOT / "txn/basic_abort.yaml")
    committed = [f"c{i}" for i in range(5)]
    aborted = [f"a{i}" for i in range(5)]
    good = {"reads": {"read_committed": {"t1-0": [{"offset": i, "key": None, "value": v} for i, v in enumerate(committed)]},
                      "read_uncommitted": {"t1-0": [{"offset": i, "key": None, "value": v}
                                                    for i, v in enumerate(committed + aborted)]}},
            "offsets": {"t1-0": {"high_watermark": 12, "last_stable": 12}}}
    assert all(c.passed for c in evaluate(case, good))
    bad = dict(good, reads=dict(good["reads"], read_committed=good["reads"]["read_uncommitted"]))
    failed = [c for c in evaluate(case, bad) if not c.passed]
    assert [c.name for c in failed] == ["records(isolation=read_committed, topic=t1)"]
    assert "a0" in failed[0].message


def _request_step(error_message, producer_id, log_start_offset):
    response = {"throttle_time_ms": 7, "responses": [{"name": "t1", "partition_responses": [
        {"index": 0, "error_code": 45, "log_start_offset": log_start_offset, "error_message": error_message}]}]}
    return {"steps": [{"step": 0, "actor": "raw", "op": "request", "ok": True, "elapsed_ms": 1.0,
                       "data": {"error": "OUT_OF_ORDER_SEQUENCE_NUMBER", "response": response,
                                "request": {"api": "Produce", "version": 9}, "producer_id": producer_id}}]}


def test_raw_request_steps_keep_their_response_and_are_diffed_field_by_field():
    kafka = normalise_outcome(_request_step(None, 1000, 0))
    embedded = normalise_outcome(_request_step("Out of order sequence number", 1, -1))
    assert kafka["steps"][0]["data"] == {"response": {
        "throttle_time_ms": "<masked>", "responses": {"name=t1": {"name": "t1", "partition_responses": {
            "index=0": {"index": 0, "error_code": 45, "log_start_offset": 0, "error_message": None}}}}}}
    diff = {d["path"]: (d["reference"], d["actual"]) for d in structural_diff(kafka, embedded)}
    where = "steps[0].data.response.responses.name=t1.partition_responses.index=0"
    assert diff == {f"{where}.error_message": (None, "<text>"), f"{where}.log_start_offset": (0, -1)}
