"""Blocking one-shot Kafka requests to one node, built with kafka-python's protocol classes.

Why this module exists: a target must answer questions that no high-level client API answers,
above all FindCoordinator(key_type=TRANSACTION) -- "which node is the TransactionCoordinator of
this transactional.id?". It must also ask *one particular node* (a killed or paused node must
not be asked, and a restarted node must be asked whether it already sees the cluster), which
librdkafka's AdminClient does not let us choose.

So: open a TCP connection to exactly the address given, negotiate versions with ApiVersions,
send one request, read one response, close. No threads, no metadata cache, no retries (callers
retry with their own deadline, because "not yet" is an expected answer while a cluster
converges). The project's own message codec is deliberately not used for the requests and
responses: a second, independent encoder makes a bug in either visible. Only the framing (a size
prefix, then the frame) is the project's (``broker_impl.codec.read_frame``), as it is everyone's.
"""
from __future__ import annotations

import itertools
import socket
from dataclasses import dataclass, field

from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.metadata.find_coordinator import (
    CoordinatorType,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from kafka.protocol.consumer.offsets import ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from kafka.net.sasl.scram import ScramClient

from .. import security

from broker_impl.codec import FrameBuffer, FrameError, read_frame

CLIENT_ID = "kconform-target"
#: Kafka's UNSUPPORTED_VERSION error code (ApiVersions answers it in v0 layout).
UNSUPPORTED_VERSION = 35

_correlation_ids = itertools.count(1)

GROUP = int(CoordinatorType.GROUP)
TRANSACTION = int(CoordinatorType.TRANSACTION)


class WireError(Exception):
    """A request could not be completed (connection refused or reset, timeout, short read)."""


class AuthenticationFailed(WireError):
    """The node answered, refusing the run's credentials (SASL_AUTHENTICATION_FAILED): it is up."""


@dataclass(frozen=True)
class ApiVersions:
    """What one node said in ApiVersions: api key -> (min, max), and its finalized features."""

    api_versions: dict[int, tuple[int, int]]
    finalized_features: dict[str, int] = field(default_factory=dict)

    def max_version(self, api_key: int, client_max: int) -> int | None:
        """Highest version both sides speak, or None when the node lacks the API."""
        rng = self.api_versions.get(api_key)
        if rng is None:
            return None
        low, high = rng
        chosen = min(high, client_max)
        return chosen if chosen >= low else None


@dataclass(frozen=True)
class Coordinator:
    """One FindCoordinator answer. error_code 0 means node_id/host/port are meaningful."""

    key: str
    node_id: int
    host: str
    port: int
    error_code: int
    error_message: str | None


@dataclass(frozen=True)
class PartitionMetadata:
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    error_code: int


@dataclass(frozen=True)
class TopicMetadata:
    name: str
    error_code: int
    partitions: tuple[PartitionMetadata, ...]


@dataclass(frozen=True)
class ClusterMetadata:
    """Metadata as one node sees it: live (unfenced) brokers, controller and the asked topics."""

    brokers: dict[int, tuple[str, int]]
    controller_id: int
    topics: dict[str, TopicMetadata]


def _encode(request, version: int) -> bytes:
    request.with_header(correlation_id=next(_correlation_ids), client_id=CLIENT_ID)
    return request.encode(version=version, header=True, framed=True)


def _exchange(sock: socket.socket, address: tuple[str, int], request, response_cls, version: int):
    sock.sendall(_encode(request, version))
    frame = read_frame(sock)
    if frame is None:
        raise WireError(f"{address[0]}:{address[1]}: connection closed by the node before the response was complete")
    return response_cls.decode(frame[4:], version=version, header=True)


def sasl_conversation(address: tuple[str, int], sec: security.Security):
    """SaslHandshake v1 then SaslAuthenticate v2 with SCRAM (RFC 5802, kafka-python's ScramClient)
    or PLAIN, as a client does on a SASL listener before any other request (docs/security.md) --
    without I/O: a generator that yields ``(request, response_cls, version)`` and is sent each
    decoded response, so a blocking socket (:func:`authenticate`) and a trio stream (the fuzzer)
    hold the same conversation. Raises AuthenticationFailed for refused credentials."""
    where = f"{address[0]}:{address[1]}"
    hs = yield SaslHandshakeRequest(mechanism=sec.mechanism), SaslHandshakeResponse, 1
    if hs.error_code:
        raise WireError(f"{where}: SaslHandshake {sec.mechanism} failed with error code "
                        f"{hs.error_code} (the node offers {hs.mechanisms})")

    def refused(resp) -> AuthenticationFailed:
        return AuthenticationFailed(f"{where}: SaslAuthenticate failed with error code "
                                    f"{resp.error_code}: {resp.error_message}")

    if sec.mechanism == "PLAIN":   # RFC 4616: authzid NUL authcid NUL password, one round
        resp = yield (SaslAuthenticateRequest(auth_bytes=b"\0" + sec.username.encode() + b"\0"
                                              + sec.password.encode()), SaslAuthenticateResponse, 2)
        if resp.error_code:
            raise refused(resp)
        return
    scram = ScramClient(sec.username, sec.password, sec.mechanism)
    resp = yield SaslAuthenticateRequest(auth_bytes=scram.first_message()), SaslAuthenticateResponse, 2
    if resp.error_code:
        raise refused(resp)
    scram.process_server_first_message(resp.auth_bytes)
    resp = yield SaslAuthenticateRequest(auth_bytes=scram.final_message()), SaslAuthenticateResponse, 2
    if resp.error_code:
        raise refused(resp)
    try:
        scram.process_server_final_message(resp.auth_bytes)
    except ValueError as exc:
        raise WireError(f"{where}: SCRAM: {exc}") from exc


def authenticate(sock: socket.socket, address: tuple[str, int], sec: security.Security) -> None:
    """:func:`sasl_conversation` on a blocking socket."""
    conversation = sasl_conversation(address, sec)
    step = next(conversation)
    while True:
        try:
            step = conversation.send(_exchange(sock, address, *step))
        except StopIteration:
            return


async def authenticate_stream(stream, address: tuple[str, int], sec: security.Security) -> None:
    """:func:`sasl_conversation` on a trio stream (TLS already wrapped, if any)."""
    conversation = sasl_conversation(address, sec)
    step = next(conversation)
    buf = FrameBuffer(1 << 20)
    while True:
        request, response_cls, version = step
        await stream.send_all(_encode(request, version))
        while (frame := buf.next_frame()) is None:
            data = await stream.receive_some(1 << 16)
            if not data:
                raise WireError(f"{address[0]}:{address[1]}: connection closed during SASL authentication")
            buf.feed(data)
        try:
            step = conversation.send(response_cls.decode(frame[4:], version=version, header=True))
        except StopIteration:
            return


def open_connection(address: tuple[str, int], timeout: float, sec: security.Security | None = None) -> socket.socket:
    """A blocking connection to a broker as the run speaks (``sec``, default the run's): TLS where
    it does, SASL authenticated where it does. OSError when it cannot connect, WireError
    (AuthenticationFailed) when the login is refused; the socket is closed on any failure."""
    sec = sec or security.current()
    sock = sec.wrap(socket.create_connection(address, timeout=timeout), address[0])
    try:
        sock.settimeout(timeout)
        if sec.sasl:
            authenticate(sock, address, sec)
    except BaseException:
        sock.close()
        raise
    return sock


def _round_trip(address: tuple[str, int], request, response_cls, version: int, timeout: float):
    """Send one framed request at `version` and decode its response (header included); on a run
    over SASL (security.current()) the connection authenticates first."""
    try:
        with open_connection(address, timeout) as sock:
            return _exchange(sock, address, request, response_cls, version)
    except (OSError, FrameError) as exc:  # refused, reset, timed out, cut short
        raise WireError(f"{address[0]}:{address[1]}: {exc}") from exc


def api_versions(address: tuple[str, int], timeout: float = 5.0) -> ApiVersions:
    """ApiVersions v0 (every Kafka-compatible node speaks it), then v3 for finalized features."""
    resp = _round_trip(address, ApiVersionsRequest(), ApiVersionsResponse, 0, timeout)
    if resp.error_code:
        raise WireError(f"ApiVersions v0 failed with error code {resp.error_code}")
    table = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    features: dict[str, int] = {}
    av_max = table.get(ApiVersionsRequest.API_KEY, (0, 0))[1]
    if av_max >= 3:
        req = ApiVersionsRequest(client_software_name="kconform", client_software_version="0")
        v3 = _round_trip(address, req, ApiVersionsResponse, 3, timeout)
        if v3.error_code == 0:
            features = {f.name: f.max_version_level for f in (v3.finalized_features or [])}
    return ApiVersions(table, features)


def find_coordinator(
    address: tuple[str, int], key: str, key_type: int, timeout: float = 5.0
) -> Coordinator:
    """FindCoordinator for one key, at the highest version the node and kafka-python share.

    v4+ carries keys in a batch (KIP-699); older versions carry one key at top level. Either
    way the answer is returned as a single Coordinator.
    """
    versions = api_versions(address, timeout)
    version = versions.max_version(FindCoordinatorRequest.API_KEY, FindCoordinatorRequest.max_version)
    if version is None:
        raise WireError("the node does not offer FindCoordinator")
    if key_type != GROUP and version < 1:
        raise WireError("the node offers only FindCoordinator v0, which has no key_type")
    if version >= 4:
        req = FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key])
    else:
        req = FindCoordinatorRequest(key=key, key_type=key_type)
    resp = _round_trip(address, req, FindCoordinatorResponse, version, timeout)
    if version >= 4:
        c = next((c for c in resp.coordinators if c.key == key), None)
        if c is None:
            raise WireError(f"FindCoordinator v{version} response lacks key {key!r}")
        return Coordinator(key, c.node_id, c.host, c.port, c.error_code, c.error_message)
    message = resp.error_message if version >= 1 else None
    return Coordinator(key, resp.node_id, resp.host, resp.port, resp.error_code, message)


def metadata(
    address: tuple[str, int], topics: list[str] | None = None, timeout: float = 5.0
) -> ClusterMetadata:
    """Metadata as this one node sees it; topics=None asks for all topics, [] for none.

    Never auto-creates a topic: asking must not change the cluster.
    """
    versions = api_versions(address, timeout)
    # The highest version both sides speak (Kafka 4 dropped v0; Tansu stops at v12).
    version = versions.max_version(MetadataRequest.API_KEY, MetadataRequest.max_version)
    if version is None:
        raise WireError("the node does not offer Metadata")
    if topics is None:
        topic_list = None
    else:
        topic_list = [MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
    req = MetadataRequest(topics=topic_list, allow_auto_topic_creation=False)
    resp = _round_trip(address, req, MetadataResponse, version, timeout)
    brokers = {b.node_id: (b.host, b.port) for b in resp.brokers}
    out_topics = {}
    for t in resp.topics:
        parts = tuple(
            PartitionMetadata(
                p.partition_index,
                p.leader_id,
                tuple(p.replica_nodes or ()),
                tuple(p.isr_nodes or ()),
                p.error_code,
            )
            for p in (t.partitions or ())
        )
        out_topics[t.name] = TopicMetadata(t.name, t.error_code, parts)
    controller = resp.controller_id if version >= 1 else -1
    return ClusterMetadata(brokers, controller, out_topics)


#: ListOffsets' timestamp for "the end": the high watermark (read_uncommitted) or the last stable
#: offset (read_committed, isolation level 1).
LATEST = -1
EARLIEST = -2


def list_offsets(
    address: tuple[str, int], partitions: list[tuple[str, int]], read_committed: bool, timeout: float = 5.0,
    timestamp: int = LATEST,
) -> dict[tuple[str, int], tuple[int, int]]:
    """ListOffsets (``timestamp``: LATEST, or EARLIEST: the log start) of partitions this node
    leads: (topic, partition) -> (offset, error code), at the highest version both sides speak
    (read_committed needs v2+)."""
    versions = api_versions(address, timeout)
    version = versions.max_version(ListOffsetsRequest.API_KEY, ListOffsetsRequest.max_version)
    if version is None or (read_committed and version < 2):
        raise WireError("the node does not offer ListOffsets with an isolation level")
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    T = ListOffsetsRequest.ListOffsetsTopic
    req = ListOffsetsRequest(
        replica_id=-1, isolation_level=1 if read_committed else 0,
        topics=[T(name=t, partitions=[T.ListOffsetsPartition(partition_index=p, timestamp=timestamp,
                                                             current_leader_epoch=-1, max_num_offsets=1)
                                      for p in ps])
                for t, ps in by_topic.items()])
    resp = _round_trip(address, req, ListOffsetsResponse, version, timeout)
    out = {}
    for t in resp.topics:
        for p in t.partitions:
            offset = p.offset if version >= 1 else (p.old_style_offsets or [-1])[0]
            out[(t.name, p.partition_index)] = (offset, p.error_code)
    return out
