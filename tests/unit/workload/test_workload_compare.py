"""The same seeds on several targets side by side (conformance/workload/compare.py): anomalies a
client's flaw explains are told apart from the broker's, and only the broker's are differences."""
from __future__ import annotations

from conformance.results import Check, Row, Verdict
from conformance.workload.compare import compare_rows, render_comparison


def row(target: str, anomalies: dict[str, int], *, client_flaw: str | None = None,
        wire: dict | None = None) -> Row:
    r = Row("run", "", "workloads/mixed@1", "mixed", target, "confluent",
            workload={"operations": 1000, "anomalies": anomalies, "wire_errors": wire or {}}, client_flaw=client_flaw)
    r.judge([Check(f"no {k}", False, "") for k in anomalies] or [Check("ran", True, "")])
    return r


def test_a_client_flaw_is_counted_apart_and_is_no_difference_from_the_reference() -> None:
    rows = [row("embedded", {"misattributed_ack": 9}, client_flaw="sarama reused_sequence"),
            row("apache-kafka", {})]
    cmp = compare_rows(rows, "apache-kafka")
    assert cmp["targets"]["embedded"]["client_flaws"] == {"misattributed_ack": 9}
    assert cmp["differences"] == []
    assert rows[0].verdict is Verdict.FAIL and rows[0].reason == \
        "client flaw (proved on the wire): sarama reused_sequence"
    text = render_comparison(cmp)
    assert "| embedded | 1 | 1000 | - | fail 1 | misattributed_ack 9 | misattributed_ack 9 |" in text


def test_an_unexplained_anomaly_and_an_error_code_only_one_target_answers_are_differences() -> None:
    rows = [row("embedded", {"duplicate": 2}, wire={"Produce": {"NOT_ENOUGH_REPLICAS": 5}}),
            row("apache-kafka", {})]
    cmp = compare_rows(rows, "apache-kafka")
    assert [(d.get("anomaly"), d.get("error"), d["what"]) for d in cmp["differences"]] == [
        (None, "NOT_ENOUGH_REPLICAS", "only on this target"),
        ("duplicate", None, "an anomaly the reference does not have")]
    assert cmp["targets"]["embedded"]["client_flaws"] == {}
    assert "(5, 5.0/k, in 1 of 1 rows vs 0, 0.0/k, in 0 of 1)" in render_comparison(cmp)


def test_how_long_nodes_were_away_is_shown_beside_the_counts() -> None:
    """The same schedule on a broker that restarts in 35 s instead of 7 keeps its nodes away
    twice as long (measured: cluster seeds 604-606), which the error counts follow."""
    rows = [row("embedded", {}), row("apache-kafka", {})]
    rows[0].workload.update(node_down_s=210.4, restart_s=6.1)
    rows[1].workload.update(node_down_s=503.0, restart_s=30.6)
    cmp = compare_rows(rows, "apache-kafka")
    assert (cmp["targets"]["apache-kafka"]["node_down_s"], cmp["targets"]["apache-kafka"]["restart_s"]) == (503.0, 30.6)
    text = render_comparison(cmp)
    assert "| embedded | 1 | 1000 | 210, 6.1 | pass 1 | none | none |" in text
