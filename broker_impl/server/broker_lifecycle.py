"""A broker's side of the controller channel (Kafka's BrokerLifecycleManager, plus the metadata
listener and the forwarding of controller requests).

- At start it registers (node id, a new incarnation id, its advertised listener) and heartbeats
  every ``broker.heartbeat.interval.ms``, naming the metadata offset it applied; the controller
  unfences it once that offset covers its registration. The broker reports itself started
  (``ready``) once it is unfenced, as a KRaft broker opens to clients only then.
- Every metadata image the controller pushes goes to the replica manager, which turns it into
  leader/follower changes (``ReplicaManager.apply_image``); while fenced, a new image triggers
  a heartbeat at once, so the broker is unfenced as soon as it caught up.
- ``request`` carries what a broker asks the controller (CreateTopics / DeleteTopics forwarded,
  AlterPartition, AllocateProducerIds); ControllerUnavailable when the channel is down.
- The channel is re-opened after any failure (the controller restarted): the same incarnation
  registers again and keeps its broker epoch, as a reconnect is not a restart.
- ``controlled_shutdown`` (SIGTERM): a heartbeat asking to shut down, after which the controller
  has moved every leadership away; the broker then closes.
"""

from __future__ import annotations

import itertools
import logging
import uuid

import trio

from ..cluster.controller_channel import ChannelClosed, LineChannel, parse_voters
from ..cluster.metadata_image import MetadataImage
from ..protocol.errors import Errors

log = logging.getLogger("kconform.broker.lifecycle")

RECONNECT_BACKOFF_S = 0.2
REQUEST_TIMEOUT_S = 30.0
#: Kafka's BrokerLifecycleManager, in PENDING_CONTROLLED_SHUTDOWN, sends its next heartbeat this
#: soon after the first answer that did not let it stop yet (the controller moved the leaderships
#: and waits for every other active broker to report that change), then one every
#: ``broker.heartbeat.interval.ms``: how long a stopping node still answers.
CONTROLLED_SHUTDOWN_RECHECK_S = 0.05


class ControllerUnavailable(Exception):
    """The controller cannot be asked right now (channel down, or no answer in time)."""


class BrokerLifecycleManager:
    def __init__(self, broker):
        self.broker = broker
        voters = parse_voters(broker.config.str("controller.quorum.voters"))
        if not voters:
            raise ValueError("a broker of a cluster needs controller.quorum.voters")
        _, self.host, self.port = voters[0]
        self.incarnation_id = uuid.uuid4().hex
        self.broker_epoch = -1
        self.fenced = True
        self.applied_offset = -1
        self.heartbeat_interval_s = broker.config.int("broker.heartbeat.interval.ms") / 1000.0
        self.ready = trio.Event()
        self._chan: LineChannel | None = None
        self._ids = itertools.count(1)
        self._waiting: dict[int, list] = {}     # request id -> [event, reply]
        self._beat_now = trio.Event()
        self._shutting_down = False

    # ------------------------------------------------------------------ requests
    async def request(self, op: str, timeout_s: float = REQUEST_TIMEOUT_S, **fields) -> dict:
        chan = self._chan
        if chan is None:
            raise ControllerUnavailable("not connected to the controller")
        rid = next(self._ids)
        slot = [trio.Event(), None]
        self._waiting[rid] = slot
        try:
            try:
                await chan.send({"op": op, "id": rid, **fields})
            except ChannelClosed as exc:
                raise ControllerUnavailable(str(exc)) from None
            with trio.move_on_after(timeout_s):
                await slot[0].wait()
            if slot[1] is None:
                raise ControllerUnavailable(f"no answer to {op} within {timeout_s:.0f} s")
            return slot[1]
        finally:
            self._waiting.pop(rid, None)

    async def forward(self, op: str, **fields) -> dict:
        """A client request a broker of a cluster forwards to the controller (the admin APIs that
        change metadata): the controller's reply, or ``{"error": REQUEST_TIMED_OUT}`` when it
        cannot be reached -- Kafka's ForwardingManager answers a forwarding that timed out with
        the request's error response, no message."""
        try:
            return await self.request(op, **fields)
        except ControllerUnavailable:
            return {"error": int(Errors.REQUEST_TIMED_OUT)}

    def _fail_waiting(self) -> None:
        for slot in self._waiting.values():
            slot[0].set()      # reply None: ControllerUnavailable
        self._waiting.clear()

    # ------------------------------------------------------------------ the channel
    async def run(self) -> None:
        """Keep a session with the controller for as long as the broker runs."""
        while True:
            try:
                stream = await trio.open_tcp_stream(self.host, self.port)
            except OSError as exc:
                log.debug("controller %s:%d not reachable: %s", self.host, self.port, exc)
                await trio.sleep(RECONNECT_BACKOFF_S)
                continue
            chan = LineChannel(stream)
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._read, chan, nursery.cancel_scope)
                    self._chan = chan
                    await self._register()
                    await self._heartbeats()
            except ChannelClosed as exc:
                log.warning("controller channel closed: %s", exc)
            finally:
                self._chan = None
                self._fail_waiting()
                await chan.aclose()
            await trio.sleep(RECONNECT_BACKOFF_S)

    async def _read(self, chan: LineChannel, scope: trio.CancelScope) -> None:
        try:
            while True:
                msg = await chan.receive()
                if msg.get("op") == "metadata":
                    image = MetadataImage.from_dict(msg["image"])
                    if image.offset > self.applied_offset:
                        self.broker.replica_manager.apply_image(image)
                        self.broker.scram_credentials.load_changes(image.scram)
                        if self.broker.authorizer is not None:
                            self.broker.authorizer.load(image.acls)
                        self.applied_offset = image.offset
                    if 0 <= self.broker_epoch <= self.applied_offset:
                        # caught up with the metadata up to its registration: Kafka's broker opens
                        # request processing here (SocketServer.enableRequestProcessing)
                        self.broker.requests_enabled.set()
                    if self.fenced:
                        self._beat_now.set()
                    continue
                slot = self._waiting.get(msg.get("id"))
                if slot is not None:
                    slot[1] = msg
                    slot[0].set()
        except ChannelClosed as exc:
            log.warning("controller channel closed: %s", exc)
            scope.cancel()

    async def _register(self) -> None:
        host, port = self.broker.advertised_address
        ib_host, ib_port = self.broker.inter_broker_address
        if (ib_host, ib_port) == (host, port):
            ib_host, ib_port = "", 0
        while True:
            try:
                r = await self.request("register", broker_id=self.broker.node_id, incarnation_id=self.incarnation_id,
                                       host=host, port=port, inter_broker_host=ib_host, inter_broker_port=ib_port)
            except ControllerUnavailable as exc:
                raise ChannelClosed(str(exc)) from None
            if r["error"] == Errors.NONE:
                if self.broker_epoch != r["broker_epoch"]:
                    log.info("registered with the controller: broker epoch %d", r["broker_epoch"])
                self.broker_epoch = r["broker_epoch"]
                return
            log.info("registration refused: %s; retrying", Errors(r["error"]).name)
            await trio.sleep(RECONNECT_BACKOFF_S)

    async def _heartbeats(self) -> None:
        while True:
            try:
                r = await self.request("heartbeat", broker_id=self.broker.node_id, broker_epoch=self.broker_epoch,
                                       metadata_offset=self.applied_offset, want_shut_down=False)
            except ControllerUnavailable as exc:
                raise ChannelClosed(str(exc)) from None
            err = r["error"]
            if err in (Errors.STALE_BROKER_EPOCH, Errors.BROKER_ID_NOT_REGISTERED):
                # The controller lost our registration (it restarted with older metadata): again.
                await self._register()
                continue
            if err == Errors.NONE:
                if self.fenced != r["fenced"]:
                    log.info("broker %d %s", self.broker.node_id, "fenced" if r["fenced"] else "unfenced")
                self.fenced = r["fenced"]
                if not self.fenced and self.applied_offset >= 0 and not self.ready.is_set():
                    self.broker.producer_ids.prefetch()   # the first block, before a client needs it
                    self.ready.set()
            self._beat_now = trio.Event()
            with trio.move_on_after(self.heartbeat_interval_s):
                await self._beat_now.wait()

    # ------------------------------------------------------------------ shutting down
    async def controlled_shutdown(self, timeout_s: float = 5.0) -> None:
        """Ask the controller to move every leadership away before this broker stops, and ask
        again CONTROLLED_SHUTDOWN_RECHECK_S after its first answer, then every heartbeat interval,
        until it lets the broker go (Kafka's PENDING_CONTROLLED_SHUTDOWN) -- once every other
        active broker has reported the image that took this one's leaderships, so that what is
        still routed here meanwhile is answered NOT_LEADER_OR_FOLLOWER / NOT_COORDINATOR, not
        cut off. Measured on Kafka 4.3.1, three nodes, 500 ms heartbeats: a SIGTERMed leader
        closes 660-740 ms after the signal, 570-630 ms after the last other broker named another
        leader (bench/controlled_shutdown.py)."""
        if self._chan is None or self.broker_epoch < 0:
            return
        self._shutting_down = True
        deadline = trio.current_time() + timeout_s
        recheck_s = CONTROLLED_SHUTDOWN_RECHECK_S
        while True:
            try:
                r = await self.request("heartbeat", timeout_s=max(deadline - trio.current_time(), 0.1),
                                       broker_id=self.broker.node_id, broker_epoch=self.broker_epoch,
                                       metadata_offset=self.applied_offset, want_shut_down=True)
            except ControllerUnavailable as exc:
                log.warning("controlled shutdown not acknowledged: %s", exc)
                return
            if r.get("should_shut_down") or r.get("error") != Errors.NONE:
                return
            if trio.current_time() >= deadline:
                log.warning("controlled shutdown: the controller did not let broker %d go within %.0f s",
                            self.broker.node_id, timeout_s)
                return
            await trio.sleep(min(recheck_s, max(deadline - trio.current_time(), 0.0)))
            recheck_s = self.heartbeat_interval_s
