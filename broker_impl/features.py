"""Feature levels (KIP-584): what the broker supports and which level it finalizes.

A module that implements a feature registers its supported range in
:data:`SUPPORTED_FEATURES` (the transaction coordinator adds ``transaction.version``), so
nothing is advertised that is not there. ApiVersions v3+ reports both the ranges and the
finalized levels; the transaction coordinator reads the finalized ``transaction.version``.
Both read it here, below the handlers and the coordinators, so neither layer imports the
other for it.
"""

from __future__ import annotations

from .config import BrokerConfig

#: Feature name -> (min supported level, max supported level).
SUPPORTED_FEATURES: dict[str, tuple[int, int]] = {}


def finalized_features(config: BrokerConfig) -> dict[str, int]:
    """Each supported feature at the level of the broker config of the same name (clamped to
    the supported range), or at its highest level when that config is not set."""
    out = {}
    for name, (lo, hi) in SUPPORTED_FEATURES.items():
        level = config.int(name) if name in config.values else hi
        out[name] = max(lo, min(hi, level))
    return out
