"""Conformance cases: the YAML schema (cases/README.md), its in-memory model and the loader.

    from conformance.dsl import load_cases, load_case, CaseError
    cases = load_cases(["txn/*"])         # every case whose id matches a glob
"""
from .loader import CASES_ROOT, CaseError, discover, load_case, load_cases, parse_case, validate_all
from .model import Case, CheckDef, Expect, FaultDef, NodeRef, Step

__all__ = ["CASES_ROOT", "Case", "CaseError", "CheckDef", "Expect", "FaultDef", "NodeRef", "Step",
           "discover", "load_case", "load_cases", "parse_case", "validate_all"]
