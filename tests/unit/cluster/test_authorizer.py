"""The StandardAuthorizer's matching rules (cluster/authorizer), as StandardAuthorizerData has them."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from broker_impl.config import BrokerConfig, ConfigError
from broker_impl.cluster.authorizer import (BROKER_PRINCIPAL, STANDARD_AUTHORIZER, AclBinding, AclBindingFilter,
                                           AclOperation as Op, AclPermissionType as Perm, PatternType as Pat,
                                           ResourceType as Res, StandardAuthorizer, client_host)

ALICE, BOB = "User:alice", "User:bob"
HOST = "127.0.0.1"


def acl(name, op, perm=Perm.ALLOW, principal=ALICE, rtype=Res.TOPIC, pattern=Pat.LITERAL, host="*"):
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def authorizer(*acls, supers=(), allow_if_none=False):
    a = StandardAuthorizer(set(supers), allow_if_none)
    a.create(list(acls))
    return a


def test_no_acl_denies_unless_allow_everyone():
    assert not authorizer().authorize(ALICE, HOST, Op.READ, Res.TOPIC, "t")
    assert authorizer(allow_if_none=True).authorize(ALICE, HOST, Op.READ, Res.TOPIC, "t")


def test_allow_everyone_only_where_the_resource_has_no_acl_at_all():
    # an ACL of anybody on the resource takes it out of the default (hasResourceAcls)
    a = authorizer(acl("t", Op.READ, principal=BOB), allow_if_none=True)
    assert not a.authorize(ALICE, HOST, Op.READ, Res.TOPIC, "t")
    assert a.authorize(BOB, HOST, Op.READ, Res.TOPIC, "t")
    assert a.authorize(ALICE, HOST, Op.READ, Res.TOPIC, "other")


def test_super_users_and_the_broker_itself():
    a = authorizer(acl("t", Op.ALL, Perm.DENY, principal="User:*"), supers={"User:admin"})
    assert a.authorize("User:admin", HOST, Op.WRITE, Res.TOPIC, "t")
    assert a.authorize(BROKER_PRINCIPAL, HOST, Op.CLUSTER_ACTION, Res.CLUSTER, "kafka-cluster")
    assert not a.authorize(ALICE, HOST, Op.WRITE, Res.TOPIC, "t")


def test_deny_wins_over_allow():
    a = authorizer(acl("t", Op.READ), acl("t", Op.READ, Perm.DENY, principal="User:*"))
    assert not a.authorize(ALICE, HOST, Op.READ, Res.TOPIC, "t")


@pytest.mark.parametrize("granted", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE, Op.ALL])
def test_describe_implied(granted):
    assert authorizer(acl("t", granted)).authorize(ALICE, HOST, Op.DESCRIBE, Res.TOPIC, "t")


@pytest.mark.parametrize("granted", [Op.CREATE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE])
def test_describe_not_implied(granted):
    assert not authorizer(acl("t", granted)).authorize(ALICE, HOST, Op.DESCRIBE, Res.TOPIC, "t")


def test_describe_configs_implied_by_alter_configs_and_no_other_implication():
    a = authorizer(acl("t", Op.ALTER_CONFIGS))
    assert a.authorize(ALICE, HOST, Op.DESCRIBE_CONFIGS, Res.TOPIC, "t")
    assert not authorizer(acl("t", Op.WRITE)).authorize(ALICE, HOST, Op.READ, Res.TOPIC, "t")
    assert not authorizer(acl("t", Op.READ)).authorize(ALICE, HOST, Op.WRITE, Res.TOPIC, "t")


def test_a_deny_implies_nothing():
    # DENY READ does not deny DESCRIBE (and an ALLOW DESCRIBE still allows it)
    a = authorizer(acl("t", Op.READ, Perm.DENY), acl("t", Op.DESCRIBE))
    assert a.authorize(ALICE, HOST, Op.DESCRIBE, Res.TOPIC, "t")
    assert not a.authorize(ALICE, HOST, Op.READ, Res.TOPIC, "t")
    assert not authorizer(acl("t", Op.ALL, Perm.DENY), acl("t", Op.READ)).authorize(ALICE, HOST, Op.READ,
                                                                                       Res.TOPIC, "t")


def test_patterns_literal_wildcard_prefixed():
    a = authorizer(acl("orders", Op.READ), acl("pay-", Op.READ, pattern=Pat.PREFIXED),
                   acl("*", Op.WRITE), acl("g", Op.READ, rtype=Res.GROUP))
    assert a.authorize(ALICE, HOST, Op.READ, Res.TOPIC, "orders")
    assert not a.authorize(ALICE, HOST, Op.READ, Res.TOPIC, "orders-2")     # literal: the whole name
    assert a.authorize(ALICE, HOST, Op.READ, Res.TOPIC, "pay-eu")
    assert not a.authorize(ALICE, HOST, Op.READ, Res.TOPIC, "pay")
    assert a.authorize(ALICE, HOST, Op.WRITE, Res.TOPIC, "anything")
    assert not a.authorize(ALICE, HOST, Op.READ, Res.TOPIC, "g")             # a group's ACL is no topic's
    assert a.authorize(ALICE, HOST, Op.READ, Res.GROUP, "g")
    assert not authorizer(acl("*", Op.READ, pattern=Pat.PREFIXED)).authorize(ALICE, HOST, Op.READ, Res.TOPIC, "t")


def test_principal_and_host():
    a = authorizer(acl("t", Op.READ, principal="User:*"), acl("u", Op.READ, host="10.0.0.1"))
    assert a.authorize(BOB, HOST, Op.READ, Res.TOPIC, "t")
    assert not a.authorize(ALICE, HOST, Op.READ, Res.TOPIC, "u")
    assert a.authorize(ALICE, "10.0.0.1", Op.READ, Res.TOPIC, "u")


def test_client_host_is_the_peer_without_its_port():
    assert client_host(SimpleNamespace(peer="127.0.0.1:53122")) == "127.0.0.1"
    assert client_host(SimpleNamespace(peer="[::1]:53122")) == "::1"


def test_authorize_by_resource_type():
    assert authorizer(acl("t", Op.WRITE)).authorize_by_resource_type(ALICE, HOST, Op.WRITE, Res.TOPIC)
    assert not authorizer(acl("t", Op.READ)).authorize_by_resource_type(ALICE, HOST, Op.WRITE, Res.TOPIC)
    assert not authorizer(acl("t", Op.WRITE), acl("t", Op.WRITE, Perm.DENY)).authorize_by_resource_type(
        ALICE, HOST, Op.WRITE, Res.TOPIC)
    assert not authorizer(acl("p-1", Op.WRITE), acl("p-", Op.WRITE, Perm.DENY, pattern=Pat.PREFIXED)
                          ).authorize_by_resource_type(ALICE, HOST, Op.WRITE, Res.TOPIC)
    assert authorizer(acl("p-", Op.WRITE, pattern=Pat.PREFIXED)).authorize_by_resource_type(
        ALICE, HOST, Op.WRITE, Res.TOPIC)
    assert not authorizer(acl("t", Op.WRITE), acl("*", Op.WRITE, Perm.DENY)).authorize_by_resource_type(
        ALICE, HOST, Op.WRITE, Res.TOPIC)


def test_filters_match_as_kafka_resource_pattern_filters():
    lit, pre, wild = acl("orders", Op.READ), acl("ord", Op.READ, pattern=Pat.PREFIXED), acl("*", Op.READ)
    a = authorizer(lit, pre, wild, acl("g", Op.READ, rtype=Res.GROUP))

    def f(name, pattern, rtype=Res.TOPIC, **kw):
        d = dict(principal=None, host=None, operation=Op.ANY, permission_type=Perm.ANY)
        d.update(kw)
        return AclBindingFilter(rtype, name, pattern, **d)

    assert a.describe(f("orders", Pat.MATCH)) == [lit, pre, wild]
    assert a.describe(f("orders", Pat.ANY)) == [lit]
    assert a.describe(f("ord", Pat.PREFIXED)) == [pre]
    assert a.describe(f(None, Pat.ANY)) == [lit, pre, wild]
    assert len(a.describe(f(None, Pat.ANY, Res.ANY))) == 4
    assert a.describe(f(None, Pat.ANY, principal=BOB)) == []
    assert a.describe(f(None, Pat.ANY, operation=Op.WRITE)) == []


def test_validation_errors_are_kafkas_messages():
    assert acl("kafka", Op.ALTER, rtype=Res.CLUSTER).validation_error() == \
        "The only valid name for the CLUSTER resource is kafka-cluster"
    assert acl("", Op.READ).validation_error() == "Invalid empty resource name"
    assert acl("t", Op.READ, pattern=Pat.UNKNOWN).validation_error() == "Invalid patternType UNKNOWN"
    assert acl("t", Op.UNKNOWN).validation_error() == "Invalid operation UNKNOWN"
    # ANY / MATCH fail a whole CreateAcls before (UNKNOWN_SERVER_ERROR, measured)
    assert acl("t", Op.ANY).names_any() and acl("t", Op.READ, pattern=Pat.MATCH).names_any()
    assert not acl("t", Op.READ).names_any() and not acl("t", Op.UNKNOWN).names_any()
    assert acl("t", Op.READ, principal="alice").validation_error().startswith("Could not parse principal")
    assert acl("kafka-cluster", Op.ALTER, rtype=Res.CLUSTER).validation_error() is None


def test_kept_durably_and_deleted(tmp_path):
    path = tmp_path / "acls.json"
    a = StandardAuthorizer(set(), False, path)
    a.create([acl("t", Op.READ), acl("u", Op.WRITE, Perm.DENY, pattern=Pat.PREFIXED)])
    again = StandardAuthorizer(set(), False, path)
    assert list(again.acls) == list(a.acls)
    deleted = again.delete([AclBindingFilter(Res.TOPIC, "t", Pat.LITERAL, None, None, Op.ANY, Perm.ANY)])
    assert deleted == [[acl("t", Op.READ)]]
    assert list(StandardAuthorizer(set(), False, path).acls) == [acl("u", Op.WRITE, Perm.DENY, pattern=Pat.PREFIXED)]


def test_configuration(tmp_path):
    assert StandardAuthorizer.from_config(BrokerConfig({}), tmp_path, False) is None
    conf = BrokerConfig({"authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:admin;User:ops",
                         "allow.everyone.if.no.acl.found": "true"})
    a = StandardAuthorizer.from_config(conf, tmp_path, False)
    assert {"User:admin", "User:ops"} <= a.super_users and a.allow_if_no_acl
    cluster_broker = StandardAuthorizer.from_config(conf, tmp_path, True)
    assert cluster_broker.path is None          # its ACLs come with the metadata image
    with pytest.raises(ConfigError):
        StandardAuthorizer.from_config(BrokerConfig({"authorizer.class.name": "kafka.security.Other"}), tmp_path, False)


def test_a_cluster_controller_commits_acls_and_a_restart_keeps_them(tmp_path):
    """A broker of a cluster forwards CreateAcls/DeleteAcls (handlers/acls): the controller
    commits them to the metadata image in one step, which every broker applies; a controller
    restarted from its metadata file has them. No quorum: nothing is committed."""
    from broker_impl.cluster.authorizer import binding_dict
    from broker_impl.cluster.controller import QuorumController
    from broker_impl.config import BrokerConfig

    allow = AclBinding(Res.TRANSACTIONAL_ID, "txn-1", Pat.LITERAL, "User:*", "*", Op.WRITE,
                       Perm.ALLOW)
    deny = AclBinding(Res.TRANSACTIONAL_ID, "txn-1", Pat.LITERAL, "User:*", "*", Op.WRITE,
                      Perm.DENY)
    c = QuorumController(BrokerConfig({}), tmp_path / "ctl", frozenset({1, 2, 3}))
    assert c.alter_acls([binding_dict(allow)], [], now=0.0) is None and c.image.acls == []
    for node in (1, 2):
        c.register_broker(node, f"inc-{node}", "127.0.0.1", 9000 + node, now=0.0)
    offset = c.image.offset
    assert c.alter_acls([binding_dict(allow), binding_dict(deny)], [], now=0.0) == []
    assert c.image.offset == offset + 1
    broker_side = StandardAuthorizer(set(), True)
    broker_side.load(c.image.acls)
    assert not broker_side.authorize("User:alice", "127.0.0.1", Op.WRITE, Res.TRANSACTIONAL_ID, "txn-1")
    only_deny = AclBindingFilter(Res.TRANSACTIONAL_ID, "txn-1", Pat.LITERAL, None, None, Op.ANY,
                                 Perm.DENY)
    assert c.alter_acls([], [binding_dict(only_deny)], now=0.0) == [[binding_dict(deny)]]
    assert c.alter_acls([], [binding_dict(only_deny)], now=0.0) == [[]]          # nothing left to commit
    assert c.image.offset == offset + 2
    again = QuorumController(BrokerConfig({}), tmp_path / "ctl", frozenset({1, 2, 3}))
    assert again.image.acls == [binding_dict(allow)]
    broker_side.load(again.image.acls)
    assert broker_side.authorize("User:alice", "127.0.0.1", Op.WRITE, Res.TRANSACTIONAL_ID, "txn-1")
