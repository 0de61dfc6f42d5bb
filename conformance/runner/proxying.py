"""The runner's side of conformance/proxy: put the Kafka-aware proxy in front of a target.

Why behind an adapter: the runner needs four things from the proxy -- a port per node to
advertise, rules for `fault: {proxy: ...}` steps, a transcript per case, and a clean stop --
and nothing else of its internals. Where the proxy cannot stand in front of a target (the
target cannot advertise another address per node), `can_front` says why and cases that need
the proxy are not applicable there.

How it sits: in front of every node. Node i's `advertised.listeners` names proxy port i
(`node_configs()`, handed to Target.start), so clients bootstrap from the proxy and every
later connection (after Metadata / FindCoordinator) goes through it too -- and so do the
brokers' connections to each other, since they dial the advertised PLAINTEXT listener
(inter.broker.listener.name): replica Fetch, WriteTxnMarkers and AddPartitionsToTxn
verification cross the proxy, and a rule's `from: broker` / `from: client` tells them apart.
The proxy runs before the target starts and follows the target's addresses (`follow`),
because brokers fetch from each other while the cluster is still starting. A restarted node
keeps its port (same command line), and a new connection asks the target again anyway.
One proxy lives as long as one started target; its transcript restarts with every case.
"""
from __future__ import annotations

from pathlib import Path

from ..dsl.model import ProxyRule
from ..targets import split_name, target_class
from ..targets.base import NotApplicable

DIRECTIONS = {"request": "c2b", "response": "b2c"}
#: Targets that take `advertised.listeners` as a broker config.
ADVERTISING_TARGETS = frozenset({"embedded", "apache-kafka"})
#: Those that take a different one per node (Target.start's node_configs), so the proxy can
#: stand in front of every node of a cluster. The others run one node.
PER_NODE_TARGETS = frozenset({"apache-kafka"})


class ProxyUnavailable(Exception):
    pass


def proxy_module():
    try:
        from conformance import proxy
        proxy.ProxyServer  # noqa: B018 - the class must exist, not just the package
    except (ImportError, AttributeError) as exc:
        raise ProxyUnavailable(f"the Kafka-aware proxy (conformance/proxy) cannot be imported: {exc}") from None
    return proxy


def can_front(target_name: str, nodes: int) -> str | None:
    """None when the proxy can stand in front of this target, else the reason it cannot."""
    base = split_name(target_name)[0]  # apache-kafka@3.9.1 is apache-kafka
    if base not in ADVERTISING_TARGETS:
        return (f"target {target_name!r} cannot advertise the proxy's address (no advertised.listeners "
                "broker config), so clients would bypass the proxy after Metadata")
    if nodes != 1 and base not in PER_NODE_TARGETS:
        cls = _target_class(target_name)
        if cls is not None and "multi_node" not in cls.static_capabilities:
            return f"target {target_name!r} runs one node; the case needs {nodes}"
        return (f"target {target_name!r} cannot give each of its {nodes} nodes its own advertised.listeners, "
                "so the proxy cannot stand in front of every node")
    try:
        proxy_module()
    except ProxyUnavailable as exc:
        return str(exc)
    return None


def _target_class(name: str):
    try:
        return target_class(name)
    except KeyError:
        return None


class ProxyFront:
    """One proxy in front of every node (ids 1..nodes) of one target.

    Order: ``front = ProxyFront(n)``; ``front.follow(target)`` (proxy running, upstreams
    follow ``target.addresses``); ``target.start(..., node_configs=front.node_configs())``;
    ``bootstrap = front.attach(target)``.
    """

    def __init__(self, nodes: int = 1) -> None:
        if nodes < 1:
            raise ValueError("the proxy fronts at least one node")
        proxy = proxy_module()
        self.server = proxy.ProxyServer()
        #: node id -> its proxy port; the ids are the target's (1..nodes).
        self.nodes = {i: self.server.add_node(i) for i in range(1, nodes + 1)}
        self._target_ids: list[int] = list(self.nodes)
        self._rules: list[int] = []
        self._started = False

    @property
    def node(self):
        """The first node's proxy port (the only one in front of a single-node target)."""
        return self.nodes[1]

    def node_configs(self) -> dict[int, dict[str, str]]:
        """Per node, the broker config that makes it advertise its own proxy port."""
        return {i: {"advertised.listeners": n.listener} for i, n in self.nodes.items()}

    def broker_configs(self) -> dict[str, str]:
        """The same for a single-node target, as a plain broker config."""
        if len(self.nodes) != 1:
            raise ValueError("several nodes advertise several addresses: use node_configs()")
        return {"advertised.listeners": self.node.listener}

    def follow(self, target) -> None:
        """Start the proxy now, each node forwarding to ``target.addresses[id]`` as it is when a
        connection comes (the target fills it before its processes start)."""
        addresses = target.addresses
        for i, n in self.nodes.items():
            n.follow_upstream(lambda i=i: addresses.get(i))
        self._start()

    def attach(self, target_or_upstream) -> str:
        """After the target started: check every node is fronted; returns the bootstrap clients
        use (every proxy port). A (host, port) instead of a target points node 1 there."""
        if isinstance(target_or_upstream, tuple):
            self.node.set_upstream(*target_or_upstream)
        else:
            ids = target_or_upstream.node_ids()
            if sorted(ids) != sorted(self.nodes):
                raise ValueError(f"the proxy fronts nodes {sorted(self.nodes)}, the target has {ids}")
            self._target_ids = list(ids)
            if not self._started:
                self.follow(target_or_upstream)
        self._start()
        return self.server.bootstrap

    def _start(self) -> None:
        if not self._started:
            self.server.start_in_thread()
            self._started = True

    def begin_case(self) -> None:
        self.server.transcript.restart()

    def add_rule(self, rule: ProxyRule) -> int:
        spec = {"action": rule.action, "api": rule.api, "direction": DIRECTIONS[rule.direction],
                "nth": rule.nth}
        if rule.action == "answer":
            spec["error"] = rule.error
        if rule.action == "corrupt":
            spec["offset"] = rule.offset
            if rule.length is not None:
                spec["length"] = rule.length
        if rule.node is not None and rule.node.node is not None:
            # `node: N` is the N-th node of the target (as for node faults); its proxy port has
            # the target's node id.
            n = rule.node.node
            if n > len(self._target_ids):
                raise NotApplicable(f"the proxy rule names node {n}; the proxy fronts {len(self._target_ids)} node(s)")
            spec["node"] = self._target_ids[n - 1]
        if rule.source is not None:
            spec["source"] = rule.source
        if rule.every:
            spec["every"] = True
        if rule.action in ("delay", "hold") and rule.delay_ms >= 0 and (rule.delay_ms or rule.action == "delay"):
            spec["ms"] = rule.delay_ms
        rid = self.server.add_rule(spec)
        self._rules.append(rid)
        return rid

    def fault_checks(self) -> list[dict]:
        """One check per proxy rule of the case: did it act on a frame? A rule that never acted
        means the case did not test what it says (the frame never came)."""
        out = []
        for rid in self._rules:
            try:
                matched, acted = self.server.rules.counts(rid)
                rule = self.server.rules.rule(rid).to_dict()
            except KeyError:
                continue
            what = f" {rule['error']}" if rule.get("error") else ""
            src = f" from {rule['source']}" if rule.get("source") else ""
            out.append({"name": f"proxy fault {rule['action']}{what} {rule['direction']} {rule['api']}{src} "
                                f"#{rule['nth']}{'+' if rule.get('every') else ''} acted",
                        "passed": acted > 0, "message": f"{matched} frame(s) matched, {acted} acted on"})
        return out

    def end_case(self, transcript_path: Path) -> Path | None:
        """Remove the case's rules (releasing held frames) and write its transcript."""
        for rid in self._rules:
            try:
                self.server.remove_rule(rid)
            except KeyError:
                pass
        self._rules.clear()
        try:
            return self.server.transcript.write_jsonl(transcript_path)
        except Exception:  # noqa: BLE001 - a transcript is an artifact, never a verdict
            return None

    def stop(self) -> None:
        try:
            self.server.stop()
        except Exception:  # noqa: BLE001 - stopping anyway
            pass
