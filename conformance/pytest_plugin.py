"""pytest plugin: the conformance cases as parametrised tests.

    pytest cases --kconform-target embedded --kconform-client confluent [--kconform-case 'txn/*']
           [--kconform-results DIR]
    pytest cases/txn/basic_commit.yaml --kconform-target embedded -k java

Each case x target x client is one test with the id `case[target-client]`
(`txn/basic_commit[embedded-confluent]`), collected from the case files pytest is pointed at
(or, pointed elsewhere, from every selected case): pass when every check holds, fail with the failed
checks and the diff against the reference target, skip when not applicable (with the reason).
With allure-pytest active, every case step becomes an allure step, and the outcome, the diff
and the proxy transcript are attached.

The rows go to DIR/results.jsonl exactly as `kconform run` writes them (runner.RunRecord: each
diffed against the reference target's row, which is collected first).

Registered as the `kconform` pytest11 entry point, so it is loaded in every pytest session of
an environment where kconform is installed: it does NOTHING unless a `--kconform-*` option is
given (no collection, no targets started). When active, the session runs only the conformance
tests (other collected tests are deselected) unless --kconform-keep-tests is given.
"""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from conformance.results import Row, Verdict

OPTIONS = ("kconform_target", "kconform_client", "kconform_case", "kconform_tag")
_STATE_KEY = pytest.StashKey[dict]() if hasattr(pytest, "StashKey") else None


def pytest_addoption(parser) -> None:
    g = parser.getgroup("kconform", "Kafka conformance cases (kconform)")
    g.addoption("--kconform-target", action="append", default=None, metavar="NAME",
                help="run the conformance cases on this target (repeatable; activates the plugin)")
    g.addoption("--kconform-client", action="append", default=None, metavar="NAME",
                help="client to drive (repeatable; default every installed client)")
    g.addoption("--kconform-case", action="append", default=None, metavar="GLOB", help="case id glob (repeatable)")
    g.addoption("--kconform-tag", action="append", default=None, metavar="TAG", help="only cases with this tag")
    g.addoption("--kconform-results", default=None, metavar="DIR",
                help="where results.jsonl and artifacts go (default: a temporary directory)")
    g.addoption("--kconform-fresh", action="store_true", default=False, help="fresh target per case run")
    g.addoption("--kconform-keep-tests", action="store_true", default=False,
                help="keep the session's other tests next to the conformance tests")


def _active(config) -> bool:
    return any(config.getoption(o, default=None) for o in OPTIONS)


class KconformItem(pytest.Item):
    def __init__(self, *, case, target: str, client: str, **kw) -> None:
        super().__init__(**kw)
        self.case = case
        self.target_name = target
        self.client = client
        for tag in case.tags:
            safe = tag.replace("-", "_")
            self.add_marker(getattr(pytest.mark, f"kconform_{safe}"))

    def runtest(self) -> None:
        from conformance.runner import run_one

        state = self.config.stash[_STATE_KEY]
        slot = state["slots"][self.target_name]
        row = run_one(self.case, slot, self.client, state["ctx"], state["fresh"], state["shared"])
        state["record"].add(row)  # diffed when the reference's row (collected first) is there
        self.user_properties.append(("kconform_verdict", str(row.verdict)))
        _allure_report(row, state["dir"])
        if row.verdict is Verdict.NOT_APPLICABLE:
            pytest.skip(f"not applicable: {row.reason}")
        if row.verdict in (Verdict.ERROR, Verdict.CRASH):  # crash: the target died, not the case
            raise KconformError(f"{self.case.id} on {self.target_name} with {self.client}: {row.verdict}: "
                                f"{row.reason}")
        if row.verdict is Verdict.FAIL:
            raise KconformFailure(row)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, KconformFailure):
            return excinfo.value.describe()
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        return Path(self.case.path), None, f"{self.case.id}[{self.target_name}-{self.client}]"


class KconformFailure(Exception):
    def __init__(self, row: Row) -> None:
        super().__init__(row.case)
        self.row = row

    def describe(self) -> str:
        from conformance.compare import render

        r = self.row
        lines = [f"{r.case} ({r.case_title}) failed on {r.target} with {r.client}:"]
        lines += [f"  FAILED {c.name}: {c.message}" for c in r.failed_checks]
        if r.reason:
            lines.append(f"  note: {r.reason}")
        if r.diff:
            lines.append(f"differences from {r.reference_target}:")
            lines.append(render(r.diff[:40], r.reference_target, r.target))
        return "\n".join(lines)


class KconformError(Exception):
    pass


def _items(parent, state: dict, cases) -> list["KconformItem"]:
    """One item per case x target x client; the reference target's item of a case comes before
    the others (they are diffed against its row)."""
    from conformance.runner.runner import case_clients

    targets = sorted(state["targets"], key=lambda t: t != state["reference"])
    return [KconformItem.from_parent(parent, name=f"{case.id}[{target}-{client}]", case=case, target=target,
                                     client=client)
            for case in cases for target in targets for client in case_clients(case, state["clients"])]


class KconformCaseFile(pytest.File):
    """A case file pytest walked into (`pytest cases/txn --kconform-target embedded`)."""

    def collect(self):
        case = self.config.stash[_STATE_KEY]["by_path"].get(self.path.resolve())
        return _items(self, self.config.stash[_STATE_KEY], [case] if case is not None else [])


class KconformCollector(pytest.Collector):
    """Every selected case, when pytest was pointed elsewhere (e.g. at tests/)."""

    def collect(self):
        return _items(self, self.config.stash[_STATE_KEY], self.config.stash[_STATE_KEY]["cases"])


def pytest_collect_file(file_path, parent):
    if not _active(parent.config) or file_path.suffix != ".yaml" or _STATE_KEY not in parent.config.stash:
        return None
    if file_path.resolve() in parent.config.stash[_STATE_KEY]["by_path"]:
        return KconformCaseFile.from_parent(parent, path=file_path)
    return None


def pytest_configure(config) -> None:
    if not _active(config):
        return
    from conformance.dsl import load_cases
    from conformance.runner import RowContext, RunRecord, TargetSlot, default_clients, new_run_id, reference_target
    from conformance.runner.slots import SharedTargets

    targets = config.getoption("kconform_target") or ["embedded"]
    clients = config.getoption("kconform_client") or default_clients()
    cases = load_cases(config.getoption("kconform_case") or ())
    tags = config.getoption("kconform_tag")
    if tags:
        cases = [c for c in cases if set(c.tags) & set(tags)]
    results_dir = Path(config.getoption("kconform_results") or tempfile.mkdtemp(prefix="kconform-pytest-"))
    reference = reference_target(targets)
    for c in cases:
        for tag in c.tags:
            config.addinivalue_line("markers", f"kconform_{tag.replace('-', '_')}: kconform case tag {tag}")
    config.stash[_STATE_KEY] = {
        "targets": targets, "clients": clients, "cases": cases, "dir": results_dir,
        "record": RunRecord(results_dir, reference),
        "by_path": {Path(c.path).resolve(): c for c in cases},
        "fresh": config.getoption("kconform_fresh"),
        "ctx": RowContext(new_run_id(), results_dir), "reference": reference,
        "slots": {t: TargetSlot(t, {}, results_dir / "work", "auto") for t in targets},
        "shared": SharedTargets({}, results_dir / "work"),
    }


def pytest_collection_modifyitems(session, config, items) -> None:
    if not _active(config):
        return
    ours = [i for i in items if isinstance(i, KconformItem)]
    others = [i for i in items if not isinstance(i, KconformItem)]
    if not ours:
        # pytest was not pointed at the case files: every selected case, as items of their own
        ours = KconformCollector.from_parent(session, name="kconform", nodeid="kconform").collect()
        ours = [i for i in ours if _keyword_selected(config, i)]
    if others and not config.getoption("kconform_keep_tests"):
        config.hook.pytest_deselected(items=others)
        others = []
    items[:] = others + ours


def _keyword_selected(config, item) -> bool:
    """`-k` for items made after pytest's own keyword filter ran (KconformCollector's)."""
    expr = config.getoption("keyword")
    if not expr:
        return True
    from _pytest.mark.expression import Expression

    names = {item.name, item.case.id, item.target_name, item.client}
    return Expression.compile(expr).evaluate(lambda word: any(word in n for n in names))


def pytest_unconfigure(config) -> None:
    if _STATE_KEY is None or _STATE_KEY not in config.stash:
        return
    state = config.stash[_STATE_KEY]
    state["record"].finish()
    for slot in state["slots"].values():
        try:
            slot.release()
        except Exception:  # noqa: BLE001 - ending anyway
            pass
    state["shared"].stop_all()


def pytest_report_header(config):
    if not _active(config) or _STATE_KEY not in config.stash:
        return None
    s = config.stash[_STATE_KEY]
    return (f"kconform: {len(s['cases'])} cases x targets {s['targets']} x clients {s['clients']}; "
            f"results in {s['dir']}")


# ---------------------------------------------------------------------------- allure
def _allure_report(row: Row, results_dir: Path) -> None:
    """Steps and attachments for allure-pytest, when it is installed and active."""
    try:
        import allure
        from allure_commons._allure import plugin_manager
    except ImportError:
        return
    if not plugin_manager.list_name_plugin():
        return  # allure is installed but not reporting (no --alluredir)
    from conformance.compare import render

    for s in row.outcome.get("steps", []):
        label = f"step {s.get('step')}: {s.get('actor') or ''} {s.get('op')}".strip()
        status = "ok" if s.get("ok") else (s.get("error") or {}).get("name", "error")
        with allure.step(f"{label} -> {status}"):
            pass
    for c in row.checks:
        with allure.step(f"check {c.name}: {'passed' if c.passed else 'FAILED'} - {c.message}"):
            pass
    allure.attach(json.dumps(row.outcome, indent=1), name="outcome",
                  attachment_type=allure.attachment_type.JSON)
    if row.diff:
        allure.attach(render(row.diff, row.reference_target, row.target), name="diff",
                      attachment_type=allure.attachment_type.TEXT)
    transcript = row.artifacts.get("transcript")
    if transcript and (results_dir / transcript).exists():
        allure.attach.file(str(results_dir / transcript), name="transcript",
                           attachment_type=allure.attachment_type.JSON)
    for key in ("target", "client", "target_version", "client_version"):
        allure.dynamic.tag(f"{key}:{getattr(row, key)}")
