"""The runner's side of conformance/proxy: put the Kafka-aware proxy in front of a target.

Why behind an adapter: the runner needs four things from the proxy -- a port per node, rules
for `fault: {proxy: ...}` steps, a transcript per case, and a clean stop -- and nothing else of
its internals.

Two ways to stand in front (`front_mode`):
- ADVERTISE, where the target takes `advertised.listeners` per node (the embedded broker,
  Apache Kafka, librdkafka's mock): node i advertises proxy port i (`node_configs()`, handed to
  Target.start), so clients bootstrap from the proxy and every later connection goes through
  it -- and so do the brokers' connections to each other, since they dial the advertised
  PLAINTEXT listener (inter.broker.listener.name): replica Fetch, WriteTxnMarkers and
  AddPartitionsToTxn verification cross the proxy, and a rule's `from: broker` / `from: client`
  tells them apart. The proxy runs before the target starts and follows the target's addresses
  (`follow`), because brokers fetch from each other while the cluster is still starting.
- REWRITE, for every other target (Tansu, kfake, an external cluster) and for an instance
  several case runs share at once (each run gets its own proxy, so its rules and transcript
  are its own): the proxy is put in front after the target started, one port per node id,
  and rewrites the broker addresses in the responses that name them (conformance/proxy/
  rewrite.py), so clients never bypass it. Brokers then reach each other directly: a case
  whose rules act on broker-to-broker traffic needs the first way.
A restarted node keeps its port (same command line), and a new connection asks again anyway.
"""
from __future__ import annotations

import dataclasses
import json
import ssl
from pathlib import Path

from .. import security
from ..dsl.model import Case
from ..proxy import ProxyServer, ProxyTLS, Rule
from ..results import Check, NotApplicable
from ..targets import Target

ADVERTISE = "advertise"
REWRITE = "rewrite"
#: The proxy's connection events of a case, beside its transcript (JSONL).
EVENTS_FILE = "proxy-events.jsonl"


def front_mode(target_cls: type[Target], case: Case, shared: bool = False) -> str:
    """How the proxy stands in front of this target for this case (module doc); NotApplicable
    when the case's rules need broker-to-broker traffic to cross a proxy that cannot see it."""
    advertise = target_cls.advertises_listeners and (case.topology.nodes == 1 or target_cls.per_node_configs)
    # On a run over SASL a broker whose own requests cannot authenticate (the embedded broker's
    # AddPartitionsToTxn verification, docs/security.md) must not be told to dial the proxy.
    unauthenticated = security.current().sasl and not target_cls.authenticates_own_requests
    if advertise and not shared and not unauthenticated:
        return ADVERTISE
    if case.needs_broker_traffic():
        why = ("the instance is shared by parallel case runs" if advertise and not unauthenticated else
               f"on a run over {security.current().protocol} target {target_cls.name!r}'s brokers cannot "
               "authenticate their own requests to the proxy" if advertise else
               f"target {target_cls.name!r} cannot advertise the proxy's addresses to its brokers")
        raise NotApplicable(f"the case's proxy rules act on broker-to-broker traffic, which would not cross the "
                            f"proxy: {why}")
    return REWRITE


def run_tls() -> ProxyTLS | None:
    """On a run over TLS the proxy speaks it on both sides: towards the clients with the brokers'
    certificate (the clients trust the run's CA), towards the brokers as a client of that CA."""
    sec = security.current()
    if not sec.tls:
        return None
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(sec.keystore_file)
    return ProxyTLS(server=server, client=sec.client_ssl_context())


class ProxyFront:
    """One proxy in front of every node of one target (module doc).

    Advertising (ids 1..nodes): ``front = ProxyFront(n)``; ``front.follow(target)`` (proxy
    running, upstreams follow ``target.addresses``); ``target.start(...,
    node_configs=front.node_configs())``; ``bootstrap = front.attach(target)``.
    Rewriting: ``front = ProxyFront.rewriting(started_target)``; ``front.bootstrap``.
    """

    def __init__(self, nodes: int = 1) -> None:
        if nodes < 1:
            raise ValueError("the proxy fronts at least one node")
        self.server = ProxyServer(tls=run_tls())
        #: node id -> its proxy port; the ids are the target's (1..nodes).
        self.nodes = {i: self.server.add_node(i) for i in range(1, nodes + 1)}
        self._target_ids: list[int] = list(self.nodes)
        self._rules: list[int] = []
        self._started = False
        self.mode = ADVERTISE
        #: The proxy's connection events (open, close, refused, node_down/up) before the case began.
        self._events_from = 0

    @classmethod
    def rewriting(cls, target: Target) -> "ProxyFront":
        """A proxy in front of an already started target: a port per node id, pointing at the
        node's address, with the broker addresses in responses rewritten to those ports."""
        front = cls.__new__(cls)
        front.server = ProxyServer(tls=run_tls())
        front._target_ids = target.node_ids()
        front.nodes = {i: front.server.add_node(i, upstream=target.addresses[i]) for i in front._target_ids}
        front._rules = []
        front._started = False
        front.mode = REWRITE
        front._start()
        return front

    @property
    def bootstrap(self) -> str:
        """Every proxy port: what clients bootstrap from."""
        return self.server.bootstrap

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

    def node_down(self, node_id: int) -> None:
        """The target's node is gone (killed, stopped): its proxy port refuses connections until
        the node accepts again, as the node's own port would."""
        self.server.node_down(node_id)

    def node_up(self, node_id: int) -> None:
        """The target's node is back: its proxy port accepts again at once."""
        self.server.node_up(node_id)

    def begin_case(self) -> None:
        self.server.transcript.restart()
        self._events_from = len(self.server.events)

    def add_rule(self, rule: Rule) -> int:
        """A case's rule; its `node: N` (the N-th node of the target, as for node faults) becomes
        that node's id, which is also its proxy port's."""
        if rule.node is not None:
            if rule.node > len(self._target_ids):
                raise NotApplicable(f"the proxy rule names node {rule.node}; the proxy fronts "
                                    f"{len(self._target_ids)} node(s)")
            rule = dataclasses.replace(rule, node=self._target_ids[rule.node - 1])
        rid = self.server.add_rule(rule)
        self._rules.append(rid)
        return rid

    def remove_rule(self, rule_id: int) -> None:
        """Take one of the case's rules away now (a workload's proxy fault whose window ended),
        releasing what it holds; it is no longer one of the case's rules to check."""
        try:
            self.server.remove_rule(rule_id)
        except KeyError:
            pass
        if rule_id in self._rules:
            self._rules.remove(rule_id)

    def wait_acted(self, rule_id: int, timeout: float):
        """Block until the case's rule acted on a frame; the match, or None on timeout."""
        return self.server.wait_for_match(rule_id, timeout, acted=True)

    def fault_checks(self) -> list[Check]:
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
            src = f" from {rule['from']}" if rule.get("from") else ""
            out.append(Check(f"proxy fault {rule['action']}{what} {rule['direction']} {rule['api']}{src} "
                             f"#{rule['nth']}{'+' if rule.get('every') else ''} acted",
                             acted > 0, f"{matched} frame(s) matched, {acted} acted on"))
        return out

    def transcript_lines(self) -> list[dict]:
        """What crossed this proxy since the case began (the lines `check: transcript` reads)."""
        return self.server.transcript.lines()

    def end_case(self, transcript_path: Path) -> Path | None:
        """Remove the case's rules (releasing held frames) and write its transcript, and beside
        it the proxy's connection events of the case (EVENTS_FILE: a connection the proxy
        refused or reset leaves no frame in the transcript, only there)."""
        for rid in self._rules:
            try:
                self.server.remove_rule(rid)
            except KeyError:
                pass
        self._rules.clear()
        try:
            events = self.server.events[self._events_from:]
            if events:
                with (transcript_path.parent / EVENTS_FILE).open("w") as f:
                    f.writelines(json.dumps(e, default=str) + "\n" for e in events)
            return self.server.transcript.write_jsonl(transcript_path)
        except Exception:  # noqa: BLE001 - a transcript is an artifact, never a verdict
            return None

    def stop(self) -> None:
        try:
            self.server.stop()
        except Exception:  # noqa: BLE001 - stopping anyway
            pass
