"""The `raw` actor: hand-made frames on a plain socket, for bad-frame cases.

Why not a client library: no client sends a frame with a wrong size, an unknown API key or an
unsupported version on purpose. What a broker does with one (answer with an error, or close the
connection) is part of the wire contract, and Kafka's answer is the reference.

`request` builds a real request from case data instead (below).

The outcome of `send_frame` is ok with {response_size, correlation_id, error_code, error} when a
response frame came back (error_code: the int16 right after the response header, which is where
ApiVersions puts its error), NETWORK_EXCEPTION when the broker closed the connection (what a
Java client reports as "disconnected before a response was received"), REQUEST_TIMED_OUT when
nothing came within 5 s. With `answer_version: N` the answer is also decoded as version N of the
frame's API, whole (no byte left over): `response`, or `undecodable` saying why not -- Kafka
answers an ApiVersions request of a version it does not know in the v0 layout (KIP-511), and a
client that reads another layout there reads garbage.
"""
from __future__ import annotations

import dataclasses
import hashlib
import secrets
import socket
import struct
import threading
import time
from typing import Any, Callable, Collection

from broker_impl.codec import (API, RESPONSE_HEADER, FrameError, build_batch, error_name, idle_connection_closed,
                               read_frame)

from conformance.clients.errors import kafka_code
from conformance.clients.protocol import ErrorInfo, Outcome
from conformance import security
from conformance.vocabulary import BROKER_WIDE_NAMES
from conformance.refs import parse as parse_ref
from conformance.targets import wire

READ_TIMEOUT_S = 5.0
#: The largest response the raw actor reads; a larger size prefix is taken for a broken answer.
MAX_RESPONSE_BYTES = 64 * 1024 * 1024 - 1


def build_frame(args: dict[str, Any]) -> bytes:
    if "hex" in args:
        return bytes.fromhex(str(args["hex"]).replace(" ", ""))
    client_id = b"kconform-raw"
    header = struct.pack(">hhih", int(args.get("api_key", 18)), int(args.get("api_version", 0)),
                         int(args.get("correlation_id", 1)), len(client_id)) + client_id
    body = bytes.fromhex(str(args.get("body_hex", "")).replace(" ", ""))
    payload = header + body
    return struct.pack(">i", len(payload) + int(args.get("size_delta", 0))) + payload


class _NoAnswer(Exception):
    """A round trip that ended without a whole response: (Kafka-style error name, why)."""

    def __init__(self, name: str, message: str):
        super().__init__(message)
        self.name = name
        self.message = message


def _round_trip(address: tuple[str, int], frame: bytes, timeout_s: float,
                sec: security.Security | None = None, pool: "Connections | None" = None) -> bytes:
    """Send one frame and read one response frame (size prefix included): on a connection of
    ``pool`` when one is given (see Connections), else on a fresh one. ``sec``: the credentials to
    log in with (default: the run's)."""
    sock = None
    try:
        if pool is not None:
            sock = pool.take(address, timeout_s)
        else:
            sock = wire.open_connection(address, timeout_s, sec)   # over SASL: logged in as the clients
        sock.sendall(frame)
        answer = read_frame(sock, MAX_RESPONSE_BYTES)
        if answer is None:
            raise _NoAnswer("NETWORK_EXCEPTION", "the broker closed the connection without answering")
        if pool is not None:
            pool.give_back(address, sock)
            sock = None
        return answer
    except FrameError as exc:
        raise _NoAnswer("NETWORK_EXCEPTION", f"the broker's answer is cut short or not Kafka framing: {exc}") from None
    except socket.timeout:
        raise _NoAnswer("REQUEST_TIMED_OUT", f"no answer within {timeout_s} s") from None
    except OSError as exc:   # refused, reset; over TLS a failed handshake too
        raise _NoAnswer("NETWORK_EXCEPTION", f"connection error: {exc}") from None
    except wire.WireError as exc:
        raise _NoAnswer("SASL_AUTHENTICATION_FAILED", f"the raw actor could not authenticate: {exc}") from None
    finally:
        if sock is not None:   # fresh, or a pooled one whose exchange failed: its state is unknown
            sock.close()


#: APIs whose meaning depends on where they fall on a connection (Kafka's SASL state machine wants
#: the handshake first; ApiVersions names the client software of the connection): always sent on
#: a fresh connection.
CONNECTION_APIS = frozenset({"ApiVersions", "SaslHandshake", "SaslAuthenticate"})


class Connections:
    """Connections the raw actor's `request` steps of one case run keep between requests.

    Why: a regression case bumps a producer epoch 32,766 times; a connection per request made
    every bump a TCP handshake and a connection the broker set up and tore down, most of the
    case's CPU on both sides. Kafka answers the requests of one connection one at a time and in
    order, whatever the connection served before, so a request means the same on a kept one.
    A connection is kept only after a whole answer came back on it; one that timed out, failed,
    or was closed by the broker (a restart, a proxy rule) while idle is dropped, and the next
    request opens a new one. Several steps at once (background steps) each take their own.
    Over SASL nothing is kept: a session ends with its lifetime and a changed password must
    refuse the next login, which only a fresh connection shows."""

    def __init__(self) -> None:
        self._idle: dict[tuple[str, int], list[socket.socket]] = {}
        self._lock = threading.Lock()
        self._closed = False

    @staticmethod
    def usable(api_name: str, sec: security.Security | None) -> bool:
        """Whether a request of ``api_name`` may go on a kept connection under ``sec``."""
        return api_name not in CONNECTION_APIS and not (sec or security.current()).sasl

    def take(self, address: tuple[str, int], timeout_s: float) -> socket.socket:
        while True:
            with self._lock:
                idle = self._idle.get(address)
                sock = idle.pop() if idle else None
            if sock is None:
                return wire.open_connection(address, timeout_s)
            if not idle_connection_closed(sock.fileno()):
                sock.settimeout(timeout_s)
                return sock
            sock.close()

    def give_back(self, address: tuple[str, int], sock: socket.socket) -> None:
        with self._lock:
            if not self._closed:   # a background step that outlived its case closes its own
                self._idle.setdefault(address, []).append(sock)
                return
        sock.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            socks = [s for idle in self._idle.values() for s in idle]
            self._idle.clear()
        for sock in socks:
            sock.close()


def _failure(op: str, name: str, message: str, t0: float) -> Outcome:
    """A raw op that brought no usable answer, under Kafka's name (and code) for what happened."""
    return Outcome(op=op, ok=False, elapsed_ms=(time.monotonic() - t0) * 1000,
                   error=ErrorInfo(name=name, code=kafka_code(name), message=message, origin="runner",
                                   client_class="socket"))


def send_frame(address: tuple[str, int], args: dict[str, Any]) -> Outcome:
    t0 = time.monotonic()
    frame = build_frame(args)
    try:
        answer = _round_trip(address, frame, READ_TIMEOUT_S)
    except _NoAnswer as exc:
        return _failure("send_frame", exc.name, exc.message, t0)
    (corr,) = struct.unpack_from(">i", answer, 4)
    data: dict[str, Any] = {"response_size": len(answer) - 4, "correlation_id": corr}
    if len(answer) >= 10:
        (code,) = struct.unpack_from(">h", answer, 8)
        data["error_code"] = code
        data["error"] = error_name(code)
    if args.get("answer_version") is not None:
        data.update(_decode_answer(int(args.get("api_key", 18)), int(args["answer_version"]), answer))
    return Outcome(op="send_frame", ok=True, data=data, elapsed_ms=(time.monotonic() - t0) * 1000)


def _decode_answer(api_key: int, version: int, answer: bytes) -> dict[str, Any]:
    """{response: the decoded body} or {undecodable: why}, for version `version` of the API."""
    api = next((a for a in API.values() if a.key == api_key), None)
    if api is None:
        return {"undecodable": f"API key {api_key} is not in the codec"}
    try:
        _, pos = RESPONSE_HEADER.decode(api.response_header_version(version), answer, 4)
        obj, end = api.response.decode(version, answer, pos)
    except Exception as exc:  # noqa: BLE001 - an undecodable answer is the outcome
        return {"undecodable": f"not a {api.name} v{version} response: {exc}"}
    if end != len(answer):
        return {"undecodable": f"a {api.name} v{version} response with {len(answer) - end} byte(s) left over"}
    return {"response": obj.to_dict()}


# ----------------------------------------------------------------------------- structured requests
# `request`: one Kafka request built from case data with the project's codec, and its response
# decoded. Why: scenarios such as EndTxn in the wrong state (S15), a Produce to a partition never
# added to the transaction (S18, S19, S21) or OffsetFetch with RequireStable (S25) need requests
# no client library sends on purpose; the case writes them as Kafka's message fields (snake_case),
# references earlier responses as "${step_id.field}", and builds record batches with
# `{batch: {...}}` (see cases/README.md).

#: Body keys whose string values are case names (made unique per run by the namespace); the ACL
#: APIs' resource names too (CreateAcls, DescribeAcls, DeleteAcls), but for NAME_KEPT, and a
#: DescribeTopicPartitions cursor's topic.
NAME_KEYS = frozenset({"transactional_id", "v3_and_below_transactional_id", "group_id", "topic",
                       "resource_name", "resource_name_filter", "topic_name"})
#: Names that are Kafka's, never a case's: the wildcard resource and the cluster resource.
NAME_KEPT = BROKER_WIDE_NAMES
#: Body keys whose values are lists of case names (DescribeTransactions.TransactionalIds,
#: DescribeGroups.Groups, DeleteGroups.GroupsNames, ...).
NAME_LISTS = frozenset({"transactional_ids", "groups", "groups_names", "group_ids"})
#: `name` is a topic name inside these lists.
TOPIC_LISTS = frozenset({"topics", "topic_data", "v3_and_below_topics"})
BATCH_KEYS = frozenset({"producer_id", "producer_epoch", "base_sequence", "transactional", "values", "keys",
                        "timestamp"})
#: Errors a raw `request` retries by default: "not ready yet" answers (a fresh topic, a coordinator
#: still loading __transaction_state), which a client retries too.
RAW_RETRY = ("COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR",
             "NOT_LEADER_OR_FOLLOWER", "LEADER_NOT_AVAILABLE", "UNKNOWN_TOPIC_OR_PARTITION")
RAW_RETRY_BACKOFF_S = 0.1


class RequestError(ValueError):
    """The case's request cannot be built (unknown field, bad reference, bad batch)."""


def namespace_body(value: Any, name: Callable[[str], str], parent: str | None = None) -> Any:
    """Case names in a request body (transactional_id, group_id, topic names) made unique."""
    if isinstance(value, list):
        return [namespace_body(v, name, parent) for v in value]
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            named = k in NAME_KEYS or (k == "name" and parent in TOPIC_LISTS)
            if isinstance(v, str) and v and v not in NAME_KEPT and named:
                out[k] = name(v)
            elif k in NAME_LISTS and isinstance(v, list) and all(isinstance(x, str) for x in v):
                out[k] = [name(x) if x else x for x in v]
            elif k == "batch":
                out[k] = v
            else:
                out[k] = namespace_body(v, name, k)
        return out
    return value


def _batch(spec: Any, placeholders: bool = False) -> bytes:
    if not isinstance(spec, dict) or set(spec) - BATCH_KEYS or "values" not in spec:
        raise RequestError(f"batch: a mapping with values and some of {sorted(BATCH_KEYS)}, got {spec!r}")
    if placeholders:
        spec = {k: (0 if parse_ref(v) else v) for k, v in spec.items()}
    values = [None if v is None else str(v).encode() for v in spec["values"]]
    keys = spec.get("keys") or [None] * len(values)
    keys = [None if k is None else str(k).encode() for k in keys]
    if len(keys) != len(values):
        raise RequestError("batch: as many keys as values")
    timestamp = int(spec["timestamp"]) if "timestamp" in spec else int(time.time() * 1000)
    return build_batch(list(zip(keys, values)), base_timestamp=timestamp,
                       producer_id=int(spec.get("producer_id", -1)),
                       producer_epoch=int(spec.get("producer_epoch", -1)),
                       base_sequence=int(spec.get("base_sequence", 0 if "producer_id" in spec else -1)),
                       is_transactional=bool(spec.get("transactional", False)))


#: What stands for a reference while a body is only being checked (load time): a value of the
#: field's own type, so a reference in a string field builds as a string.
_PLACEHOLDERS = {"string": "", "bool": False, "bytes": b"", "records": b"", "uuid": bytes(16), "float64": 0.0}


def _placeholder(elem_type: str) -> Any:
    return _PLACEHOLDERS.get(elem_type, 0)


def build_struct(codec, struct_spec, values: dict, path: str = "body", placeholders: bool = False):
    """An instance of the codec class for `struct_spec` with `values` (Kafka's defaults elsewhere).
    With ``placeholders``, every "${...}" reference stands for a value of its field's type (the
    loader checks a body before any step ran)."""
    if not isinstance(values, dict):
        raise RequestError(f"{path}: a mapping of {struct_spec.name} fields, got {values!r}")
    by_attr = {f.attr: f for f in struct_spec.fields}
    unknown = sorted(set(values) - set(by_attr))
    if unknown:
        raise RequestError(f"{path}: unknown field(s) {unknown} of {struct_spec.name}; known: {sorted(by_attr)}")
    kwargs = {}
    for k, v in values.items():
        f = by_attr[k]
        if v is None:  # null: the codec writes it (a field that is not nullable makes a malformed request)
            kwargs[k] = None
        elif placeholders and parse_ref(v):
            if f.struct is not None and not f.is_array:
                continue  # a whole struct from a reference: Kafka's default stands for it
            kwargs[k] = [] if f.is_array else _placeholder(f.elem_type)
        elif f.struct is not None:
            if f.is_array:
                if not isinstance(v, list):
                    raise RequestError(f"{path}.{k}: a list, got {v!r}")
                kwargs[k] = [build_struct(codec, f.struct, x, f"{path}.{k}[{i}]", placeholders)
                             for i, x in enumerate(v)]
            else:
                kwargs[k] = build_struct(codec, f.struct, v, f"{path}.{k}", placeholders)
        elif f.elem_type in ("records", "bytes") and isinstance(v, dict) and set(v) == {"batch"}:
            kwargs[k] = _batch(v["batch"], placeholders)
        elif f.elem_type in ("records", "bytes", "uuid") and isinstance(v, str):
            kwargs[k] = bytes.fromhex(v)
        elif placeholders and f.is_array and isinstance(v, list):
            kwargs[k] = [_placeholder(f.elem_type) if parse_ref(x) else x for x in v]
        else:
            kwargs[k] = v
    return codec.classes[struct_spec.name](**kwargs)


def build_request(api_name: str, version: int, body: dict, correlation_id: int = 1,
                  placeholders: bool = False) -> bytes:
    """The whole request frame (size prefix, header v1/v2, body); ``placeholders``: see
    :func:`build_struct`."""
    api = API.get(api_name)
    if api is None:
        raise RequestError(f"unknown API {api_name!r}")
    if not api.min_version <= version <= api.max_version:
        raise RequestError(f"{api_name} has versions {api.min_version}-{api.max_version}, not {version}")
    obj = build_struct(api.request, api.request.spec.root, body, placeholders=placeholders)
    return api.request_frame(version, correlation_id, "kconform-raw", obj)


def _errors(tree: Any) -> list[str]:
    """Names of every non-zero error code in a decoded response, depth first. Kafka's schemas
    call them ErrorCode, and PartitionErrorCode / TopicErrorCode in older versions of some
    responses (AddPartitionsToTxn v0-3): all of them count."""
    out: list[str] = []
    if isinstance(tree, dict):
        for k, v in tree.items():
            if (k == "error_code" or k.endswith("_error_code")) and isinstance(v, int) and v != 0:
                out.append(error_name(v))
            else:
                out += _errors(v)
    elif isinstance(tree, list):
        for v in tree:
            out += _errors(v)
    return out


def send_request(address: tuple[str, int], api_name: str, version: int, body: dict,
                 timeout_s: float = READ_TIMEOUT_S, *, retry: Collection[str] = (),
                 edit_frame: Callable[[bytes], bytes] | None = None, attempt_s: float | None = None,
                 sec: security.Security | None = None, pool: Connections | None = None) -> Outcome:
    """Send one request, decode its response. ok with data: the response's top-level scalar
    fields, `error` (the first non-zero error_code anywhere in it, NONE when there is none),
    `errors` (all of them), `response` (the whole decoded response) and `request` ({api,
    version}: what the response answers, so that it can be read and compared without the step).

    `retry`: error names answered again, like a client would, until `timeout_s` is up;
    `attempt_s`: how long one attempt waits for its answer (default: the time left);
    `edit_frame`: changes the built frame before it is sent (e.g. an unknown tagged field);
    `sec`: the credentials to log in with (default: the run's); `pool`: kept connections to send
    on where the API and the security allow (Connections), else a fresh connection."""
    t0 = time.monotonic()
    op = "request"
    if pool is not None and not Connections.usable(api_name, sec):
        pool = None
    try:
        frame = build_request(api_name, version, body)
    except (RequestError, TypeError, ValueError, OverflowError, struct.error) as exc:
        return _failure(op, "DRIVER_ERROR", f"cannot build {api_name} v{version}: {exc}", t0)
    if edit_frame is not None:
        frame = edit_frame(frame)
    end = t0 + timeout_s
    while True:
        left = max(0.5, end - time.monotonic())
        out = _exchange(address, api_name, version, frame, min(left, attempt_s or left), t0, sec, pool)
        if not (out.ok and out.data["error"] in retry) or time.monotonic() + RAW_RETRY_BACKOFF_S > end:
            return out
        time.sleep(RAW_RETRY_BACKOFF_S)


def _exchange(address: tuple[str, int], api_name: str, version: int, frame: bytes, timeout_s: float,
              t0: float, sec: security.Security | None = None, pool: Connections | None = None) -> Outcome:
    op = "request"
    api = API[api_name]
    try:
        resp = _round_trip(address, frame, timeout_s, sec, pool)
    except _NoAnswer as exc:
        return _failure(op, exc.name, exc.message, t0)
    try:
        _, pos = RESPONSE_HEADER.decode(api.response_header_version(version), resp, 4)
        obj, _ = api.response.decode(version, resp, pos)
    except Exception as exc:  # noqa: BLE001 - an undecodable answer is the outcome
        return _failure(op, "CORRUPT_MESSAGE", f"cannot decode {api_name} v{version} response: {exc}", t0)
    tree = obj.to_dict()
    errors = _errors(tree)
    data: dict[str, Any] = {k: v for k, v in tree.items() if not isinstance(v, (dict, list))}
    data.update(error=errors[0] if errors else "NONE", errors=errors, response=tree,
                request={"api": api_name, "version": version})
    return Outcome(op=op, ok=True, data=data, elapsed_ms=(time.monotonic() - t0) * 1000)


def change_scram_password(address: tuple[str, int], sec: security.Security, new_password: str,
                          timeout_s: float = READ_TIMEOUT_S) -> Outcome:
    """AlterUserScramCredentials v0 for the run's user and mechanism, logged in with ``sec``:
    ``new_password`` salted as Kafka's Admin client does (a random salt, 4096 iterations, the
    mechanism's PBKDF2). The password and the salted password stay in this process: the step's
    data is the response."""
    hash_name = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[sec.mechanism]
    salt = secrets.token_bytes(16)
    body = {"deletions": [], "upsertions": [{
        "name": sec.username, "mechanism": 1 if hash_name == "sha256" else 2, "iterations": 4096,
        "salt": salt.hex(), "salted_password": hashlib.pbkdf2_hmac(hash_name, new_password.encode(), salt, 4096).hex()}]}
    return dataclasses.replace(send_request(address, "AlterUserScramCredentials", 0, body, timeout_s, sec=sec),
                               op="change_run_password")
