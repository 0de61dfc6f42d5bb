"""`kconform diff`: a target's responses compared field by field with a reference's (Apache Kafka).

    from conformance.wirediff import DiffOptions, run_diff
    result = run_diff(DiffOptions(target="embedded", results_dir=Path("r")))

generate.py makes the requests from Kafka's schemas, recipes.py the stateful sequences around
them, run.py sends them to both targets and compares (with conformance/compare/wire.py), known.py
lists the intended differences with their reasons (docs/wirediff.md).
"""
from .run import DiffOptions, DiffResult, run_diff

__all__ = ["DiffOptions", "DiffResult", "run_diff"]
