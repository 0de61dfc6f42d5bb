"""The conformance runner: replays cases on targets with clients and records what happened.

    from conformance.runner import RunOptions, run
    rows = run(RunOptions(targets=["embedded"], clients=["confluent"], cases=load_cases(), results_dir=Path("r")))

See runner.py for the isolation choice (fresh targets vs. unique names per case),
conformance/results.py for the rows (Row, Verdict, Check) and docs/results-schema.md for the file.
"""
from .row import RowContext, run_one
from .runner import (RunOptions, RunRecord, attach_diffs, default_clients, default_jobs, new_run_id, reference_target,
                     run)
from .slots import TargetSlot

__all__ = ["RowContext", "RunOptions", "RunRecord", "TargetSlot", "attach_diffs", "default_clients", "default_jobs",
           "new_run_id", "reference_target", "run", "run_one"]
