"""The controller of an embedded cluster as a process (``process.roles=controller``): the
QuorumController behind a listener that only brokers use (Kafka's CONTROLLER listener).

What it serves, per broker connection (cluster/controller_channel): BrokerRegistration,
BrokerHeartbeat (including controlled shutdown), CreateTopics and DeleteTopics forwarded by a
broker, AlterPartition from partition leaders and AllocateProducerIds; and it pushes the
metadata image to every registered broker each time it changes -- to each after a delay of its
own, up to ``kconform.metadata.propagation.max.ms``: Kafka's brokers replay the metadata log
each at its own pace, so a client that learnt a new leader epoch from one broker may ask a
leader that has not, and is answered UNKNOWN_LEADER_EPOCH (OffsetForLeaderEpoch, Fetch,
ListOffsets); with every broker updated at the same instant no client ever meets that answer.
A clock task fences brokers whose session expired. Everything runs on one trio thread, so the
controller's decisions are serialised as KRaft's single-threaded QuorumController's are.

``kconform.controller.quorum.nodes`` (``1,2,3``) names the nodes whose liveness makes the quorum
in a combined topology (cluster/controller: no majority, no decisions); empty, this process is
the quorum by itself (a dedicated controller).
"""

from __future__ import annotations

import logging
import math
import random
import time
from functools import partial
from pathlib import Path

import trio

from ..cluster.controller import QuorumController
from ..cluster.controller_channel import ChannelClosed, LineChannel
from ..cluster.metadata_image import MetadataImage
from ..config import BrokerConfig
from ..protocol.errors import Errors, KafkaError

log = logging.getLogger("kconform.controller")

QUORUM_NODES = "kconform.controller.quorum.nodes"
PROPAGATION = "kconform.metadata.propagation.max.ms"
TICK_S = 0.1


def _quorum_nodes(config: BrokerConfig) -> frozenset[int]:
    text = config.values.get(QUORUM_NODES, "")
    return frozenset(int(n) for n in text.split(",") if n.strip())


class _Session:
    """One broker connection: what goes out to it, in order."""

    def __init__(self) -> None:
        self.send, self.outbox = trio.open_memory_channel(math.inf)
        self.broker_id: int | None = None


class ControllerServer:
    def __init__(self, config: BrokerConfig, data_dir: Path, host: str = "127.0.0.1", port: int = 0):
        self.config = config
        self.host = host
        self.port = port
        self.controller = QuorumController(config, Path(data_dir), _quorum_nodes(config))
        self.controller.listeners.append(self._publish)
        self.sessions: set[_Session] = set()
        self.propagation_max_s = config.int(PROPAGATION) / 1000.0
        self._random = random.Random()
        self._sent_image: tuple[int, dict] | None = None

    # ------------------------------------------------------------------ publishing
    def _image_message(self, image: MetadataImage) -> dict:
        """The image as it goes to brokers, made once per metadata offset for every session."""
        if self._sent_image is None or self._sent_image[0] != image.offset:
            self._sent_image = (image.offset, {"op": "metadata", "image": image.to_dict()})
        return self._sent_image[1]

    def _publish(self, image: MetadataImage) -> None:
        """A new image for every broker: queued as a mark of its offset; the writer sends the
        newest image when it comes to it, and drops a mark an image already sent covers -- a
        broker that falls behind a burst of changes gets the latest image once, not each one."""
        msg = {"op": "metadata", "offset": image.offset}
        for s in self.sessions:
            if s.broker_id is not None:
                self._enqueue(s, msg)

    def _enqueue(self, session: _Session, msg: dict) -> None:
        """Queue ``msg`` for one broker; an image with the time it may reach that broker (trio's
        clock), drawn per broker from the time it was published, so images published in a
        burst do not add up."""
        not_before = 0.0
        if self.propagation_max_s > 0 and msg.get("op") == "metadata":
            not_before = trio.current_time() + self._random.uniform(0.0, self.propagation_max_s)
        session.send.send_nowait((msg, not_before))

    # ------------------------------------------------------------------ serving
    async def serve(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(partial(trio.serve_tcp, self._serve_connection, self.port, host=self.host))
            self.port = listeners[0].socket.getsockname()[1]
            nursery.start_soon(self._clock)
            task_status.started(self.port)

    async def _clock(self) -> None:
        while True:
            await trio.sleep(TICK_S)
            try:
                self.controller.tick(time.monotonic())
            except Exception:  # noqa: BLE001 - the clock must survive one bad round
                log.exception("controller tick failed")

    async def _serve_connection(self, stream: trio.SocketStream) -> None:
        chan = LineChannel(stream)
        session = _Session()
        self.sessions.add(session)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._writer, chan, session)
                try:
                    while True:
                        msg = await chan.receive()
                        for out in self._handle(msg, session):
                            self._enqueue(session, out)
                except ChannelClosed:
                    pass
                nursery.cancel_scope.cancel()
        finally:
            self.sessions.discard(session)
            await chan.aclose()

    async def _writer(self, chan: LineChannel, session: _Session) -> None:
        """What goes to one broker, in order: an image waits its propagation delay first (and
        what was queued behind it waits with it, so the broker never sees a reply that depends
        on an image before the image)."""
        sent_offset: int | None = None
        try:
            async for msg, not_before in session.outbox:
                if msg.get("op") == "metadata":
                    if sent_offset is not None and msg["offset"] <= sent_offset:
                        continue
                    if not_before > trio.current_time():
                        await trio.sleep_until(not_before)
                    msg = self._image_message(self.controller.image)
                    sent_offset = self.controller.image.offset
                elif not_before > trio.current_time():
                    await trio.sleep_until(not_before)
                await chan.send(msg)
        except ChannelClosed:
            pass

    # ------------------------------------------------------------------ requests
    def _handle(self, msg: dict, session: _Session) -> list[dict]:
        op = msg.get("op")
        now = time.monotonic()
        c = self.controller
        reply: dict = {"id": msg.get("id")}
        try:
            if op == "register":
                ib = (msg["inter_broker_host"], msg["inter_broker_port"]) if msg.get("inter_broker_port") else None
                err, epoch = c.register_broker(msg["broker_id"], msg["incarnation_id"], msg["host"], msg["port"], now, ib)
                reply.update(error=int(err), broker_epoch=epoch)
                if err == Errors.NONE:
                    session.broker_id = msg["broker_id"]
                    return [reply, {"op": "metadata", "offset": c.image.offset}]
            elif op == "heartbeat":
                err, fenced, shut_down = c.heartbeat(msg["broker_id"], msg["broker_epoch"], msg["metadata_offset"],
                                                     msg.get("want_shut_down", False), now)
                reply.update(error=int(err), fenced=fenced, should_shut_down=shut_down)
            elif op == "create_topics":
                reply["results"] = [self._create(t, msg.get("validate_only", False), now) for t in msg["topics"]]
            elif op == "delete_topics":
                reply["results"] = [self._delete(name, now) for name in msg["names"]]
            elif op == "create_partitions":
                reply.update(self._admin(lambda: c.create_partitions(msg["name"], msg["count"], msg.get("assignments"),
                                                                     msg.get("validate_only", False), now) and None))
            elif op == "alter_configs":
                reply.update(self._admin(lambda: {"configs": c.alter_topic_configs(
                    msg["name"], msg.get("ops"), msg.get("replace"), msg.get("validate_only", False), now)}))
            elif op == "alter_broker_defaults":
                reply.update(self._admin(lambda: {"configs": c.alter_broker_defaults(
                    [tuple(o) for o in msg["ops"]], msg.get("validate_only", False), now)}))
            elif op == "alter_partitions":
                results = c.alter_partitions(msg["broker_id"], msg["broker_epoch"],
                                             [(i["topic"], i["partition"], i["leader_epoch"], i["partition_epoch"],
                                               i["isr"]) for i in msg["items"]], now)
                reply.update(error=0, results=[{"error": int(err), "partition": None if reg is None else reg.__dict__}
                                               for err, reg in results])
            elif op == "elect_leaders":
                reply.update(self._elect_leaders(msg["preferred"], msg["topics"], now))
            elif op == "alter_user_scram_credentials":
                results = c.alter_user_scram_credentials(
                    [tuple(d) for d in msg["deletions"]],
                    [(n, m, i, bytes.fromhex(salt), bytes.fromhex(salted)) for n, m, i, salt, salted in msg["upsertions"]],
                    now)
                if results is None:
                    reply.update(error=int(Errors.REQUEST_TIMED_OUT))
                else:
                    reply.update(error=0, results=[[r.user, int(r.error), r.message] for r in results])
            elif op == "alter_acls":
                deleted = c.alter_acls(msg["creations"], msg["deletions"], now)
                if deleted is None:
                    reply.update(error=int(Errors.REQUEST_TIMED_OUT))
                else:
                    reply.update(error=0, deleted=deleted)
            elif op == "allocate_producer_ids":
                err, first, size = c.allocate_producer_ids(msg["broker_id"], msg["broker_epoch"], now)
                reply.update(error=int(err), first=first, size=size)
            else:
                reply.update(error=int(Errors.INVALID_REQUEST), message=f"unknown op {op!r}")
        except (KeyError, TypeError) as exc:
            reply.update(error=int(Errors.INVALID_REQUEST), message=f"malformed {op}: {exc}")
        return [reply]

    def _create(self, t: dict, validate_only: bool, now: float) -> dict:
        out = {"name": t["name"], "error": 0, "message": None}
        try:
            topic = self.controller.create_topic(t["name"], t["num_partitions"], t["replication_factor"],
                                                 t.get("configs") or {}, validate_only, now)
            out.update(topic_id=topic.topic_id.hex(), num_partitions=len(topic.partitions),
                       replication_factor=len(topic.partitions[0].replicas))
        except KafkaError as exc:
            out.update(error=int(exc.error), message=exc.message)
        return out

    @staticmethod
    def _admin(decide) -> dict:
        """The answer to an admin decision of the controller: its result, or Kafka's error."""
        try:
            return {"error": 0, "message": None, **(decide() or {})}
        except KafkaError as exc:
            return {"error": int(exc.error), "message": exc.message}

    def _elect_leaders(self, preferred: bool, topics: list | None, now: float) -> dict:
        try:
            results = self.controller.elect_leaders(preferred, None if topics is None else [tuple(t) for t in topics],
                                                    now)
        except KafkaError as exc:
            return {"error": int(exc.error), "message": exc.message}
        return {"error": 0, "results": [[name, [[i, int(err), m] for i, err, m in parts]] for name, parts in results]}

    def _delete(self, name: str, now: float) -> dict:
        out = {"name": name, "error": 0, "message": None}
        try:
            out["topic_id"] = self.controller.delete_topic(name, now).topic_id.hex()
        except KafkaError as exc:
            out.update(error=int(exc.error), message=exc.message)
        return out

