"""The driver processes without a broker: start-up, error normalisation, deadlines, crashes.

A bootstrap address where nothing listens stands in for an unreachable cluster: the clients are real and
behave as they would against a dead broker, which is exactly what deadline handling must survive.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time

import pytest
from confluent_kafka import KafkaError

from conformance.clients import CLIENTS, ClientProcess, DriverStartError
from conformance.clients.confluent import normalise_kafka_error
from conformance.clients.errors import KAFKA_ERRORS, kafka_code, kafka_name
from conformance.clients.protocol import (OPS, ErrorInfo, decode_bytes, decode_reply, encode_bytes,
                                          encode_request)


@pytest.fixture(scope="module")
def silent_bootstrap():
    """An address that accepts connections and never answers: a cluster that hangs rather than one
    that is gone (bounded: the listener closes at the end of the module)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield f"127.0.0.1:{s.getsockname()[1]}"


# -- protocol pieces --------------------------------------------------------------------------------
def test_payloads_round_trip_text_and_binary():
    assert encode_bytes(None) is None and decode_bytes(None) is None
    assert encode_bytes("héllo".encode()) == "héllo"
    assert encode_bytes(b"\x00\xff") == {"base64": "AP8="}
    for raw in (b"", b"abc", b"\x00\xff\xfe", "ü".encode()):
        assert decode_bytes(encode_bytes(raw)) == raw
    with pytest.raises(ValueError):
        decode_bytes({"hex": "00"})


def test_requests_reject_unknown_ops_and_reserved_names():
    assert encode_request(3, "poll", 100, {"max_records": 1}).endswith(b"\n")
    with pytest.raises(ValueError):
        encode_request(1, "no_such_op", 100, {})
    with pytest.raises(ValueError):
        encode_request(1, "poll", 100, {"id": 2})


def test_malformed_reply_is_a_driver_error_not_an_exception():
    _, outcome = decode_reply(b"not json\n", "send", 1.0)
    assert not outcome.ok and outcome.error.name == "DRIVER_ERROR" and outcome.error.origin == "runner"
    rid, outcome = decode_reply(b'{"id": 4, "ok": false, "error": {"name": "PRODUCER_FENCED", "code": 90,'
                                b' "fenced": true, "fatal": true, "category": "x"}}', "commit_transaction", 1.0)
    assert rid == 4 and outcome.error.fenced and outcome.error.extra == {"category": "x"}
    assert ErrorInfo.from_dict(outcome.error.to_dict()) == outcome.error


def test_error_table_is_kafkas():
    assert kafka_name(90) == "PRODUCER_FENCED" and kafka_code("INVALID_PRODUCER_EPOCH") == 47
    assert kafka_name(6) == "NOT_LEADER_OR_FOLLOWER" and kafka_name(-1) == "UNKNOWN_SERVER_ERROR"
    assert KAFKA_ERRORS[120][0] == "TRANSACTION_ABORTABLE"
    assert kafka_code("DRIVER_TIMEOUT") is None


def test_librdkafka_local_errors_map_to_kafka_names():
    fenced = normalise_kafka_error(KafkaError(KafkaError._FENCED, "fenced", fatal=True))
    assert (fenced["name"], fenced["code"], fenced["fenced"], fenced["fatal"]) == ("PRODUCER_FENCED", 90, True, True)
    assert fenced["client_class"] == "KafkaError._FENCED"
    timed_out = normalise_kafka_error(KafkaError(KafkaError._TIMED_OUT, retriable=True))
    assert (timed_out["name"], timed_out["retriable"]) == ("REQUEST_TIMED_OUT", True)
    renamed = normalise_kafka_error(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION))
    assert renamed["name"] == "NOT_LEADER_OR_FOLLOWER"
    abortable = normalise_kafka_error(KafkaError(KafkaError.INVALID_PRODUCER_EPOCH, txn_requires_abort=True))
    assert (abortable["name"], abortable["abortable"], abortable["fatal"]) == ("INVALID_PRODUCER_EPOCH", True, False)


def test_every_op_is_documented_in_the_readme():
    from pathlib import Path
    readme = (Path(__file__).resolve().parents[3] / "conformance" / "clients" / "README.md").read_text()
    missing = [op for op in OPS if f"`{op}`" not in readme]
    assert not missing, f"README.md does not document {missing}"


def offline_config(client: str, bootstrap: str) -> dict[str, str]:
    """A config a client accepts without reaching a broker: kafka-python's constructors bootstrap
    unless told the broker's API version."""
    return {"bootstrap.servers": bootstrap, **({"api.version": "2.8"} if client == "kafka-python" else {})}


# -- every driver ---------------------------------------------------------------------------------
def test_hello_names_the_library_version(client, spawn):
    proc = spawn(client)
    assert proc.hello["library_version"] == CLIENTS[client].version()
    assert proc.hello["protocol"] == 1 and proc.hello["pid"] == proc.pid


def test_hello_lists_the_ops_the_driver_implements_as_the_definition_says(client, spawn, dead_bootstrap):
    """ops.yaml is the one op list: a driver implements every required op, lists no op the
    definition lacks, and answers every op it leaves out UNSUPPORTED_BY_CLIENT -- so adding an op to
    the definition, or to a driver only, fails here."""
    proc = spawn(client)
    ops = proc.hello["ops"]
    assert len(ops) == len(set(ops)), ops
    assert not set(ops) - set(OPS), f"{client} lists ops the definition lacks: {sorted(set(ops) - set(OPS))}"
    missing_required = sorted(op for op, spec in OPS.items() if spec.required and op not in ops)
    assert not missing_required, f"{client} lacks required ops {missing_required}"
    assert proc.call("create_producer", config=offline_config(client, dead_bootstrap)).ok
    for op in sorted(set(OPS) - set(ops)):
        outcome = proc.call(op, deadline_ms=5_000)
        assert not outcome.ok and outcome.error.name == "UNSUPPORTED_BY_CLIENT", (op, outcome.to_dict())


def test_ops_before_create_are_illegal_state(client, spawn):
    proc = spawn(client)
    for op in ("init_transactions", "send", "poll"):
        args = {"topic": "t"} if op == "send" else {}
        outcome = proc.call(op, deadline_ms=5_000, **args)
        assert not outcome.ok and outcome.error.name == "ILLEGAL_STATE", outcome.to_dict()
        assert outcome.error.origin == "driver"


def test_bad_payload_is_invalid_argument(client, spawn, dead_bootstrap):
    proc = spawn(client)
    assert proc.call("create_producer", config=offline_config(client, dead_bootstrap)).ok
    outcome = proc.call("send", topic="t", partition=0, value={"hex": "00"}, deadline_ms=5_000)
    assert not outcome.ok and outcome.error.name == "INVALID_ARGUMENT", outcome.to_dict()


# Clients whose driver maps Java's property names and values onto the library's options (the Go
# clients take typed options; KafkaJS validates none and ignores unknown ones), so it is the driver
# that rejects what it cannot map.
DRIVER_MAPPED_OPTIONS = {"franz-go", "sarama", "kafkajs"}

# Clients that give up at once when nothing listens at the bootstrap address (measured: franz-go's
# ProducerID fails with its errProducerIDLoadFail wrapping the refused dial in ~5 ms; Sarama's
# NewClient with ErrOutOfBrokers after Metadata.Retry.Max=3 tries, ~0.75 s; aiokafka's start() tries
# each bootstrap address once and raises KafkaConnectionError) instead of blocking.
FAIL_FAST_WITHOUT_BROKER = {"franz-go", "sarama", "aiokafka"}


def test_bad_config_is_reported_by_the_client(client, spawn):
    """Java rejects the mistyped value (it only warns about unknown keys), kafka-python and aiokafka
    the unknown key (they do not check types), librdkafka both: each client's own validation
    answers. The Go clients take typed options and KafkaJS validates none of its options (it ignores
    unknown ones): their drivers map the Java property names, and reject a key they cannot map,
    naming it (DRIVER_MAPPED_OPTIONS)."""
    proc = spawn(client)
    outcome = proc.call("create_producer", config={"bootstrap.servers": "127.0.0.1:1", "no.such.property": "x",
                                                   "transaction.timeout.ms": "not-a-number"})
    if client in DRIVER_MAPPED_OPTIONS:
        assert not outcome.ok and outcome.error.origin == "driver", outcome.to_dict()
        assert outcome.error.name == "INVALID_ARGUMENT", outcome.to_dict()
        outcome = proc.call("create_producer", config={"bootstrap.servers": "127.0.0.1:1", "no.such.property": "x"})
        assert not outcome.ok and "no.such.property" in outcome.error.message, outcome.to_dict()
        return
    assert not outcome.ok and outcome.error.origin == "client", outcome.to_dict()
    assert outcome.error.name in ("INVALID_ARGUMENT", "CLIENT_ERROR"), outcome.to_dict()


def test_blocked_library_call_is_answered_by_its_deadline(client, spawn, dead_bootstrap):
    """With no reachable broker the first op that needs one blocks in every client (kafka-python's
    constructor bootstraps; init_transactions waits up to max.block.ms in Java and kafka-python); the
    driver still answers by the op's deadline and stays usable. franz-go and Sarama give up at once
    (FAIL_FAST_WITHOUT_BROKER); test_go_drivers.py blocks them another way."""
    proc = spawn(client)
    outcome = proc.call("create_producer", deadline_ms=2_000,
                        config={"bootstrap.servers": dead_bootstrap, "transactional.id": "never-initialised"})
    if outcome.ok:
        outcome = proc.call("init_transactions", deadline_ms=2_000)
    assert not outcome.ok
    if client in FAIL_FAST_WITHOUT_BROKER:
        assert outcome.error.name == "NETWORK_EXCEPTION" and outcome.error.origin == "client", outcome.to_dict()
        assert outcome.elapsed_ms < 2_000, outcome.to_dict()
        assert proc.call("hello").ok and proc.alive
        return
    assert outcome.error.name in ("REQUEST_TIMED_OUT", "DEADLINE_EXCEEDED"), outcome.to_dict()
    assert outcome.error.origin in ("client", "driver")  # not the runner: the driver answered by itself
    assert proc.call("hello").ok and proc.alive


def test_sigkill_mid_call_returns_driver_died(client, spawn, dead_bootstrap, silent_bootstrap):
    # aiokafka's poll fails at once where nothing listens (its start() tries each bootstrap address
    # once); against a listener that never answers it waits, as the other clients do at a dead one
    bootstrap = silent_bootstrap if client == "aiokafka" else dead_bootstrap
    proc = spawn(client)
    assert proc.call("create_consumer", config={**offline_config(client, bootstrap), "group.id": "g"}).ok
    assert proc.call("assign", partitions=[{"topic": "t", "partition": 0, "offset": 0}]).ok
    box = {}
    caller = threading.Thread(target=lambda: box.update(outcome=proc.call(
        "poll", max_records=1, timeout_ms=120_000, deadline_ms=180_000)))
    caller.start()
    time.sleep(0.5)  # let the request reach the driver; a kill before that is reported the same way
    proc.kill()
    caller.join(timeout=30)
    assert not caller.is_alive(), "call() must return once its driver is killed"
    outcome = box["outcome"]
    assert not outcome.ok and outcome.error.name == "DRIVER_DIED", outcome.to_dict()
    assert outcome.error.extra["killed"] is True
    assert not proc.alive
    assert proc.call("hello").error.name == "DRIVER_DIED"  # and it stays dead


# -- the runner's own backstops ---------------------------------------------------------------------
SILENT_DRIVER = r"""
import json, sys, time
line = sys.stdin.readline()
print(json.dumps({"id": json.loads(line)["id"], "ok": True, "data": {"client": "silent"}}), flush=True)
sys.stdin.readline()
time.sleep(600)
"""


def test_driver_that_never_answers_is_killed_with_driver_timeout():
    proc = ClientProcess("silent", command=[sys.executable, "-c", SILENT_DRIVER], grace_ms=200).start()
    try:
        outcome = proc.call("flush", deadline_ms=300)
        assert not outcome.ok and outcome.error.name == "DRIVER_TIMEOUT", outcome.to_dict()
        assert outcome.error.origin == "runner"
        assert not proc.alive
    finally:
        proc.kill()


def test_driver_that_cannot_start_raises_with_its_stderr():
    with pytest.raises(DriverStartError, match="no such module"):
        ClientProcess("broken", command=[sys.executable, "-c", "import sys; sys.exit('no such module')"]).start()


def test_kafkajs_refuses_a_header_order_it_cannot_keep(spawn, dead_bootstrap):
    """KafkaJS takes headers as an object (name -> value or list of values): a list whose repeated
    names are adjacent keeps its order, one whose names interleave cannot, and is refused before
    anything is sent rather than reordered."""
    if not CLIENTS["kafkajs"].availability()[0]:
        pytest.skip(f"kafkajs unavailable: {CLIENTS['kafkajs'].availability()[1]}")
    proc = spawn("kafkajs")
    assert proc.call("create_producer", config={"bootstrap.servers": dead_bootstrap}).ok
    outcome = proc.call("send", topic="t", partition=0, value="v", headers=[["a", "1"], ["b", "2"], ["a", "3"]],
                        deadline_ms=5_000)
    assert not outcome.ok and outcome.error.name == "INVALID_ARGUMENT", outcome.to_dict()
    assert outcome.error.origin == "driver" and '"a"' in outcome.error.message


def test_kafkajs_driver_exits_when_nobody_reads_its_answers(silent_bootstrap):
    """A runner that dies (kill -9) mid-op leaves a driver whose answer meets a closed pipe: the
    driver must exit then. KafkaJS keeps reconnect timers running against a broker, so a driver that
    merely stopped reading kept spinning on a dead cluster long after its run ended."""
    if not CLIENTS["kafkajs"].availability()[0]:
        pytest.skip(f"kafkajs unavailable: {CLIENTS['kafkajs'].availability()[1]}")
    proc = subprocess.Popen(CLIENTS["kafkajs"].command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        proc.stdin.write(encode_request(1, "create_producer", 10_000,
                                        {"config": {"bootstrap.servers": silent_bootstrap}}))
        proc.stdin.flush()
        rid, outcome = decode_reply(proc.stdout.readline(), "create_producer", 0.0)
        assert rid == 1 and outcome.ok, outcome.to_dict()
        # an op that hangs on the silent broker until its deadline; its answer will find no reader
        proc.stdin.write(encode_request(2, "send", 1_500, {"topic": "t", "partition": 0, "value": "v"}))
        proc.stdin.flush()
        proc.stdout.close()
        try:
            proc.wait(timeout=1.5 + 8)
        except subprocess.TimeoutExpired:
            pytest.fail("the KafkaJS driver kept running after its answer met a closed pipe")
        assert proc.returncode != 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        proc.stdin.close()
