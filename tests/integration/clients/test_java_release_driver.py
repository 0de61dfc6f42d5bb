"""A Java client at an old kafka-clients release (`java@2.8.2`), built from the one driver source
against that release from Maven Central, on a real socket to the embedded broker: it reports its
exact release, runs a transaction, and an op whose API the release lacks (Admin.describeTransactions,
kafka-clients 3.0) answers UNSUPPORTED_BY_CLIENT naming the release instead of failing the build.

Cost: one Maven build (~30 s with ~/.m2 warm, cached in java-driver@2.8.2 afterwards) and one broker.
Skipped with Maven's reason when the release cannot be resolved (no network to Maven Central).
"""

from __future__ import annotations

import pytest

from conformance.clients import java_build
from conformance.clients.registry import CLIENTS

RELEASE = "2.8.2"
CLIENT = f"java@{RELEASE}"


@pytest.fixture(scope="module")
def built() -> None:
    missing = java_build.tools_missing()
    if missing:
        pytest.skip(f"{', '.join(missing)} not on PATH")
    try:
        java_build.ensure_built(RELEASE)
    except java_build.JavaBuildError as exc:
        if "Could not resolve" in str(exc) or "Could not transfer" in str(exc) or "resolution" in str(exc):
            pytest.skip(f"Maven cannot fetch kafka-clients {RELEASE}: {str(exc).splitlines()[-1]}")
        raise


@pytest.mark.parametrize("broker", ["embedded"], indirect=True)
def test_java_at_an_old_release_commits_and_degrades_per_op(built, broker, spawn, h):
    topic = broker.topic(partitions=1)
    p = spawn(CLIENT)
    assert p.hello["client_version"] == RELEASE == CLIENTS[CLIENT].version()
    h.ok(p.call("create_producer", config={"bootstrap.servers": broker.bootstrap,
                                           "transactional.id": h.unique("jv")}))
    h.ok(p.call("init_transactions", deadline_ms=60_000))
    h.ok(p.call("begin_transaction"))
    h.ok(p.call("send", topic=topic, partition=0, value="v"))
    h.ok(p.call("commit_transaction", deadline_ms=60_000))
    assert h.end_offsets(_admin(spawn, h, broker), topic, 1, "read_committed") == {0: 2}  # record + marker

    admin = _admin(spawn, h, broker)
    out = admin.call("describe_transactions", ids=["any"])
    assert not out.ok and out.error.name == "UNSUPPORTED_BY_CLIENT", out
    assert f"kafka-clients {RELEASE}" in out.error.message and "describeTransactions" in out.error.message


def _admin(spawn, h, broker):
    admin = spawn(CLIENT)
    h.ok(admin.call("create_admin", config={"bootstrap.servers": broker.bootstrap}))
    return admin
