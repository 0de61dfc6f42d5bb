"""ACLs end to end (server/authorizer, handlers/acls): an embedded broker with Kafka's
StandardAuthorizer over SASL_PLAINTEXT, librdkafka (confluent-kafka) as the clients. ``admin`` is
a super user; ``alice`` and ``bob`` get what each test grants them through CreateAcls."""

from __future__ import annotations

import time
import uuid

import pytest

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,  # noqa: E402
                                   AdminClient, ResourcePatternType, ResourceType)

from broker_impl.codec import API  # noqa: E402

from .rawclient import RawConnection  # noqa: E402
from .sasl_raw import login  # noqa: E402

USERS = "admin:admin-secret,alice:alice-secret,bob:bob-secret"
SECURED = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "SCRAM-SHA-512",
           "kconform.sasl.users": USERS, "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
           "super.users": "User:admin"}
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LITERAL, PREFIXED = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
E = ck.KafkaError


def _conf(b, user: str, **extra) -> dict:
    return {"bootstrap.servers": b.bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": user, "sasl.password": f"{user}-secret", **extra}


def _grant(admin: AdminClient, *bindings: AclBinding) -> None:
    for f in admin.create_acls(list(bindings), request_timeout=15).values():
        assert f.result(timeout=20) is None


def _acl(rtype, name, user, op, perm=ALLOW, pattern=LITERAL) -> AclBinding:
    return AclBinding(rtype, name, pattern, f"User:{user}", "*", op, perm)


@pytest.fixture
def secured(broker_factory):
    b = broker_factory(SECURED)
    admin = AdminClient(_conf(b, "admin"))
    return b, admin


def _names() -> tuple[str, str, str]:
    s = uuid.uuid4().hex[:8]
    return f"t-{s}", f"tx-{s}", f"g-{s}"


def test_transactional_id_without_write_is_refused_at_init_transactions(secured):
    b, admin = secured
    topic, txn, _ = _names()
    p = ck.Producer(_conf(b, "alice", **{"transactional.id": txn, "linger.ms": 0}))
    with pytest.raises(ck.KafkaException) as exc:
        p.init_transactions(20)
    assert exc.value.args[0].code() == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    # granted WRITE on the transactional id and on the topic: the same user commits
    _grant(admin, _acl(ResourceType.TRANSACTIONAL_ID, txn, "alice", AclOperation.WRITE),
           _acl(ResourceType.TOPIC, topic, "alice", AclOperation.WRITE))
    admin_p = ck.Producer(_conf(b, "admin"))      # the topic, created by a user allowed to
    admin_p.produce(topic, value=b"first")
    assert admin_p.flush(20) == 0
    p = ck.Producer(_conf(b, "alice", **{"transactional.id": txn, "linger.ms": 0}))
    p.init_transactions(20)
    p.begin_transaction()
    p.produce(topic, value=b"in-txn")
    assert p.flush(20) == 0
    p.commit_transaction(20)


def test_topic_without_write_fails_the_produce(secured):
    b, admin = secured
    topic, _, _ = _names()
    _grant(admin, _acl(ResourceType.TOPIC, topic, "alice", AclOperation.READ))   # READ is not WRITE
    reports: list = []
    p = ck.Producer(_conf(b, "admin"))
    p.produce(topic, value=b"x")
    assert p.flush(20) == 0
    p = ck.Producer(_conf(b, "alice", **{"linger.ms": 0, "message.timeout.ms": 15000, "enable.idempotence": False}))
    p.produce(topic, value=b"y", on_delivery=lambda err, msg: reports.append(err))
    p.flush(20)
    assert reports and reports[0] is not None and reports[0].code() == E.TOPIC_AUTHORIZATION_FAILED


def test_consumer_needs_read_on_the_group(secured):
    b, admin = secured
    topic, _, group = _names()
    p = ck.Producer(_conf(b, "admin"))
    for i in range(3):
        p.produce(topic, value=b"v%d" % i)
    assert p.flush(20) == 0
    _grant(admin, _acl(ResourceType.TOPIC, topic, "bob", AclOperation.READ))

    def consume(limit_s: float = 20):
        """What bob reads, the errors he gets, and the offsets he then commits (OffsetCommit)."""
        got, errors, committed = [], [], None
        c = ck.Consumer(_conf(b, "bob", **{"group.id": group, "auto.offset.reset": "earliest",
                                          "enable.auto.commit": False}))
        c.subscribe([topic])
        deadline = time.monotonic() + limit_s
        try:
            while len(got) < 3 and not errors and time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is None:
                    continue
                (errors if m.error() else got).append(m.error() or m.value())
            if got:
                committed = [(tp.topic, tp.offset, tp.error) for tp in c.commit(asynchronous=False)]
        finally:
            c.close()
        return got, errors, committed

    got, errors, _ = consume()
    assert got == [] and [e.code() for e in errors] == [E.GROUP_AUTHORIZATION_FAILED]
    _grant(admin, _acl(ResourceType.GROUP, group, "bob", AclOperation.READ))
    assert consume() == ([b"v0", b"v1", b"v2"], [], [(topic, 3, None)])


def test_create_describe_delete_acls_through_the_admin_client(secured):
    b, admin = secured
    bindings = [_acl(ResourceType.TOPIC, "orders", "alice", AclOperation.READ),
                _acl(ResourceType.TOPIC, "pay-", "alice", AclOperation.WRITE, DENY, PREFIXED),
                _acl(ResourceType.GROUP, "g", "bob", AclOperation.ALL)]
    _grant(admin, *bindings)
    every = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                             AclPermissionType.ANY)
    assert sorted(map(str, admin.describe_acls(every, request_timeout=15).result(timeout=20))) == \
        sorted(map(str, bindings))
    match = AclBindingFilter(ResourceType.TOPIC, "pay-eu", ResourcePatternType.MATCH, None, None, AclOperation.ANY,
                             AclPermissionType.ANY)
    assert [str(x) for x in admin.describe_acls(match, request_timeout=15).result(timeout=20)] == [str(bindings[1])]
    # a user without ALTER on the cluster may not create any
    alice = AdminClient(_conf(b, "alice"))
    fut = next(iter(alice.create_acls([bindings[0]], request_timeout=15).values()))
    with pytest.raises(ck.KafkaException) as exc:
        fut.result(timeout=20)
    assert exc.value.args[0].code() == E.CLUSTER_AUTHORIZATION_FAILED
    # nor describe them without DESCRIBE on the cluster (confluent-kafka 2.16.1 reads that answer
    # as an empty list: its top-level error is not raised, hence the raw request)
    with RawConnection(b.bootstrap) as conn:
        login(conn, "SCRAM-SHA-512", "alice", "alice-secret")
        r = conn.request("DescribeAcls", 3, API["DescribeAcls"].Request(
            resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
            host_filter=None, operation=1, permission_type=1))
        assert (r.error_code, r.resources) == (E.CLUSTER_AUTHORIZATION_FAILED, [])
    topic_filter = AclBindingFilter(ResourceType.TOPIC, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                    AclPermissionType.ANY)
    deleted = next(iter(admin.delete_acls([topic_filter], request_timeout=15).values())).result(timeout=20)
    assert sorted(map(str, deleted)) == sorted(map(str, bindings[:2]))
    assert [str(x) for x in admin.describe_acls(every, request_timeout=15).result(timeout=20)] == [str(bindings[2])]
    # kept across a restart (acls.json in the data directory)
    b.stop()
    b.start()
    admin = AdminClient(_conf(b, "admin"))
    assert [str(x) for x in admin.describe_acls(every, request_timeout=15).result(timeout=20)] == [str(bindings[2])]


def test_raw_errors_of_the_acl_apis(broker_factory):
    """SECURITY_DISABLED without an authorizer; INVALID_REQUEST with Kafka's message for a binding
    it refuses; the connection closed for an element Kafka does not know."""
    plain = broker_factory()
    with RawConnection(plain.bootstrap) as conn:
        r = conn.request("DescribeAcls", 3, API["DescribeAcls"].Request(
            resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
            host_filter=None, operation=1, permission_type=1))
        assert (r.error_code, r.error_message) == (54, "No Authorizer is configured.")
    b = broker_factory(SECURED, name="secured")
    C = API["CreateAcls"].Request.AclCreation
    with RawConnection(b.bootstrap) as conn:
        login(conn, "SCRAM-SHA-512", "admin", "admin-secret")
        r = conn.request("CreateAcls", 3, API["CreateAcls"].Request(creations=[
            C(resource_type=4, resource_name="other", resource_pattern_type=3, principal="User:a", host="*",
              operation=7, permission_type=3),
            C(resource_type=2, resource_name="t", resource_pattern_type=2, principal="User:a", host="*",
              operation=3, permission_type=3),
            C(resource_type=2, resource_name="t", resource_pattern_type=3, principal="User:a", host="*",
              operation=3, permission_type=3)]))
        assert [(x.error_code, x.error_message) for x in r.results] == [
            (42, "The only valid name for the CLUSTER resource is kafka-cluster"), (42, "Invalid patternType MATCH"),
            (0, None)]
        conn.send_raw(conn.encode_request("CreateAcls", 3, API["CreateAcls"].Request(creations=[
            C(resource_type=99, resource_name="t", resource_pattern_type=3, principal="User:a", host="*",
              operation=3, permission_type=3)])))
        conn.sock.settimeout(10)
        assert conn.recv_frame() is None
