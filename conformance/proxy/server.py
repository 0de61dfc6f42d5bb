"""The proxy: one listening port per broker node, rules, transcript, and synchronous control.

Order of events a target follows::

    proxy = ProxyServer(transcript_path=workdir / "transcript.jsonl")
    node = proxy.add_node(1)                      # binds 127.0.0.1:<ephemeral> now
    start the broker with advertised.listeners=node.listener   # PLAINTEXT://127.0.0.1:<port>
    node.set_upstream("127.0.0.1", broker_port)   # where the node really listens
    proxy.start_in_thread()
    ... clients bootstrap from node.address ...
    rid = proxy.add_rule({"api": "EndTxn", "direction": "request", "action": "hold"})
    proxy.wait_for_match(rid, timeout=30)         # the coordinator got EndTxn (held)
    ... kill the coordinator; then proxy.release(rid) or proxy.remove_rule(rid)
    proxy.stop()

The port is reserved (bound and listening) when :meth:`ProxyServer.add_node` returns, before
the proxy runs and before the node's real address is known, because a broker must be told
the address to advertise before it starts. A client that connects before
:meth:`ProxyNode.set_upstream` waits (up to ``upstream_wait`` seconds) instead of failing.
Since every node advertises its proxy port, clients reconnect through the proxy after
Metadata and FindCoordinator, and inter-broker traffic (fetches between replicas, transaction
markers) crosses it too.

Over TLS (``tls=ProxyTLS(...)``, a run over SASL_SSL) the proxy ends the client's TLS with the
brokers' certificate and opens its own to the broker, so rules and the transcript still see
frames (a man in the middle the clients trust, since they trust the run's CA); SASL exchanges
are frames like any other and pass through.

The proxy runs its own trio loop; the runner is synchronous and talks to it from its own
thread. Control methods are thread-safe; the blocking one (:meth:`wait_for_match`) must not be
called from the proxy's own loop.
"""

from __future__ import annotations

import functools
import itertools
import logging
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Mapping

import trio

from .connection import ProxiedConnection, arm_reset
from .rules import Match, Rule, RuleBook
from .transcript import Transcript

log = logging.getLogger("kconform.proxy")

HOST = "127.0.0.1"
#: A size prefix beyond this is not taken as a frame (the stream is then forwarded unframed).
#: Larger than any Fetch response a client asks for (fetch.max.bytes defaults to 50 MiB).
DEFAULT_MAX_FRAME_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class ProxyTLS:
    """TLS on both sides of the proxy: ``server`` towards the clients (the brokers' certificate),
    ``client`` towards the brokers (their CA; host names verified)."""

    server: ssl.SSLContext
    client: ssl.SSLContext


def _addr(host: str, port: int) -> str:
    return f"{host}:{port}"


class ProxyNode:
    """The proxy's stand-in for one broker node: a reserved local port and the node's real address."""

    def __init__(self, node_id: int, host: str = HOST, port: int = 0, backlog: int = 128) -> None:
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError(f"the proxy binds loopback only, not {host!r}")
        self.node_id = node_id
        self.host = host
        self.backlog = backlog
        self._sock = self._bind(port)
        self.port: int = self._sock.getsockname()[1]
        self._upstream: tuple[str, int] | None = None
        self._follow: Callable[[], tuple[str, int] | None] | None = None
        self._lock = threading.Lock()
        self._serving = False
        #: Cancels the node's accept loop: the node is down, its port closed (ProxyServer.node_down).
        self._listening: trio.CancelScope | None = None
        self.down = False
        #: The port is closed (set by the accept loop once its listener is closed).
        self.closed = False

    def _bind(self, port: int) -> socket.socket:
        sock = socket.socket(socket.AF_INET6 if ":" in self.host else socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, port))
        sock.listen(self.backlog)
        return sock

    def reopen(self) -> None:
        """Listen on the same port again after it was closed for a node that was down."""
        self._sock = self._bind(self.port)
        self.closed = False

    @property
    def address(self) -> str:
        """HOST:PORT clients (and the node itself, via advertised.listeners) connect to."""
        return _addr(self.host, self.port)

    @property
    def listener(self) -> str:
        """The value for the node's ``advertised.listeners``."""
        return f"PLAINTEXT://{self.address}"

    @property
    def upstream(self) -> tuple[str, int] | None:
        with self._lock:
            follow, fixed = self._follow, self._upstream
        if follow is None:
            return fixed
        try:
            found = follow()
        except Exception:  # noqa: BLE001 - the node is not known yet: "no upstream", wait
            return None
        return None if found is None else (found[0], int(found[1]))

    @property
    def fixed_upstream(self) -> tuple[str, int] | None:
        """The address set with set_upstream (None while the node follows a target)."""
        with self._lock:
            return None if self._follow is not None else self._upstream

    def set_upstream(self, host: str, port: int) -> None:
        """Where the node really listens. May change (a restarted node); new connections follow."""
        with self._lock:
            self._upstream = (host, int(port))
            self._follow = None

    def follow_upstream(self, where: Callable[[], tuple[str, int] | None]) -> None:
        """Ask ``where()`` for the node's real address at every new connection (None: not known
        yet, the connection waits). Why: the nodes of a cluster connect to each other through
        their advertised (proxy) ports while the cluster is still starting, before the caller
        could call :meth:`set_upstream` -- e.g. ``lambda: target.addresses.get(2)``, filled by
        the target before its processes start."""
        with self._lock:
            self._follow = where
            self._upstream = None

    def __repr__(self) -> str:
        return f"ProxyNode({self.node_id}, {self.address} -> {self.upstream})"


class ProxyServer:
    def __init__(self, *, transcript: Transcript | None = None, transcript_path: str | Path | None = None,
                 host: str = HOST, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
                 connect_timeout: float = 10.0, upstream_wait: float = 30.0, tls: ProxyTLS | None = None) -> None:
        self.host = host
        self.tls = tls
        self.transcript = transcript or Transcript(transcript_path)
        self.rules = RuleBook()
        self.max_frame_bytes = max_frame_bytes
        self.connect_timeout = connect_timeout
        self.upstream_wait = upstream_wait
        self.nodes: dict[int, ProxyNode] = {}
        self._nodes_lock = threading.Lock()
        #: Connection life events: {"t", "event": open|close|refused, "conn", "node", "client", "broker", "reason"}.
        self.events: list[dict] = []
        self._events_lock = threading.Lock()
        self._conn_ids = itertools.count(1)
        self._conns: dict[int, ProxiedConnection] = {}
        self._token: trio.lowlevel.TrioToken | None = None
        self._loop_ident: int | None = None
        self._nursery: trio.Nursery | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._thread_error: BaseException | None = None
        self._stopped = False

    # ================================================================ nodes
    def add_node(self, node_id: int | None = None, upstream: tuple[str, int] | str | None = None,
                 port: int = 0) -> ProxyNode:
        """Reserve a local port for a broker node (now, before anything runs)."""
        if node_id is None:
            node_id = max(self.nodes, default=0) + 1
        if node_id in self.nodes:
            raise ValueError(f"node {node_id} already has a proxy port ({self.nodes[node_id].address})")
        node = ProxyNode(node_id, self.host, port)
        if upstream is not None:
            node.set_upstream(*parse_address(upstream))
        with self._nodes_lock:
            self.nodes[node_id] = node
        if self._token is not None:
            self._call_in_loop(lambda: self._nursery.start_soon(self._serve_node, node))
        return node

    def node(self, node_id: int) -> ProxyNode:
        return self.nodes[node_id]

    def local_address(self, node_id: int, host: str, port: int) -> tuple[str, int]:
        """Where a client must connect for broker `node_id`, which a response says listens at
        host:port (rewrite.py): that node's proxy port -- opened now, pointing there, if the
        proxy has none yet. An address that already is one of the proxy's ports is kept (an
        advertising broker names it itself). Called from the proxy's own loop."""
        with self._nodes_lock:
            for node in self.nodes.values():
                if (node.host, node.port) == (host, port):
                    return host, port
            node = self.nodes.get(node_id)
            if node is None:
                node = ProxyNode(node_id, self.host)
                node.set_upstream(host, port)
                self.nodes[node_id] = node
                if self._nursery is not None:
                    self._nursery.start_soon(self._serve_node, node)
            elif node.fixed_upstream not in (None, (host, port)):
                node.set_upstream(host, port)  # the node moved (a restart elsewhere): follow it
        return node.host, node.port

    @property
    def bootstrap(self) -> str:
        """Comma-separated proxy addresses of every node: a client's bootstrap.servers."""
        return ",".join(n.address for n in self.nodes.values())

    # ================================================================ running
    async def serve(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Run in the caller's trio loop until cancelled (or :meth:`stop`)."""
        self._token = trio.lowlevel.current_trio_token()
        self._loop_ident = threading.get_ident()
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                for node in self.nodes.values():
                    nursery.start_soon(self._serve_node, node)
                task_status.started(self)
                await trio.sleep_forever()
        finally:
            self._token = None
            self._nursery = None
            self._loop_ident = None
            self._close_ports()
            if self._stopped:
                self.transcript.close()
            else:
                self.transcript.flush()

    def start_in_thread(self, timeout: float = 10.0) -> "ProxyServer":
        """Run the proxy's own trio loop in a daemon thread; returns once it accepts connections."""
        if self._thread is not None:
            raise RuntimeError("the proxy is already running")

        def main() -> None:
            try:
                trio.run(self._run_until_stopped)
            except BaseException as exc:  # reported to start_in_thread / stop
                self._thread_error = exc
                log.exception("proxy loop failed")
            finally:
                self._started.set()

        self._thread = threading.Thread(target=main, name="kconform-proxy", daemon=True)
        self._thread.start()
        if not self._started.wait(timeout):
            raise TimeoutError(f"proxy did not start within {timeout}s")
        if self._thread_error is not None:
            raise RuntimeError("proxy failed to start") from self._thread_error
        return self

    async def _run_until_stopped(self) -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(self.serve)
            self._started.set()

    def stop(self, timeout: float = 10.0) -> None:
        """Close every connection and port; held frames are dropped with their connections."""
        if self._stopped:
            return
        self._stopped = True
        if self._token is not None and self._nursery is not None:
            try:
                self._call_in_loop(lambda: self._nursery.cancel_scope.cancel())
            except (trio.RunFinishedError, RuntimeError):
                pass
        if threading.get_ident() == self._loop_ident:
            return  # called from inside the loop: serve() closes the ports as it unwinds
        if self._thread is not None:
            self._thread.join(timeout)
        self._close_ports()
        self.transcript.close()

    def _close_ports(self) -> None:
        for node in self.nodes.values():
            node._sock.close()

    def __enter__(self) -> "ProxyServer":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # ================================================================ rules
    def add_rule(self, rule: Rule | dict) -> int:
        """Start applying a rule (a :class:`Rule` or its dict form); returns its id."""
        return self.rules.add(rule)

    def remove_rule(self, rule_id: int) -> int:
        """Stop applying a rule; frames it holds go on. Returns how many were held."""
        holds = self.rules.remove(rule_id)
        self._release(holds)
        return len(holds)

    def release(self, rule_id: int) -> int:
        """Let go of the frames a hold rule keeps now (the rule stays, for later matches).

        Returns how many frames were released.
        """
        holds = self.rules.take_holds(rule_id)
        self._release(holds)
        return len(holds)

    def release_all(self) -> int:
        holds = self.rules.all_holds()
        self._release(holds)
        return len(holds)

    def _release(self, holds: list) -> None:
        if not holds or self._token is None:
            return

        def go() -> None:
            for h in holds:
                h.released = True
                h.event.set()

        try:
            self._call_in_loop(go)
        except trio.RunFinishedError:
            pass

    def wait_for_match(self, rule_id: int, timeout: float, count: int = 1, acted: bool = False) -> Match | None:
        """Block until the rule has matched ``count`` frames (acted on them, with ``acted=True``).

        Returns the match (which connection, API, version, correlation id, when), or None on
        timeout. A ``hold`` rule's frame is held by the time this returns.
        """
        return self.rules.wait_for_match(rule_id, timeout, count, acted)

    def matches(self, rule_id: int) -> list[Match]:
        return self.rules.matches(rule_id)

    # ================================================================ connections
    def connections(self, node_id: int | None = None) -> list[dict]:
        """The connections open now: conn id, node, client and broker addresses."""
        def snap() -> list[dict]:
            return [{"conn": c.conn_id, "node": c.node.node_id, "client": c.client_addr, "broker": c.broker_addr}
                    for c in self._conns.values() if node_id is None or c.node.node_id == node_id]
        return self._call_in_loop(snap) if self._token is not None else []

    def sever_connections(self, node_id: int | None = None, reset: bool = False) -> int:
        """Close every open connection (of one node): a network cut without a rule."""
        def go() -> int:
            victims = [c for c in self._conns.values() if node_id is None or c.node.node_id == node_id]
            for c in victims:
                c.sever(reset, "severed by control call")
            return len(victims)
        return self._call_in_loop(go) if self._token is not None else 0

    def _event(self, event: str, **fields) -> None:
        with self._events_lock:
            self.events.append({"t": self.transcript.now(), "event": event, **fields})

    def events_of(self, event: str, node_id: int | None = None) -> list[dict]:
        with self._events_lock:
            return [e for e in self.events if e["event"] == event and (node_id is None or e.get("node") == node_id)]

    # ================================================================ trio side
    def _call_in_loop(self, fn: Callable):
        if self._token is None:
            raise RuntimeError("the proxy is not running")
        if threading.get_ident() == self._loop_ident:
            return fn()
        return trio.from_thread.run_sync(fn, trio_token=self._token)

    async def _serve_node(self, node: ProxyNode) -> None:
        """Accept for the node while it is up. A node that is down has its port CLOSED, so a
        client's connection is refused as by a dead broker (an accepted-then-closed connection
        reads differently: franz-go took it for a TLS misconfiguration, Sarama and KafkaJS for a
        failed request they do not retry); the port opens again once the node accepts."""
        if node._serving:
            return
        node._serving = True
        handler = functools.partial(self._handle_client, node)
        while not self._stopped:
            listener = trio.SocketListener(trio.socket.from_stdlib_socket(node._sock))
            with trio.CancelScope() as node._listening:
                # connections live in the server's nursery: closing the port ends none of them
                await trio.serve_listeners(handler, [listener], handler_nursery=self._nursery)
            with trio.CancelScope(shield=True):
                await listener.aclose()
            node.closed = True
            self._event("node_down", node=node.node_id)
            await self._until_back(node)

    def node_down(self, node_id: int) -> None:
        """The node is down (killed, stopped): close its port until it accepts again. The runner
        says so when it takes a node down; the proxy finds out by itself when a connection to
        the node is refused. Thread-safe."""
        node = self.nodes.get(node_id)
        if node is None or self._token is None:
            return
        self._call_in_loop(lambda: self._mark_down(node))
        # closed by the node's accept loop: return once it is (bounded: 100 x 20 ms)
        for _ in range(100):
            if node.closed or self._stopped:
                return
            time.sleep(0.02)
        log.warning("proxy node %s: its port was not closed within 2 s", node_id)

    def _mark_down(self, node: ProxyNode) -> None:
        """Mark the node down and end its accept loop, which closes the port (``closed``)."""
        if not node.down:
            node.down = True
            if node._listening is not None:
                node._listening.cancel()

    def node_up(self, node_id: int) -> None:
        """The node is back (the runner restarted it and it is ready): listen on its port again
        now, not at the next probe of ``_until_back`` -- a client's next step must find it open.
        Thread-safe."""
        node = self.nodes.get(node_id)
        if node is not None and self._token is not None:
            self._call_in_loop(lambda: self._mark_up(node))

    def _mark_up(self, node: ProxyNode) -> None:
        if not node.down:
            return
        if not node.closed:
            # a refused connection marked it down a moment ago and the accept loop is still
            # closing the port: open it again once it is closed, not never
            self._nursery.start_soon(self._mark_up_once_closed, node)
            return
        node.reopen()
        node.down = False
        self._event("node_up", node=node.node_id)

    async def _mark_up_once_closed(self, node: ProxyNode) -> None:
        for _ in range(500):                     # bounded: 5 s
            if node.closed or not node.down or self._stopped:
                break
            await trio.sleep(0.01)
        if node.closed and not self._stopped:
            self._mark_up(node)

    async def _until_back(self, node: ProxyNode) -> None:
        """Wait until the node accepts a connection again, then listen on its port again (unless
        node_up already did)."""
        while not self._stopped and node.down:
            await trio.sleep(0.05)
            up = node.upstream
            if up is None:
                continue
            try:
                with trio.fail_after(1):
                    probe = await trio.open_tcp_stream(*up)
            except (OSError, trio.TooSlowError):
                continue
            await probe.aclose()
            if not node.down:
                return
            try:
                node.reopen()
            except OSError as exc:  # the port was taken meanwhile: say so, try again
                log.error("proxy node %s: cannot listen on port %s again: %s", node.node_id, node.port, exc)
                continue
            node.down = False
            self._event("node_up", node=node.node_id)
            return

    async def _handle_client(self, node: ProxyNode, client: trio.SocketStream) -> None:
        conn_id = next(self._conn_ids)
        try:
            host, port = client.socket.getpeername()[:2]
            client_addr = _addr(host, port)
        except OSError:
            client_addr = "?"
        upstream = await self._upstream_of(node)
        if upstream is None:
            self._event("refused", conn=conn_id, node=node.node_id, client=client_addr, broker=None,
                        reason=f"no upstream set within {self.upstream_wait}s")
            await client.aclose()
            return
        broker_addr = _addr(*upstream)
        try:
            with trio.fail_after(self.connect_timeout):
                up = await trio.open_tcp_stream(*upstream)
        except (OSError, trio.TooSlowError) as exc:
            # The node is down. A dead node refuses the connection; the proxy has already
            # accepted this one, so the closest it can say is a reset (RST) -- never an orderly
            # close -- and it closes the node's port, so the next connections are refused.
            self._event("refused", conn=conn_id, node=node.node_id, client=client_addr, broker=broker_addr,
                        reason=repr(exc))
            arm_reset(client)
            await client.aclose()
            self._mark_down(node)
            return
        if self.tls is not None:   # handshakes happen at the first read or write of each side
            client = trio.SSLStream(client, self.tls.server, server_side=True)
            up = trio.SSLStream(up, self.tls.client, server_hostname=upstream[0])
        conn = ProxiedConnection(self, node, conn_id, client, up, client_addr, broker_addr)
        self._conns[conn_id] = conn
        self._event("open", conn=conn_id, node=node.node_id, client=client_addr, broker=broker_addr)
        try:
            await conn.run()
        finally:
            self._conns.pop(conn_id, None)

    async def _upstream_of(self, node: ProxyNode) -> tuple[str, int] | None:
        deadline = trio.current_time() + self.upstream_wait
        while True:
            up = node.upstream
            if up is not None or trio.current_time() >= deadline:
                return up
            await trio.sleep(0.05)


def parse_address(addr: tuple[str, int] | str) -> tuple[str, int]:
    if isinstance(addr, tuple):
        return addr[0], int(addr[1])
    host, _, port = str(addr).rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"not a HOST:PORT address: {addr!r}")
    return host, int(port)


def run_proxy(upstreams: Mapping[int, tuple[str, int] | str | None] | Iterable[tuple[str, int] | str | None],
              rules: Iterable[Rule | dict] = (), *, transcript_path: str | Path | None = None,
              **server_kwargs) -> ProxyServer:
    """Start a proxy in a background thread in front of the given nodes, with the given rules.

    ``upstreams`` maps node id -> "HOST:PORT" (or a (host, port) tuple, or None to only reserve
    the port and ``set_upstream`` later); a plain sequence numbers the nodes from 1. Returns the
    running :class:`ProxyServer`: ``proxy.node(id).address`` is where clients connect,
    ``proxy.rules`` ids follow the order of ``rules`` (1, 2, ...). The caller stops it.
    """
    if not isinstance(upstreams, Mapping):
        upstreams = {i: a for i, a in enumerate(upstreams, start=1)}
    proxy = ProxyServer(transcript_path=transcript_path, **server_kwargs)
    try:
        for node_id, addr in upstreams.items():
            proxy.add_node(int(node_id), addr)
        for rule in rules:
            proxy.add_rule(rule)
        return proxy.start_in_thread()
    except BaseException:
        proxy.stop()
        raise
