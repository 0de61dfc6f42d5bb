"""conformance/security.py: a run's security settings, as each side takes them."""
from __future__ import annotations

import pytest

from conformance import security
from conformance.dsl import load_cases
from conformance.runner.proxying import ADVERTISE, REWRITE, front_mode
from conformance.security import ENV, Security
from conformance.targets import TARGETS
from conformance.targets.apache_kafka import _listener_named, sasl_broker_configs


def test_generate_makes_a_new_user_per_run_and_hides_the_password():
    a, b = Security.generate("sasl_plaintext"), Security.generate("sasl_plaintext")
    assert (a.protocol, a.mechanism) == ("SASL_PLAINTEXT", "SCRAM-SHA-512")
    assert a.username != b.username and a.password != b.password and len(a.password) >= 20
    assert a.password not in repr(a) and a.username in repr(a)
    assert Security.generate("plaintext") == Security()
    with pytest.raises(ValueError, match="sasl_plaintext"):
        Security.generate("sasl_ssl")


def test_settings_per_client_family_and_the_driver_environment():
    s = Security("SASL_PLAINTEXT", "SCRAM-SHA-512", "u1", "p-1")
    assert s.client_properties() == {
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                            'username="u1" password="p-1";'}
    assert s.librdkafka_config() == {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "SCRAM-SHA-512",
                                     "sasl.username": "u1", "sasl.password": "p-1"}
    assert s.python_kwargs()["sasl_plain_password"] == "p-1"
    assert Security.from_env(s.to_env()) == s
    assert Security.from_env({}) == Security() and Security().to_env() == {} and ENV in s.to_env()
    assert s.embedded_broker_configs("127.0.0.1:9092") == {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:9092", "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "kconform.sasl.users": "u1:p-1"}
    assert Security().embedded_broker_configs("127.0.0.1:9092") == {}


def test_apache_kafka_broker_settings():
    s = Security("SASL_PLAINTEXT", "SCRAM-SHA-512", "u1", "p-1")
    assert sasl_broker_configs(s) == {
        "sasl.enabled.mechanisms": "SCRAM-SHA-512", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": s.client_properties()["sasl.jaas.config"]}
    assert sasl_broker_configs(Security()) == {}
    assert _listener_named("PLAINTEXT://127.0.0.1:5", "SASL_PLAINTEXT") == "SASL_PLAINTEXT://127.0.0.1:5"


def test_use_scopes_the_run_setting():
    s = Security.generate("sasl_plaintext")
    assert not security.current().sasl
    with security.use(s):
        assert security.current() is s
    assert not security.current().sasl


def test_embedded_broker_is_not_advertised_behind_the_proxy_over_sasl():
    """Its own AddPartitionsToTxn verification cannot authenticate to an advertised proxy."""
    case = load_cases(["txn/basic_commit"])[0]
    assert front_mode(TARGETS["embedded"], case) == ADVERTISE
    with security.use(Security.generate("sasl_plaintext")):
        assert front_mode(TARGETS["embedded"], case) == REWRITE
        assert front_mode(TARGETS["apache-kafka"], case) == ADVERTISE


def test_a_run_over_sasl_is_not_applicable_where_the_target_cannot_secure_it(tmp_path):
    """Checked before any process starts: a target without a SASL set-up, and an embedded
    cluster (its nodes' own connections are PLAINTEXT)."""
    from conformance.results import NotApplicable
    from conformance.targets.base import Target
    from conformance.targets.topology import Topology

    class Plain(Target):
        name = "plain-only"

        @classmethod
        def availability(cls):
            return True, "test"

    Plain.__abstractmethods__ = frozenset()
    with security.use(Security.generate("sasl_plaintext")):
        with pytest.raises(NotApplicable, match="does not set up a SASL_PLAINTEXT listener"):
            Plain().start(Topology(), {}, tmp_path)
        with pytest.raises(NotApplicable, match="one node only"):
            TARGETS["embedded"]().start(Topology(nodes=3), {}, tmp_path)
