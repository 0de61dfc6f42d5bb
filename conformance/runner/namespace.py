"""Unique names per case run, and the way back to the case's own names.

Why: a slow target (Apache Kafka takes seconds to start) may serve several cases in a row, and
the external target is never fresh. Every topic, transactional.id and group a case names is
therefore suffixed with a token unique to this (case, target, client) run, so no case sees
another's records, producer state or offsets. Outcomes are mapped back to the case's names
before they are compared, so the suffix never shows up in a diff.
"""
from __future__ import annotations

import secrets
from typing import Any

from broker_impl.codec import KAFKA_INTERNAL_TOPICS

#: Producer/consumer config keys whose values are names to make unique.
NAMED_CONFIGS = ("transactional.id", "group.id", "group.instance.id")


class Namespace:
    def __init__(self, token: str | None = None) -> None:
        self.token = token or secrets.token_hex(3)
        self._forward: dict[str, str] = {}
        self._back: dict[str, str] = {}

    def name(self, original: str) -> str:
        """The unique form of a case name (stable within the run); a name that is already
        unique (a value an earlier step returned) stays as it is."""
        if original in self._back or original in KAFKA_INTERNAL_TOPICS:
            # Kafka's own topics: a case names the cluster's (a raw Metadata or ElectLeaders on
            # __transaction_state), never one of its own
            return original
        if original not in self._forward:
            unique = f"{original}-{self.token}"
            self._forward[original] = unique
            self._back[unique] = original
        return self._forward[original]

    def config(self, config: dict[str, str]) -> dict[str, str]:
        return {k: (self.name(v) if k in NAMED_CONFIGS and v else v) for k, v in config.items()}

    def args(self, args: dict[str, Any]) -> dict[str, Any]:
        """Op arguments with every topic / id / group replaced by its unique form."""
        out = dict(args)
        for key in ("topic", "to", "group_id"):
            if isinstance(out.get(key), str):
                out[key] = self.name(out[key])
        if isinstance(out.get("topics"), list):
            out["topics"] = [self.name(t) for t in out["topics"]]
        if isinstance(out.get("ids"), list):
            out["ids"] = [self.name(t) for t in out["ids"]]
        for key in ("partitions", "offsets"):
            if isinstance(out.get(key), list):
                out[key] = [dict(p, topic=self.name(p["topic"])) if isinstance(p, dict) and "topic" in p else p
                            for p in out[key]]
        return out

    def unmap(self, value: Any) -> Any:
        """Any JSON value with unique names (also inside longer strings) turned back into the case's."""
        if isinstance(value, str):
            if value in self._back:
                return self._back[value]
            if self.token in value:
                for unique, original in self._back.items():
                    value = value.replace(unique, original)
            return value
        if isinstance(value, list):
            return [self.unmap(v) for v in value]
        if isinstance(value, dict):
            return {self.unmap(k): self.unmap(v) for k, v in value.items()}
        return value
