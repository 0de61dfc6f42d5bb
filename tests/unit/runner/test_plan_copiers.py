"""Which copiers a workload row keeps: a client that cannot copy exactly once across rebalances
runs only as its group's single member (conformance/runner/workload_run.plan_copiers)."""
from __future__ import annotations

from conformance.dsl.model import WorkerDef
from conformance.runner.workload_run import plan_copiers


def copier(name: str, client: str, group: str = "etl") -> WorkerDef:
    return WorkerDef(name=name, kind="copier", topics=("in",), to="out", group=group, client=client)


def test_a_flawed_client_never_shares_a_group_with_members_that_come_and_go() -> None:
    # Sarama first, Java after it: Java's restarts would rebalance Sarama (seed 302 copied 213
    # records twice so) -- Sarama is left out, Java copies
    skipped, alone = plan_copiers([copier("c1", "sarama"), copier("c2", "java")], "confluent", every=False)
    assert list(skipped) == ["c1"] and "c2 come and go in etl" in skipped["c1"] and alone == []


def test_a_group_of_flawed_clients_keeps_its_first_alone_and_without_churn() -> None:
    skipped, alone = plan_copiers([copier("c1", "sarama"), copier("c2", "confluent"), copier("c3", "java", "other")],
                                  "confluent", every=False)
    assert list(skipped) == ["c2"] and "one copier per group (c1 copies for etl)" in skipped["c2"]
    assert alone == ["c1"]


def test_every_member_on_request_and_kafkajs_never() -> None:
    workers = [copier("c1", "sarama"), copier("c2", "java"), copier("c3", "kafkajs")]
    skipped, alone = plan_copiers(workers, "confluent", every=True)
    assert list(skipped) == ["c3"] and "filters aborted transactions wrongly" in skipped["c3"] and alone == []
