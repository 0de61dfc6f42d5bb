"""`kconform workload`: generative exactly-once workloads run over many seeds, targets and clients.

A workload is a case (dsl/workload.py) run by the ordinary runner, one row per (seed, target,
client); this package adds what only makes sense across rows: many seeds of one spec
(`seeded`), the same seed compared between targets (`compare`), and a failing seed shrunk to a
short schedule saved as a case that replays it (`shrink`). docs/workload.md says how to use it.
"""
from .compare import compare_rows, render_comparison
from .seeds import seeded
from .shrink import shrink

__all__ = ["compare_rows", "render_comparison", "seeded", "shrink"]
