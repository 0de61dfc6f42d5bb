"""The runner's side of conformance/proxy: put the Kafka-aware proxy in front of a target.

Why behind an adapter: the runner needs four things from the proxy -- a port per node to
advertise, rules for `fault: {proxy: ...}` steps, a transcript per case, and a clean stop --
and nothing else of its internals. Where the proxy cannot stand in front of a target (the
target cannot advertise another address, or runs several nodes), `ProxyUnavailable` says why
and cases that need the proxy are not applicable there.

How it sits: the node's `advertised.listeners` names the proxy port, so clients bootstrap from
the proxy and every later connection (after Metadata / FindCoordinator) goes through it too.
One proxy lives as long as one started target; its transcript restarts with every case.
"""
from __future__ import annotations

from pathlib import Path

from ..dsl.model import ProxyRule

DIRECTIONS = {"request": "c2b", "response": "b2c"}
#: Targets that take `advertised.listeners` as a broker config (one node).
ADVERTISING_TARGETS = frozenset({"embedded", "apache-kafka"})


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
    if target_name not in ADVERTISING_TARGETS:
        return (f"target {target_name!r} cannot advertise the proxy's address (no advertised.listeners "
                "broker config), so clients would bypass the proxy after Metadata")
    if nodes != 1:
        return ("the proxy in front of a multi-node cluster needs a different advertised.listeners per node, "
                "which the targets cannot take yet")
    try:
        proxy_module()
    except ProxyUnavailable as exc:
        return str(exc)
    return None


class ProxyFront:
    """One proxy in front of one single-node target."""

    def __init__(self) -> None:
        proxy = proxy_module()
        self.server = proxy.ProxyServer()
        self.node = self.server.add_node(1)
        self._rules: list[int] = []
        self._started = False

    def broker_configs(self) -> dict[str, str]:
        return {"advertised.listeners": self.node.listener}

    def attach(self, upstream: tuple[str, int]) -> str:
        """Point the proxy at the started node; returns the bootstrap clients use."""
        self.node.set_upstream(*upstream)
        if not self._started:
            self.server.start_in_thread()
            self._started = True
        return self.server.bootstrap

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
            spec["node"] = rule.node.node
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
            out.append({"name": f"proxy fault {rule['action']}{what} {rule['direction']} {rule['api']} #{rule['nth']} acted",
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
