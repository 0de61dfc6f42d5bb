"""AlterUserScramCredentials and DescribeUserScramCredentials on the embedded broker, over real
sockets: a changed password counts from the next authentication (a connection authenticated
before keeps its session, a re-authentication needs the new one), the change survives a
restart, the cluster ACL checks, and on a 3-node cluster every broker gets the change from the
controller and keeps it across a restart. Kafka's rules and order: tests/unit/cluster/test_scram.py."""

from __future__ import annotations

import hashlib
import os
import time

import pytest

from broker_impl.codec import API
from broker_impl.protocol.errors import Errors as E
from conformance.targets import EmbeddedTarget, Topology

from .rawclient import RawConnection
from .sasl_raw import login

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

USERS = "admin:admin-secret,alice:alice-secret"
SASL = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "kconform.sasl.users": USERS, "connections.max.reauth.ms": "60000",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin"}
AlterReq = API["AlterUserScramCredentials"].Request
DescribeReq = API["DescribeUserScramCredentials"].Request


def _upsert(user: str, mechanism: int, password: str, iterations: int = 8192, salt: bytes = b"a-new-salt"):
    h = {1: "sha256", 2: "sha512"}[mechanism]
    return AlterReq.ScramCredentialUpsertion(name=user, mechanism=mechanism, iterations=iterations, salt=salt,
                                             salted_password=hashlib.pbkdf2_hmac(h, password.encode(), salt, iterations))


def _as(bootstrap: str, user: str, password: str, api: str, body):
    with RawConnection(bootstrap) as conn:
        assert login(conn, "SCRAM-SHA-512", user, password).error_code == 0
        return conn.request(api, 0, body)


def _login_error(bootstrap: str, mechanism: str, user: str, password: str) -> int:
    with RawConnection(bootstrap) as conn:
        return login(conn, mechanism, user, password).error_code


def _describe(bootstrap: str, users, login_as=("admin", "admin-secret")):
    body = DescribeReq(users=None if users is None else [DescribeReq.UserName(name=u) for u in users])
    if login_as is None:
        with RawConnection(bootstrap) as conn:
            r = conn.request("DescribeUserScramCredentials", 0, body)
    else:
        r = _as(bootstrap, *login_as, "DescribeUserScramCredentials", body)
    return {x.user: (x.error_code, [(c.mechanism, c.iterations) for c in x.credential_infos]) for x in r.results}


def test_a_new_password_counts_from_the_next_authentication_and_survives_a_restart(broker_factory):
    b = broker_factory(SASL)
    with RawConnection(b.bootstrap) as old_session:
        assert login(old_session, "SCRAM-SHA-512", "alice", "alice-secret").error_code == 0
        r = _as(b.bootstrap, "admin", "admin-secret", "AlterUserScramCredentials",
                AlterReq(deletions=[], upsertions=[_upsert("alice", 2, "alice-new")]))
        assert [(x.user, x.error_code, x.error_message) for x in r.results] == [("alice", 0, None)]
        assert _login_error(b.bootstrap, "SCRAM-SHA-512", "alice", "alice-secret") == E.SASL_AUTHENTICATION_FAILED
        assert _login_error(b.bootstrap, "SCRAM-SHA-512", "alice", "alice-new") == 0
        assert _login_error(b.bootstrap, "SCRAM-SHA-256", "alice", "alice-secret") == 0   # the other mechanism's
        # the connection that authenticated before keeps its session (KIP-368) ...
        assert old_session.request("Metadata", 1, API["Metadata"].Request(topics=None)).brokers
        # ... until it re-authenticates: then the new password is needed
        time.sleep(1.1)
        assert login(old_session, "SCRAM-SHA-512", "alice", "alice-secret").error_code == E.SASL_AUTHENTICATION_FAILED
    assert _describe(b.bootstrap, ["alice"]) == {"alice": (0, [(2, 8192), (1, 4096)])}
    r = _as(b.bootstrap, "admin", "admin-secret", "AlterUserScramCredentials",
            AlterReq(deletions=[AlterReq.ScramCredentialDeletion(name="alice", mechanism=1)], upsertions=[]))
    assert [(x.user, x.error_code) for x in r.results] == [("alice", 0)]
    b.stop()
    b.start()
    assert _login_error(b.bootstrap, "SCRAM-SHA-512", "alice", "alice-new") == 0
    assert _login_error(b.bootstrap, "SCRAM-SHA-512", "alice", "alice-secret") == E.SASL_AUTHENTICATION_FAILED
    assert _login_error(b.bootstrap, "SCRAM-SHA-256", "alice", "alice-secret") == E.SASL_AUTHENTICATION_FAILED
    assert _describe(b.bootstrap, ["alice"]) == {"alice": (0, [(2, 8192)])}
    assert not any(b"alice-new" in p.read_bytes() for p in b.data_dir.rglob("*") if p.is_file())


def test_without_cluster_permissions(broker_factory):
    b = broker_factory(SASL)
    r = _as(b.bootstrap, "alice", "alice-secret", "DescribeUserScramCredentials",
            DescribeReq(users=[DescribeReq.UserName(name="admin"), DescribeReq.UserName(name="bob")]))
    # measured on Kafka 4.3.1: no messages; and a null list of users is never answered
    assert (r.error_code, r.error_message) == (E.CLUSTER_AUTHORIZATION_FAILED, None)
    assert [(x.user, x.error_code, x.error_message) for x in r.results] == [("", E.CLUSTER_AUTHORIZATION_FAILED, None)] * 2
    with RawConnection(b.bootstrap, timeout=3) as conn:
        assert login(conn, "SCRAM-SHA-512", "alice", "alice-secret").error_code == 0
        conn.send_raw(conn.encode_request("DescribeUserScramCredentials", 0, DescribeReq(users=None)))
        with pytest.raises(TimeoutError):
            conn.recv_frame()
    r = _as(b.bootstrap, "alice", "alice-secret", "AlterUserScramCredentials", AlterReq(
        deletions=[AlterReq.ScramCredentialDeletion(name="zed", mechanism=1)],
        upsertions=[_upsert("alice", 2, "x"), _upsert("zed", 1, "y"), _upsert("bob", 1, "z")]))
    assert [(x.user, x.error_code) for x in r.results] == [
        ("alice", E.CLUSTER_AUTHORIZATION_FAILED), ("bob", E.CLUSTER_AUTHORIZATION_FAILED),
        ("zed", E.CLUSTER_AUTHORIZATION_FAILED)]
    assert _login_error(b.bootstrap, "SCRAM-SHA-512", "alice", "alice-secret") == 0


def test_a_cluster_gives_every_broker_the_change_and_keeps_it(tmp_path):
    target = EmbeddedTarget()
    try:
        bootstrap = target.start(Topology(nodes=3, topics=[]), {}, tmp_path / "c").split(",")[0]
        with RawConnection(bootstrap) as conn:
            r = conn.request("AlterUserScramCredentials", 0, AlterReq(
                deletions=[], upsertions=[_upsert("carol", 1, "carol-secret"), _upsert("dan", 2, "d", 4096)]))
        assert sorted((x.user, x.error_code) for x in r.results) == [("carol", 0), ("dan", 0)]
        want = {"carol": (0, [(1, 8192)]), "dan": (0, [(2, 4096)])}

        def every_node_has(expected) -> bool:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                seen = [_describe(f"{h}:{p}", None, login_as=None) for _, (h, p) in target.live_addresses()]
                if len(seen) == 3 and all(s == expected for s in seen):
                    return True
                time.sleep(0.2)
            return False

        assert every_node_has(want)
        node = target.node_ids()[-1]
        target.restart(node)
        assert every_node_has(want)
        with RawConnection(bootstrap) as conn:   # a deletion goes the same way
            r = conn.request("AlterUserScramCredentials", 0, AlterReq(
                deletions=[AlterReq.ScramCredentialDeletion(name="dan", mechanism=2)], upsertions=[]))
        assert [(x.user, x.error_code) for x in r.results] == [("dan", 0)]
        assert every_node_has({"carol": want["carol"]})
    finally:
        target.stop()


@pytest.fixture
def scram_admin(broker_factory):
    """(bootstrap, user, password) of a super user: an embedded broker's, or Kafka's when
    KCONFORM_SCRAM_KAFKA=HOST:PORT and KCONFORM_SCRAM_KAFKA_LOGIN=USER:PASSWORD name one (a
    SASL_PLAINTEXT listener with SCRAM-SHA-512 and no authorizer, e.g. the apache-kafka
    target's on a run over sasl_plaintext)."""
    if os.environ.get("KCONFORM_SCRAM_KAFKA"):
        user, _, password = os.environ["KCONFORM_SCRAM_KAFKA_LOGIN"].partition(":")
        return os.environ["KCONFORM_SCRAM_KAFKA"], user, password
    return broker_factory(SASL).bootstrap, "admin", "admin-secret"


def test_raw_answers_with_their_messages(scram_admin):
    """Kafka 4.3.1's answers, messages and order included (measured the same on both)."""
    boot, user, password = scram_admin

    def alter(deletions, upsertions):
        r = _as(boot, user, password, "AlterUserScramCredentials", AlterReq(
            deletions=[AlterReq.ScramCredentialDeletion(name=n, mechanism=m) for n, m in deletions],
            upsertions=upsertions))
        return [(x.user, x.error_code, x.error_message) for x in r.results]

    def bad(name, mechanism, iterations=4096):
        return AlterReq.ScramCredentialUpsertion(name=name, mechanism=mechanism, iterations=iterations,
                                                 salt=b"s", salted_password=b"p")

    assert _describe(boot, ["nobody", "zed", "zed", "amy"], (user, password)) == {
        "zed": (E.DUPLICATE_RESOURCE, []), "nobody": (E.RESOURCE_NOT_FOUND, []), "amy": (E.RESOURCE_NOT_FOUND, [])}
    r = _as(boot, user, password, "DescribeUserScramCredentials", DescribeReq(users=[DescribeReq.UserName(name="amy")]))
    assert r.results[0].error_message == "Attempt to describe a user credential that does not exist: amy"
    assert alter([], [_upsert("carol", 1, "c", 4096)]) == [("carol", 0, None)]
    time.sleep(1)   # Kafka's broker answers Describe from its metadata cache
    twice = "A user credential cannot be altered twice in the same request"
    missing = "Attempt to delete a user credential that does not exist"
    assert alter([("nobody", 1), ("carol", 2), ("hank", 0), ("ivy", 1), ("ivy", 1)], [
        bad("dave", 0), bad("erin", 1, 100), bad("frank", 2, 20000), bad("", 1), bad("gina", 1), bad("gina", 2),
        bad("gina", 2), bad("jack", 1, 16384),
        AlterReq.ScramCredentialUpsertion(name="kim", mechanism=2, iterations=5000, salt=b"", salted_password=b""),
        bad("nobody", 1)]) == [
        ("jack", 0, None), ("frank", E.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
        ("", E.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"), ("carol", E.RESOURCE_NOT_FOUND, missing),
        ("dave", E.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"), ("gina", E.DUPLICATE_RESOURCE, twice),
        ("hank", E.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"), ("nobody", E.RESOURCE_NOT_FOUND, missing),
        ("ivy", E.RESOURCE_NOT_FOUND, missing), ("erin", E.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        ("kim", E.UNKNOWN_SERVER_ERROR, None)]
    assert alter([("carol", 1)], [bad("carol", 2)]) == [("carol", E.DUPLICATE_RESOURCE, twice)]
    time.sleep(1)
    assert _describe(boot, ["carol", "jack", "kim"], (user, password)) == {
        "carol": (0, [(1, 4096)]), "jack": (0, [(1, 16384)]), "kim": (E.RESOURCE_NOT_FOUND, [])}
