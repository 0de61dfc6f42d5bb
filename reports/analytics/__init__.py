"""PySpark analytics over many runs (optional extra ``analytics``; needs Java 17).

:func:`analyze` reads every run's ``results.jsonl`` under a root and writes
the conformance matrix, divergences, flaky cases and duration percentiles
as Parquet and CSV, PNG charts, and a text summary.
"""

from __future__ import annotations


def analyze(results_root, out_dir, master: str = "local[*]", **kw) -> str:
    """See :func:`reports.analytics.analyze.analyze` (imported lazily: PySpark is optional)."""
    from .analyze import analyze as _analyze

    return _analyze(results_root, out_dir, master, **kw)
