"""`kconform fuzz`: mutated Kafka requests at any target, to find what crashes, wedges or trips it.

    from conformance.fuzz import FuzzOptions, run_fuzz
    report = run_fuzz(FuzzOptions(target="embedded", frames=10000, results_dir=Path("r")))

run.py runs it, seeds.py gathers the frames to mutate, mutate.py mutates them, watch.py reads the
target's health and logs, session.py is the real client at both ends of a run.
"""
from .run import FuzzOptions, result_row, run_fuzz

__all__ = ["FuzzOptions", "result_row", "run_fuzz"]
