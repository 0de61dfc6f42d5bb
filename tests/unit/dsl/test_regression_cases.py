"""Regression cases (cases/regressions/): each names its published bug, and `known_reference_bug`
marks a case whose Apache Kafka outcome is a Kafka bug; both are validated when loaded."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from conformance.dsl import CaseError, load_case, load_cases
from conformance.results import Row, Verdict, Check
from conformance.runner.row import known_reference_bug
from tests.unit.dsl.test_loader import MINIMAL as CASE


def load(tmp_path: Path, extra: str):
    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent(CASE) + textwrap.dedent(extra))
    return load_case(path, tmp_path)


def test_every_regression_case_is_named_by_its_bug():
    cases = load_cases(["regressions/*"])
    assert cases, "cases/regressions/ holds the published bugs"
    for case in cases:
        assert case.regression is not None, f"{case.id} has no regression: section"
        assert case.id == f"regressions/{case.regression.key.replace('#', '-')}", case.id
        assert "regression" in case.tags
        assert case.regression.summary and "\n" not in case.regression.summary


def test_a_regression_section_is_parsed_and_checked(tmp_path):
    case = load(tmp_path, """
        regression: {key: KAFKA-1, component: broker, affected: "<= 3.5.2", fixed: "3.6.0", summary: it hangs}
    """)
    assert (case.regression.key, case.regression.fixed) == ("KAFKA-1", "3.6.0")
    assert case.reference_bug() == "KAFKA-1"
    with pytest.raises(CaseError, match=r"regression\.key.*KAFKA-12671"):
        load(tmp_path, "regression: {key: bug-1, component: broker, affected: a, fixed: b, summary: s}\n")
    with pytest.raises(CaseError, match=r"regression\.component"):
        load(tmp_path, "regression: {key: KAFKA-1, component: zookeeper, affected: a, fixed: b, summary: s}\n")
    with pytest.raises(CaseError, match=r"regression.*summary"):
        load(tmp_path, "regression: {key: KAFKA-1, component: broker, affected: a, fixed: b}\n")


def test_a_client_bug_is_no_bug_of_the_reference(tmp_path):
    case = load(tmp_path, """
        regression: {key: KAFKA-9279, component: java, affected: "<= 3.1.2", fixed: "3.2.0", summary: s}
    """)
    assert case.reference_bug() is None


def test_known_reference_bug_goes_on_apache_kafka_rows_only(tmp_path):
    case = load(tmp_path, "known_reference_bug: KAFKA-20734\n")
    assert known_reference_bug(case, "apache-kafka") == "KAFKA-20734"
    assert known_reference_bug(case, "apache-kafka@4.2.0") == "KAFKA-20734"
    assert known_reference_bug(case, "embedded") is None
    with pytest.raises(CaseError, match="known_reference_bug"):
        load(tmp_path, "known_reference_bug: 20734\n")


def test_a_failing_row_with_a_known_reference_bug_says_so_and_keeps_it():
    row = Row(run_id="r", started_at="", case="c", case_title="c", target="apache-kafka", client="java",
              known_difference="something else", known_reference_bug="KAFKA-20734")
    row.judge([Check("x", False, "lost")])
    assert (row.verdict, row.reason) == (Verdict.FAIL, "known Kafka bug: KAFKA-20734")
    back = Row.from_dict(row.to_dict())
    assert back.known_reference_bug == "KAFKA-20734"
    plain = Row(run_id="r", started_at="", case="c", case_title="c", target="embedded", client="java")
    assert "known_reference_bug" not in plain.to_dict()
