"""kconform diff against Apache Kafka: every API the embedded broker advertises, at its highest
version, answers as Kafka 4.3.1 does (or as docs/wirediff.md says why not)."""
from __future__ import annotations

import pytest

from conformance.targets import ApacheKafkaTarget
from conformance.wirediff import DiffOptions, run_diff
from conformance.wirediff.cli import summary
from reports.results import read_results


@pytest.fixture
def kafka_available():
    ok, why = ApacheKafkaTarget.availability()
    if not ok:
        pytest.skip(f"apache-kafka not available: {why}")


def test_every_api_at_its_highest_version_answers_as_kafka(tmp_path, kafka_available):
    opts = DiffOptions(target="embedded", reference="apache-kafka", results_dir=tmp_path, versions="max",
                       variants=False)
    result = run_diff(opts)
    assert result.unexplained == 0 and not result.errors, summary(result, opts)
    compared = {c["api"] for c in result.coverage if c["compared"]}
    advertised = {c["api"] for c in result.coverage if c["target"] is not None}
    assert compared == advertised  # every API the embedded broker advertises
    rows = read_results(tmp_path)  # the results format reports/ reads
    assert len(rows) == 2 * len(compared)
    assert {r["target"] for r in rows} == {"embedded", "apache-kafka"}
    ours = [r for r in rows if r["target"] == "embedded"]
    assert all(r["reference_target"] == "apache-kafka" and r["diff"] is not None for r in ours)
    # the sequences ran: EndTxn came after init -> add partitions -> produce, and answered NONE
    endtxn = next(r for r in ours if r["case"].startswith("wirediff/EndTxn/"))
    assert [s["id"] for s in endtxn["outcome"]["steps"]] == ["create", "ready", "init", "add", "produce", "probe"]
    assert endtxn["outcome"]["steps"][-1]["data"]["response"]["error_code"] == 0


def test_boundary_variants_of_produce(tmp_path, kafka_available):
    opts = DiffOptions(target="embedded", reference="apache-kafka", results_dir=tmp_path, apis=["Produce"],
                       versions="max")
    result = run_diff(opts)
    assert result.unexplained == 0 and not result.errors, summary(result, opts)
    variants = {r.case.rsplit("/", 1)[1] for r in result.rows}
    assert {"valid", "null:topic_data", "sequence-gap", "partition-not-in-transaction",
            "unknown-tagged-fields"} <= variants
    gap = next(r for r in result.rows if r.target == "embedded" and r.case.endswith("/sequence-gap"))
    part = gap.outcome["steps"][-1]["data"]["response"]["responses"][0]["partition_responses"][0]
    assert (part["error_code"], part["error_message"], part["log_start_offset"]) == (45, None, 0)
