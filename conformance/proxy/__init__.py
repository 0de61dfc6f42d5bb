"""A Kafka-aware, fault-injecting TCP proxy: one port per broker node, frame-level rules.

Any target realises frame-level faults (hold, drop, delay, sever, corrupt a request or a
response of a given API) through this proxy, and every frame that crosses it is recorded in
a transcript (docs/results-schema.md, "Transcript line"). See :mod:`.server` for the life
cycle and :mod:`.rules` for the rule language.
"""

from .rules import Match, Rule, RuleError
from .server import ProxyNode, ProxyServer, ProxyTLS, parse_address, run_proxy
from .transcript import Transcript, frame_bytes

__all__ = ["Match", "ProxyNode", "ProxyServer", "ProxyTLS", "Rule", "RuleError", "Transcript",
           "frame_bytes", "parse_address", "run_proxy"]
