"""Kafka's error table, held against kafka-python's and against what kafka-clients 4.4.0 says."""

from __future__ import annotations

import kafka.errors

from broker_impl.codec import ERROR_TABLE, Errors, error_code, error_name
from broker_impl.log import errors as log_errors
from broker_impl.protocol.errors import RETRIABLE, KafkaError
from conformance.clients.errors import LOCAL_NAMES

#: kafka-python 3.0 still spells these codes the way older Kafka did.
KAFKA_PYTHON_SPELLINGS = {
    -1: "UNKNOWN", 0: "NO_ERROR", 6: "NOT_LEADER_FOR_PARTITION", 10: "MESSAGE_SIZE_TOO_LARGE",
    17: "INVALID_TOPIC", 39: "INVALID_REPLICATION_ASSIGNMENT",
}


def _kafka_python_table() -> dict[int, type]:
    out = {}
    for obj in vars(kafka.errors).values():
        if isinstance(obj, type) and issubclass(obj, kafka.errors.BrokerResponseError) \
                and getattr(obj, "errno", None) is not None:
            out[obj.errno] = obj
    return out


def test_one_row_per_code_from_unknown_server_error_on():
    codes = [e.code for e in ERROR_TABLE]
    assert codes == list(range(-1, len(codes) - 1))
    assert len({e.name for e in ERROR_TABLE}) == len(codes)
    assert ERROR_TABLE[-1].code >= 136  # kafka-clients 4.4.0 ends at CONTROLLER_ID_NOT_REGISTERED


def test_same_codes_and_names_as_kafka_python_where_both_know_them():
    theirs = _kafka_python_table()
    assert len(theirs) > 120
    ours = {e.code: e for e in ERROR_TABLE}
    assert set(theirs) <= set(ours)
    for code, cls in theirs.items():
        assert KAFKA_PYTHON_SPELLINGS.get(code, ours[code].name) == cls.message, code
        # kafka-python says CORRUPT_MESSAGE is final; Kafka's CorruptRecordException is retriable.
        if code != 2:
            assert ours[code].retriable == bool(cls.retriable), ours[code].name


def test_rows_read_from_kafka_clients_4_4_0():
    e = {x.name: x for x in ERROR_TABLE}
    assert e["NONE"].exception is None
    assert e["CORRUPT_MESSAGE"][1:] == ("CORRUPT_MESSAGE", "CorruptRecordException", True)
    assert e["NOT_LEADER_OR_FOLLOWER"][1:] == ("NOT_LEADER_OR_FOLLOWER", "NotLeaderOrFollowerException", True)
    assert e["PRODUCER_FENCED"][1:] == ("PRODUCER_FENCED", "ProducerFencedException", False)
    assert e["INVALID_REGULAR_EXPRESSION"][1:] == ("INVALID_REGULAR_EXPRESSION", "InvalidRegularExpression", False)
    assert e["SHARE_SESSION_LIMIT_REACHED"] == (133, "SHARE_SESSION_LIMIT_REACHED",
                                                 "ShareSessionLimitReachedException", True)
    assert e["CONTROLLER_ID_NOT_REGISTERED"].code == 136


def test_every_lookup_is_made_from_the_table():
    assert [(x.name, int(x)) for x in Errors] == [(e.name, e.code) for e in ERROR_TABLE]
    assert RETRIABLE == {Errors(e.code) for e in ERROR_TABLE if e.retriable}
    for e in ERROR_TABLE:
        assert error_name(e.code) == e.name and error_code(e.name) == e.code
    assert error_name(9999) == "ERROR_9999" and error_code("NOT_A_KAFKA_ERROR") is None
    assert not set(LOCAL_NAMES) & {e.name for e in ERROR_TABLE}
    for cls in vars(log_errors).values():
        if isinstance(cls, type) and issubclass(cls, log_errors.LogError):
            err = cls()     # one error root: a log error is a KafkaError carrying its class's code
            assert isinstance(err, KafkaError) and err.message is None
            assert err.error == error_code(str(err)) == error_code(cls.error.name)
