"""Which target a run diffs the others against (runner.reference_target)."""
from __future__ import annotations

from conformance.runner.runner import reference_target


def test_the_current_kafka_release_is_the_reference_wherever_it_is_given():
    assert reference_target(["apache-kafka@3.9.1", "apache-kafka@4.2.0", "apache-kafka"]) == "apache-kafka"
    assert reference_target(["kfake", "apache-kafka"]) == "apache-kafka"


def test_else_the_first_kafka_release_given():
    assert reference_target(["apache-kafka@4.2.0", "apache-kafka@3.9.1"]) == "apache-kafka@4.2.0"
    assert reference_target(["kfake", "tansu"]) is None
    assert reference_target(["apache-kafka"]) is None
