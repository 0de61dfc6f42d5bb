"""Fault point names cannot be misspelt silently (issue 21).

A point is a line ``if FAULTS.armed: await FAULTS.reach(NAME)`` in the broker. When the name
was a string literal, a typo made a point that no case could ever arm and that nothing
reported: the case arming the real name waited for a point that never came. Now the broker
reaches a point only by its constant from broker_impl.faults, so a misspelt constant is an
ImportError when the module loads; arming an unknown name is a ValueError
(test_fault_point_arming.py); and the scan below checks the broker's code itself: every
reach() names a constant, and every point is reached somewhere (a point nothing reaches is
dead). The scan is tried on broken code too, so it is known to fail when it must.
"""
from __future__ import annotations

import ast
import importlib
import sys
import textwrap
from pathlib import Path

import pytest

import broker_impl
from broker_impl import faults

BROKER = Path(broker_impl.__file__).parent
#: The point constants: the names of broker_impl.faults whose value is a point.
CONSTANTS = {name: value for name, value in vars(faults).items()
             if name.isupper() and isinstance(value, str) and value in faults.POINTS}


def reached_points(source: str, where: str) -> tuple[set[str], list[str]]:
    """(the points a module's code reaches, what is wrong with how it names them)."""
    tree = ast.parse(source, where)
    imported = {a.asname or a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                and (node.module or "").split(".")[-1] == "faults" for a in node.names}
    reached, problems = set(), []
    for node in sorted((n for n in ast.walk(tree) if isinstance(n, ast.Call)), key=lambda n: n.lineno):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "reach"
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "FAULTS"):
            continue
        arg = node.args[0] if node.args else None
        if not (isinstance(arg, ast.Name) and arg.id in CONSTANTS and arg.id in imported):
            problems.append(f"{where}:{node.lineno}: FAULTS.reach({ast.unparse(arg) if arg else ''}) does not name a "
                            f"point constant imported from broker_impl.faults ({sorted(CONSTANTS)})")
            continue
        reached.add(CONSTANTS[arg.id])
    return reached, problems


def test_every_point_has_its_constant():
    assert set(CONSTANTS.values()) == set(faults.POINTS)
    assert all(name == value.upper() for name, value in CONSTANTS.items())


def test_the_broker_reaches_every_point_and_only_by_its_constant():
    reached: set[str] = set()
    problems: list[str] = []
    for path in sorted(BROKER.rglob("*.py")):
        if path.parent.name == "faults":
            continue  # where reach() is defined
        got, bad = reached_points(path.read_text(), str(path.relative_to(BROKER)))
        reached |= got
        problems += bad
    assert not problems, "\n".join(problems)
    assert reached == set(faults.POINTS), f"points nothing reaches: {sorted(set(faults.POINTS) - reached)}"


def test_the_scan_finds_a_literal_and_a_point_nobody_reaches():
    source = textwrap.dedent("""
        from ..faults import AFTER_COMPLETE, FAULTS

        async def end(md):
            if FAULTS.armed:
                await FAULTS.reach("after_complte", md)
            await FAULTS.reach(AFTER_COMPLETE, md)
            await FAULTS.reach(AFTER_ALL_MARKERS, md)
    """)
    reached, problems = reached_points(source, "mutant.py")
    assert reached == {"after_complete"}
    assert len(problems) == 2
    assert "'after_complte'" in problems[0] and "AFTER_ALL_MARKERS" in problems[1]  # literal; not imported


def test_a_misspelt_point_constant_fails_when_its_module_loads(tmp_path, monkeypatch):
    (tmp_path / "misspelt_point.py").write_text(textwrap.dedent("""
        from broker_impl.faults import AFTER_COMPLTE, FAULTS

        async def complete(txn):
            if FAULTS.armed:
                await FAULTS.reach(AFTER_COMPLTE, txn)
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ImportError, match="AFTER_COMPLTE"):
        importlib.import_module("misspelt_point")
    sys.modules.pop("misspelt_point", None)


def test_a_point_is_defined_once():
    with pytest.raises(ValueError, match="defined twice"):
        faults._point("after_complete", "again")
    assert faults.POINTS["after_complete"] == "Complete* appended to the txn log (and replicated)"
