"""What a run records: the row of one case on one target with one client, its verdict and
checks, the exceptions that decide a verdict, and DIR/results.jsonl (docs/results-schema.md).

pytest's TestReport and outcomes are the model: a `Row` is the report of one row, a `Check`
one of its checks, a `Verdict` what became of it, and a `VerdictException` (NotApplicable,
TargetUnavailable, TargetCrashed) ends a row with a verdict other than `error` the way
pytest.skip() ends a test. `ResultsFile` is the one place that writes results.jsonl and reads
it back (every writer -- `kconform run`, the pytest plugin, `kconform diff`, `kconform fuzz`
-- goes through it).

Why a leaf module (it imports nothing of kconform): the runner builds rows, the targets raise
the verdict exceptions, and reports/ reads result files -- reports must not import the runner
(a results directory copied from CI renders the same as one made here), and the targets must
not import the runner either. Each of them imports this module instead.

Compatibility: results files are read long after they were written (the matrix, the Spark
analytics over every kept run), so `Row.to_dict` writes the fields and the order the schema
documents, `Row.from_dict` reads rows of older runs (optional fields defaulted), and
`read_rows` refuses a row that lacks a required field or has an unknown verdict -- a report
that silently dropped rows would misreport conformance.

Baselines (conformance/baseline.py): a target's expectations file lists the rows known to
diverge. A row the baseline names carries the entry (`Expected`), and every row of a run gets
its `Status` -- the verdict judged against the baseline, what CI reads: `expected_fail` (fails
as known), `fail` (newly fails), `unexpected_pass` (newly passes). The verdict stays the fact
about the target; the status is what the run makes of it (`judge_status`, the one place).
"""
from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Iterable


class Verdict(enum.StrEnum):
    """What became of a row. A str: `Verdict.PASS == "pass"`, and it is written as "pass"."""

    #: Every check held.
    PASS = "pass"
    #: A check failed: a finding about the target (or the client).
    FAIL = "fail"
    #: The TARGET died or stopped answering during the case: a finding about the target.
    CRASH = "crash"
    #: The target or client cannot do what the case needs; the row's `reason` says why.
    NOT_APPLICABLE = "not_applicable"
    #: kconform itself could not run the case.
    ERROR = "error"

    @property
    def ran(self) -> bool:
        """The case ran to its checks (pass or fail): the row's outcome means something."""
        return self in RAN

    @property
    def diverges(self) -> bool:
        """A divergence of the target from the reference (fail, crash); an `error` is ours."""
        return self in DIVERGING

    @property
    def bad(self) -> bool:
        """A row `kconform run` exits non-zero for."""
        return self in BAD


VERDICTS: tuple[Verdict, ...] = tuple(Verdict)
RAN = frozenset({Verdict.PASS, Verdict.FAIL})
DIVERGING = frozenset({Verdict.FAIL, Verdict.CRASH})
BAD = frozenset({Verdict.FAIL, Verdict.CRASH, Verdict.ERROR})


class Status(enum.StrEnum):
    """A row's verdict judged against its target's baseline (conformance/baseline.py): what a CI
    reports. Without a baseline entry a pass is `pass` and a fail or crash is `fail`."""

    #: Every check held, and the baseline expects no failure (or allows a pass: a flaky row).
    PASS = "pass"
    #: Newly fails: a fail or crash the baseline does not expect -- or not this way (another
    #: verdict, or a failed check the entry does not list).
    FAIL = "fail"
    #: Fails (or crashes) exactly as the baseline says it is known to.
    EXPECTED_FAIL = "expected_fail"
    #: Passes although the baseline expects it to fail: the entry is stale (the bug was fixed).
    UNEXPECTED_PASS = "unexpected_pass"
    NOT_APPLICABLE = "not_applicable"
    #: kconform could not run the row: never expected, whatever the baseline says.
    ERROR = "error"

    @property
    def bad(self) -> bool:
        """A row a baselined `kconform run` exits non-zero for."""
        return self in STATUS_BAD


STATUS_BAD = frozenset({Status.FAIL, Status.UNEXPECTED_PASS, Status.ERROR})
#: The verdicts a baseline entry may expect (an `error` is kconform's own failure: never expected;
#: `pass` only beside a failing verdict, for a row known to be flaky).
EXPECTABLE = (Verdict.FAIL, Verdict.CRASH, Verdict.PASS)


@dataclass
class Expected:
    """The baseline entry a row matched: the verdicts it may have (fail, crash; pass too for a
    flaky row), the failed checks known (empty: any), why, and where it is tracked."""

    verdicts: list[Verdict]
    reason: str
    link: str = ""
    #: Names of the failed checks known; a failure of any other check is a new divergence.
    checks: list[str] = field(default_factory=list)
    #: The baseline file the entry comes from.
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"verdicts": [v.value for v in self.verdicts], "reason": self.reason, "link": self.link}
        if self.checks:
            out["checks"] = list(self.checks)
        if self.source:
            out["source"] = self.source
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Expected":
        return cls([Verdict(v) for v in d.get("verdicts") or []], d.get("reason") or "", d.get("link") or "",
                   list(d.get("checks") or []), d.get("source") or "")


def judge_status(verdict: Verdict, failed_checks: Iterable[str], expected: Expected | None) -> tuple[Status, str]:
    """(status, why) of a row against its baseline entry (None: the baseline has none)."""
    if verdict is Verdict.ERROR:
        return Status.ERROR, ""
    if verdict is Verdict.NOT_APPLICABLE:
        return Status.NOT_APPLICABLE, ""
    if expected is None:
        return (Status.PASS, "") if verdict is Verdict.PASS else (Status.FAIL, "not in the baseline")
    wanted = "/".join(v.value for v in expected.verdicts if v is not Verdict.PASS) or "fail"
    if verdict is Verdict.PASS:
        if Verdict.PASS in expected.verdicts:
            return Status.PASS, "the baseline allows a pass (flaky)"
        return Status.UNEXPECTED_PASS, f"passes; the baseline expects {wanted}: {expected.reason}"
    if verdict not in expected.verdicts:
        does = "crashes" if verdict is Verdict.CRASH else "fails"
        return Status.FAIL, f"{does}; the baseline expects {wanted}"
    new = [c for c in failed_checks if c not in expected.checks] if expected.checks else []
    if new:
        return Status.FAIL, f"fails a check the baseline does not list: {'; '.join(new)}"
    return Status.EXPECTED_FAIL, expected.reason


def status_of(row: dict[str, Any]) -> tuple[Status, str]:
    """judge_status for a row as results.jsonl holds it (reports read dicts)."""
    expected = Expected.from_dict(row["expected"]) if row.get("expected") else None
    failed = [c["name"] for c in row.get("checks") or [] if not c.get("passed")]
    return judge_status(Verdict(row["verdict"]), failed, expected)


# ============================================================================ verdict exceptions
class VerdictException(Exception):
    """Raised while a row runs, it ends the row with `verdict` and `reason` (the way pytest's
    outcome exceptions end a test); any other exception ends it as `error`."""

    verdict: ClassVar[Verdict]

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class NotApplicable(VerdictException):
    """This target (or client) cannot do what the case asks; `reason` says why."""

    verdict = Verdict.NOT_APPLICABLE


class TargetUnavailable(VerdictException):
    """The target cannot start on this machine (missing java, binary, ...): the message says
    what to install. Its rows are not applicable here."""

    verdict = Verdict.NOT_APPLICABLE


class TargetCrashed(VerdictException):
    """The target died or stopped answering (Target.health) -- seen after step `step` (None:
    at the end of the case). The case stops there: nothing later can mean anything."""

    verdict = Verdict.CRASH

    def __init__(self, step: int | str | None, reason: str) -> None:
        super().__init__(reason)
        self.step = step

    def describe(self) -> str:
        """The row's reason: after which step the target was seen dead, and why."""
        where = f"after step {self.step}" if self.step is not None else "by the end of the case"
        return f"the target died {where}: {self.reason}"


# ============================================================================ the row
@dataclass
class Check:
    """One of a row's checks: an invariant of the case, a step's expectation, an anomaly kind
    of a workload. `unspecified`: the case specifies nothing for this row's client (the check
    holds and shows what the client did)."""

    name: str
    passed: bool
    message: str = ""
    unspecified: bool = False

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "passed": self.passed, "message": self.message}
        if self.unspecified:
            out["unspecified"] = True
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Check":
        return cls(d["name"], bool(d.get("passed")), d.get("message") or "", bool(d.get("unspecified")))


#: A failing row's reason when the case names the Kafka bug behind it (Row.known_reference_bug).
KNOWN_REFERENCE_BUG_PREFIX = "known Kafka bug: "
#: A failing workload row's reason when the transcript proves its anomalies a client's (Row.client_flaw).
CLIENT_FLAW_PREFIX = "client flaw (proved on the wire): "

#: Fields every row has; a row without one is refused (read_rows).
REQUIRED = ("run_id", "case", "target", "client", "verdict")


@dataclass
class Row:
    """One case on one target with one client (docs/results-schema.md). The fields are in the
    order results.jsonl writes them."""

    run_id: str
    started_at: str
    case: str
    case_title: str
    target: str
    client: str
    tags: list[str] = field(default_factory=list)
    scenario: list[str] = field(default_factory=list)
    target_version: str = ""
    client_version: str = ""
    verdict: Verdict = Verdict.ERROR
    checks: list[Check] = field(default_factory=list)
    #: Normalised observations (conformance/compare): free-form, compared field by field.
    outcome: dict[str, Any] = field(default_factory=dict)
    diff: list[dict] | None = None
    reference_target: str | None = None
    duration_s: float = 0.0
    reason: str | None = None
    artifacts: dict[str, Any] = field(default_factory=dict)
    known_difference: str | None = None
    #: A workload row's summary (docs/workload.md); None (not written) for any other row.
    workload: dict[str, Any] | None = None
    #: An application row's summary (conformance/apps, docs/applications.md): its figures, its
    #: bounces and when they landed, the error codes per API on the wire; None (not written) else.
    application: dict[str, Any] | None = None
    #: How many checks say `unspecified`; None (not written) when the case never got to its checks.
    unspecified: int | None = None
    #: On an Apache Kafka row: the Kafka bug (KAFKA-NNNNN) the case says makes Kafka fail it
    #: (its `known_reference_bug`, or the key of a broker regression case); None (not written)
    #: elsewhere. A failing row with it is that bug of the release, not a finding.
    known_reference_bug: str | None = None
    #: On a workload row whose every anomaly the transcript proves to be a client's protocol
    #: violation (conformance/history/client_flaws.py): `<client> <flaw>`, e.g. `sarama
    #: reused_sequence`; None (not written) elsewhere. A failing row with it is a finding about
    #: that client, not about the broker.
    client_flaw: str | None = None
    #: The baseline entry the row matched (None: none, or no baseline; not written then).
    expected: Expected | None = None
    #: The verdict judged against the baseline (`judge`d by apply_baseline); None (not written)
    #: for rows of writers that judge none (older runs, kconform diff, kconform fuzz).
    status: Status | None = None
    #: The security protocol the row's clients and target spoke (`kconform run --security`,
    #: conformance/security.py), e.g. SASL_PLAINTEXT; None (not written): PLAINTEXT.
    security_protocol: str | None = None
    #: The consumer group protocol the row's consumers used when not classic (`kconform run
    #: --group-protocol consumer`, conformance/group_protocol.py); None (not written): classic.
    group_protocol: str | None = None

    #: The fields written in the order of the schema (and of the rows the runner always wrote).
    ORDER: ClassVar[tuple[str, ...]] = (
        "run_id", "started_at", "case", "case_title", "tags", "scenario", "target", "target_version", "client",
        "client_version", "verdict", "checks", "outcome", "diff", "reference_target", "duration_s", "reason",
        "artifacts", "known_difference", "workload", "application", "unspecified", "known_reference_bug", "client_flaw",
        "expected", "status", "security_protocol", "group_protocol")
    #: Written only when set.
    OPTIONAL: ClassVar[frozenset[str]] = frozenset({"unspecified", "workload", "application", "known_reference_bug",
                                                    "client_flaw", "expected", "status", "security_protocol",
                                                    "group_protocol"})

    @property
    def failed_checks(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]

    def judge(self, checks: list[Check]) -> None:
        """The row ran to its checks: pass when every one holds, else fail (with the case's
        documented difference for this target as the reason, when it has one)."""
        self.checks = checks
        self.unspecified = sum(1 for c in checks if c.unspecified)
        self.verdict = Verdict.PASS if all(c.passed for c in checks) else Verdict.FAIL
        if self.verdict is Verdict.FAIL and self.known_reference_bug:
            self.reason = f"{KNOWN_REFERENCE_BUG_PREFIX}{self.known_reference_bug}"
        elif self.verdict is Verdict.FAIL and self.client_flaw:
            self.reason = f"{CLIENT_FLAW_PREFIX}{self.client_flaw}"
        elif self.verdict is Verdict.FAIL and self.known_difference:
            self.reason = f"known difference: {self.known_difference}"

    def apply_baseline(self, expected: Expected | None) -> Status:
        """Judge the row against its baseline entry (None: the baseline names it not): sets
        `expected` and `status`."""
        self.expected = expected
        self.status = judge_status(self.verdict, [c.name for c in self.failed_checks], expected)[0]
        return self.status

    def status_note(self) -> str:
        """Why the row has its status (judge_status's reason)."""
        return judge_status(self.verdict, [c.name for c in self.failed_checks], self.expected)[1]

    def end(self, exc: VerdictException) -> None:
        """A verdict exception ended the row."""
        self.verdict = exc.verdict
        self.reason = exc.describe() if isinstance(exc, TargetCrashed) else exc.reason

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in self.ORDER:
            value = getattr(self, name)
            if name in self.OPTIONAL and value is None:
                continue
            if name == "checks":
                value = [c.to_dict() for c in value]
            elif name in ("verdict", "status"):
                value = value.value
            elif name == "expected":
                value = value.to_dict()
            out[name] = value
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), default=str)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Row":
        """A row as written by any kconform (older rows lack optional fields); ValueError when a
        required field is missing or the verdict is unknown."""
        missing = [k for k in REQUIRED if k not in d]
        if missing:
            raise ValueError(f"missing {', '.join(missing)}")
        try:
            verdict = Verdict(d["verdict"])
        except ValueError:
            raise ValueError(f"verdict {d['verdict']!r} is not one of {[v.value for v in VERDICTS]}") from None
        try:
            status = Status(d["status"]) if d.get("status") is not None else None
        except ValueError:
            raise ValueError(f"status {d['status']!r} is not one of {[s.value for s in Status]}") from None
        known = {k: d[k] for k in cls.ORDER if k in d and k not in ("checks", "verdict", "expected", "status")}
        return cls(**{**known, "case_title": d.get("case_title") or d["case"], "started_at": d.get("started_at", ""),
                      "verdict": verdict, "checks": [Check.from_dict(c) for c in d.get("checks") or []],
                      "artifacts": d.get("artifacts") or {}, "outcome": d.get("outcome") or {},
                      "expected": Expected.from_dict(d["expected"]) if d.get("expected") else None,
                      "status": status})


# ============================================================================ results.jsonl
class ResultsFile:
    """DIR/results.jsonl: one row a line. The only writer of the file, and its reader."""

    NAME = "results.jsonl"

    def __init__(self, run_dir: str | Path) -> None:
        self.path = Path(run_dir) / self.NAME

    def start(self) -> None:
        """An empty file: a run begins (rows of an earlier run in the directory are gone)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("", encoding="utf-8")

    def append(self, row: Row) -> None:
        """One finished row, at once (an interrupted run keeps what it did). Callers that
        append from several threads hold their own lock."""
        with open(self.path, "a", encoding="utf-8") as out:
            out.write(row.to_json() + "\n")

    def write(self, rows: Iterable[Row]) -> None:
        """The whole file, these rows in this order."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "w", encoding="utf-8") as out:
            for row in rows:
                out.write(row.to_json() + "\n")

    def exists(self) -> bool:
        return self.path.is_file()

    def read_dicts(self) -> list[dict[str, Any]]:
        """The rows as written, each checked (Row.from_dict) and with the optional fields an
        older row may lack defaulted -- what reports/ reads: JSON of any kconform release."""
        rows: list[dict[str, Any]] = []
        with open(self.path, encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    raw = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{self.path}:{lineno}: not JSON: {exc}") from None
                try:
                    typed = Row.from_dict(raw)
                except ValueError as exc:
                    raise ValueError(f"{self.path}:{lineno}: {exc}") from None
                for name in READ_DEFAULTS:
                    raw.setdefault(name, getattr(typed, name))
                raw["artifacts"] = typed.artifacts
                rows.append(raw)
        return rows

    def read(self) -> list[Row]:
        """The rows, typed."""
        return [Row.from_dict(d) for d in self.read_dicts()]


#: The fields read_dicts fills in when a row of an older run lacks them. `known_difference` is
#: not among them: reports/matrix.py tells a row recorded before the runner wrote it (and takes
#: the case library's) from a row that has none.
READ_DEFAULTS = ("case_title", "tags", "target_version", "client_version", "checks", "outcome", "diff",
                 "reference_target", "duration_s", "reason")
