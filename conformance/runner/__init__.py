"""The conformance runner: replays cases on targets with clients and records what happened.

    from conformance.runner import RunOptions, run
    rows = run(RunOptions(targets=["embedded"], clients=["confluent"], cases=load_cases(), results_dir=Path("r")))

See runner.py for the isolation choice (fresh targets vs. unique names per case) and
docs/results-schema.md for the rows.
"""
from .row import RowContext, run_one
from .runner import RunOptions, attach_diffs, default_clients, default_jobs, new_run_id, reference_target, run
from .slots import TargetSlot

__all__ = ["RowContext", "RunOptions", "TargetSlot", "attach_diffs", "default_clients", "default_jobs", "new_run_id",
           "reference_target", "run", "run_one"]
