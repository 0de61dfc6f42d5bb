"""`kconform diff`: every API version two targets both speak, probed on both, compared field by field.

How a run goes:
1. both targets start (at once: Apache Kafka takes seconds), with the same broker configs
   (`DIFF_BROKER_CONFIGS`: one node's worth of internal-topic partitions, no rebalance delay)
   and a data topic that gets three records, so Fetch and ListOffsets have something to read;
2. for every API both advertise (ApiVersions) and the codec knows, at every version both
   advertise, the probes of recipes.py run on each target -- `jobs` probes at a time per
   target, each on its own names, so their order does not matter;
3. each probe's steps are compared, response by response, after conformance/compare/wire.py
   normalised them; a difference is *explained* when known.py lists it (with its reason), else
   it fails the probe;
4. DIR/results.jsonl gets two rows per probe (the reference's, then the target's with its
   diff), in the same format as `kconform run`, so Allure and Spark show them; DIR/coverage.json
   says, per API key, which versions each target advertises and which were compared.
"""
from __future__ import annotations

import concurrent.futures as cf
import json
import os
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from broker_impl.codec import API_BY_KEY

from ..compare import normalise_response, structural_diff
from ..compare.wire import node_names
from ..raw import send_request
from ..refs import RefError, resolve, step_lookup
from ..results import Check, NotApplicable, ResultsFile, Row, Verdict
from ..runner import new_run_id
from ..runner.row import now_iso
from ..targets import TopicSpec, Topology, make_target
from .generate import BATCH_TIMESTAMP, ZERO_UUID, Names, with_unknown_tags
from .known import explain
from .recipes import Probe, client_versions, probes

DATA_TOPIC = "wd-data"
#: The same on every target (those that take broker configs): what the apache-kafka target sets
#: by default, so the embedded broker's internal topics look like Kafka's.
DIFF_BROKER_CONFIGS = {
    "num.partitions": "1", "default.replication.factor": "1",
    "offsets.topic.num.partitions": "6", "offsets.topic.replication.factor": "1",
    "transaction.state.log.num.partitions": "6", "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1", "group.initial.rebalance.delay.ms": "0",
}
#: How long one request waits for its answer (a step's retries may take longer: Step.timeout_s).
ANSWER_S = 5.0
#: How long a step with `until` waits for the state it waits for (Kafka completes a transaction
#: ended just after a restart only once its markers' destination is known again: seconds).
UNTIL_S = 60.0


@dataclass
class DiffOptions:
    target: str
    reference: str = "apache-kafka"
    results_dir: Path = Path("results/diff")
    apis: list[str] | None = None       # None: every API both advertise
    versions: str = "all"               # all | max | ends (the lowest and the highest)
    variants: bool = True               # False: the valid request only
    jobs: int = 4                       # probes at once on each target
    target_options: dict[str, dict] = field(default_factory=dict)
    run_id: str = ""


class Side:
    """One started target, as the probes see it: where to send, and its per-target context."""

    def __init__(self, name: str, target, address: tuple[str, int]) -> None:
        self.name = name
        self.target = target
        self.address = address
        self.ctx: dict[str, Any] = {"topic_id": ZERO_UUID}  # the data topic's id
        self.nodes = node_names(target.node_ids())

    def ranges(self) -> dict[int, tuple[int, int]]:
        return dict(self.target.api_ranges)


def _start(name: str, options: dict, workdir: Path) -> Side:
    target = make_target(name, **options)
    target.start(Topology(nodes=1, topics=[TopicSpec(DATA_TOPIC, 1)]), dict(DIFF_BROKER_CONFIGS), workdir)
    return Side(name, target, target.live_addresses()[0][1])


def prepare(side: Side, versions: dict[str, int]) -> None:
    """The data topic's id (Metadata) and its three records (Produce); the internal topics."""
    mv = versions.get("Metadata", 0)
    out = send_request(side.address, "Metadata", mv, {"topics": [{"name": DATA_TOPIC, "topic_id": ZERO_UUID}],
                                                     "allow_auto_topic_creation": False})
    if out.ok:
        for t in out.data["response"].get("topics", []):
            if t.get("name") == DATA_TOPIC:
                side.ctx["topic_id"] = t.get("topic_id", ZERO_UUID)
    pv = versions["Produce"]
    topic = {"topic_id": side.ctx["topic_id"]} if pv >= 13 else {"name": DATA_TOPIC}
    batch = {"batch": {"values": ["d0", "d1", "d2"], "keys": ["k0", "k1", "k2"], "timestamp": BATCH_TIMESTAMP}}
    out = send_request(side.address, "Produce", pv, {
        "acks": -1, "timeout_ms": 5000,
        "topic_data": [{**topic, "partition_data": [{"index": 0, "records": batch}]}]},
        timeout_s=30, retry=("NOT_LEADER_OR_FOLLOWER", "LEADER_NOT_AVAILABLE", "UNKNOWN_TOPIC_OR_PARTITION"))
    if not out.ok or out.data["error"] != "NONE":
        raise RuntimeError(f"{side.name}: could not write the data topic: {out.data if out.ok else out.error}")
    # The internal topics exist before any probe runs, as they do on a cluster clients used: a
    # probe listing every topic must not see them appear at a moment that depends on the order.
    side.target.group_coordinator("wd-prewarm")
    if "transactions" in side.target.capabilities:
        side.target.transaction_coordinator("wd-prewarm")


# ============================================================================ one probe
def run_probe(side: Side, probe: Probe, start: int = 0, stop: int | None = None,
              data: dict[str, dict] | None = None) -> list[dict]:
    """Send the probe's steps [start:stop] to one target; one record per step (what came back).
    `data`: the responses of earlier steps by step id (filled in here), for references."""
    records: list[dict] = []
    data = {"ctx": side.ctx} if data is None else data
    data.setdefault("ctx", side.ctx)
    for i, step in enumerate(probe.steps[start:stop], start=start):
        rec: dict[str, Any] = {"step": i, "id": step.id, "actor": "raw", "op": "request", "api": step.api,
                               "version": step.version}
        try:
            body = resolve(step.body, step_lookup(data.get))
        except RefError as exc:
            rec.update(ok=False, error={"name": "NOT_SENT", "message": str(exc)})
            records.append(rec)
            continue
        edit = (lambda f, s=step: with_unknown_tags(f, s.api, s.version)) if step.unknown_tags else None
        deadline = time.monotonic() + UNTIL_S
        while True:
            out = send_request(side.address, step.api, step.version, body, step.timeout_s, retry=step.retry,
                               edit_frame=edit, attempt_s=ANSWER_S)
            if step.until is None or not out.ok or _at(out.data["response"], step.until[0]) in step.until[1] \
                    or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        if out.ok:
            data[step.id] = out.data
            rec.update(ok=True, data={"response": out.data["response"]})
        else:
            rec.update(ok=False, error={"name": out.error.name, "message": out.error.message})
        records.append(rec)
    return records


def _at(tree: Any, path: str) -> Any:
    for part in path.split("."):
        if isinstance(tree, list) and part.isdigit() and int(part) < len(tree):
            tree = tree[int(part)]
        elif isinstance(tree, dict):
            tree = tree.get(part)
        else:
            return None
    return tree


def _keep(probe: Probe) -> Callable[[str, Any], bool]:
    """Lists that name every topic, group or transaction of the cluster keep this probe's own
    and those no probe made: the other probes' run at the same time, at their own pace."""
    own = {probe.names.topic, probe.names.new_topic, probe.names.group, probe.names.txn, probe.names.unknown}

    def keep(_field: str, value: Any) -> bool:
        return not (isinstance(value, str) and value.startswith("wd-")) or value in own

    return keep


def comparable(records: list[dict], probe: Probe, nodes: dict[int, str] | None = None) -> dict:
    """What is compared of a probe on one target: per step, the error (closed, timed out...) or
    the normalised response (`nodes`: the target's node ids by name, compare/wire.py)."""
    keep = _keep(probe)
    out = {}
    for r in records:
        label = f"{r['id']}({r['api']} v{r['version']})"
        if r["ok"]:
            out[label] = {"response": normalise_response(r["data"]["response"], keep, nodes)}
        else:
            out[label] = {"no_response": r["error"]["name"]}
    return out


# ============================================================================ the run
@dataclass
class DiffResult:
    rows: list[Row]
    coverage: list[dict]
    unexplained: int
    explained: int

    @property
    def errors(self) -> list[Row]:
        """The target's rows kconform could not run (a request it could not build)."""
        return [r for r in self.rows if r.verdict is Verdict.ERROR and r.reference_target is not None]


def plan(ref: dict[int, tuple[int, int]], act: dict[int, tuple[int, int]], opts: DiffOptions
         ) -> tuple[list[tuple[str, int]], list[dict]]:
    """The (API, version) pairs to probe, and the coverage table (every key either advertises)."""
    pairs = []
    coverage = []
    for key in sorted(set(ref) | set(act)):
        api = API_BY_KEY.get(key)
        name = api.name if api else f"ApiKey{key}"
        row = {"api_key": key, "api": name, "reference": list(ref[key]) if key in ref else None,
               "target": list(act[key]) if key in act else None, "compared": [], "why_not": None}
        coverage.append(row)
        if key not in ref or key not in act:
            row["why_not"] = "advertised by one target only"
            continue
        if api is None:
            row["why_not"] = "the codec has no schema for this API key"
            continue
        lo = max(ref[key][0], act[key][0], api.min_version)
        hi = min(ref[key][1], act[key][1], api.max_version)
        if lo > hi:
            row["why_not"] = "no version both targets and the codec speak"
            continue
        if opts.apis and name not in opts.apis:
            row["why_not"] = "not asked for (--api)"
            continue
        vs = list(range(lo, hi + 1))
        if opts.versions == "max":
            vs = [hi]
        elif opts.versions == "ends":
            vs = sorted({lo, hi})
        row["compared"] = vs
        pairs += [(name, v) for v in vs]
    return pairs, coverage


def run_diff(opts: DiffOptions, log: Callable[[str], None] = lambda s: None) -> DiffResult:
    opts.results_dir.mkdir(parents=True, exist_ok=True)
    run_id = opts.run_id or new_run_id()
    work = opts.results_dir / "work"
    shutil.rmtree(work, ignore_errors=True)  # a target's data of an earlier run must not be reused
    sides: dict[str, Side] = {}
    errors: list[BaseException] = []

    def start(name: str) -> None:
        try:
            sides[name] = _start(name, opts.target_options.get(name, {}), work / name.replace("@", "-"))
        except BaseException as exc:  # noqa: BLE001 - re-raised below, after the other side stopped
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(n,)) for n in (opts.reference, opts.target)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        if errors:
            raise errors[0]
        ref, act = sides[opts.reference], sides[opts.target]
        versions = client_versions([ref.ranges(), act.ranges()])
        for side in (ref, act):
            prepare(side, versions)
        pairs, coverage = plan(ref.ranges(), act.ranges(), opts)
        all_probes: list[Probe] = []
        for api, version in pairs:
            made = probes(api, version, versions, _names_for(api, version))
            all_probes += made if opts.variants else made[:1]
        log(f"{len(all_probes)} probes over {len(pairs)} API versions, {opts.jobs} at a time on each target")
        t0 = time.monotonic()
        got, skipped = _probe_all(all_probes, (ref, act), opts.jobs, log)
        log(f"probed in {time.monotonic() - t0:.1f} s")
        rows, unexplained, explained = [], 0, 0
        started = now_iso()
        for i, p in enumerate(all_probes):
            rr, ar = got[(ref.name, i)], got[(act.name, i)]
            diff = [] if i in skipped else structural_diff(comparable(rr, p, ref.nodes), comparable(ar, p, act.nodes))
            for d in diff:
                reason = explain(act.name, p, d)
                if reason:
                    d["explained"] = reason
            unexplained += any("explained" not in d for d in diff)
            explained += bool(diff) and all("explained" in d for d in diff)
            rows += _rows(run_id, started, p, ref, rr, act, ar, diff, skipped.get(i))
            for row in coverage:
                if row["api"] == p.api:
                    row.setdefault("probes", 0)
                    row["probes"] += 1
                    row.setdefault("differing", 0)
                    row["differing"] += any("explained" not in d for d in diff)
        ResultsFile(opts.results_dir).write(rows)
        (opts.results_dir / "coverage.json").write_text(json.dumps(coverage, indent=1))
        (opts.results_dir / "run.json").write_text(json.dumps({
            "run_id": run_id, "kind": "wirediff", "targets": [ref.name, act.name], "reference_target": ref.name,
            "target_versions": {ref.name: ref.target.version, act.name: act.target.version},
            "client_versions": versions, "probes": len(all_probes), "finished_at": now_iso()}, indent=1))
        return DiffResult(rows, coverage, unexplained, explained)
    finally:
        for side in sides.values():
            side.target.stop()
        if not os.environ.get("KCONFORM_KEEP_WORK"):
            shutil.rmtree(work, ignore_errors=True)


def _probe_all(all_probes: list[Probe], sides: tuple[Side, ...], jobs: int, log) -> dict[tuple[str, int], list]:
    """Every probe on every side, `jobs` at a time per side. Probes that span a restart run up to
    it, then both targets restart (every node), then the probes go on from there."""
    data: dict[tuple[str, int], dict] = {}
    with cf.ThreadPoolExecutor(len(sides) * jobs) as pool:
        def submit(i: int, side: Side, start: int = 0, stop: int | None = None):
            d = data.setdefault((side.name, i), {})
            return pool.submit(run_probe, side, all_probes[i], start, stop, d)

        futures = {(side.name, i): submit(i, side, 0, p.restart_at)
                   for i, p in enumerate(all_probes) for side in sides}
        got = {k: f.result() for k, f in futures.items()}
        later = [i for i, p in enumerate(all_probes) if p.restart_at is not None]
        skipped: dict[int, str] = {}
        if later:
            log(f"restarting both targets for {len(later)} probe(s)")
            why = [r for r in pool.map(_restart, sides) if r]
            if why:
                skipped = {i: why[0] for i in later}
            else:
                futures = {(side.name, i): submit(i, side, all_probes[i].restart_at) for i in later for side in sides}
                for k, f in futures.items():
                    got[k] += f.result()
    return got, skipped


def _restart(side: Side) -> str | None:
    """Restart every node of the side's target; why not, where it cannot."""
    try:
        for node in side.target.node_ids():
            side.target.restart(node)
    except NotApplicable as exc:
        return exc.reason
    return None


def _names_for(api: str, version: int) -> Callable[[int], Names]:
    def names(i: int) -> Names:
        tag = f"{api.lower()}-v{version}-{i}"
        return Names(DATA_TOPIC, f"wd-{tag}", f"wd-g-{tag}", f"wd-t-{tag}", f"wd-u-{tag}")
    return names


# ============================================================================ rows
def _rows(run_id: str, started: str, p: Probe, ref: Side, rr: list[dict], act: Side, ar: list[dict],
          diff: list[dict], not_applicable: str | None = None) -> list[Row]:
    """Two results rows (docs/results-schema.md): the reference's and the target's."""
    request = {"steps": [{"id": s.id, "api": s.api, "version": s.version, "body": s.body} for s in p.steps]}
    out = []
    for side, records, d in ((ref, rr, None), (act, ar, diff)):
        checks = []
        if d is not None:
            for step in sorted({x["path"].split(".")[0] for x in d}):
                mine = [x for x in d if x["path"].split(".")[0] == step]
                bad = [x for x in mine if "explained" not in x]
                checks.append(Check(f"{step} answers as {ref.name} does", not bad,
                                    "; ".join(f"{x['path']}: {ref.name} {_short(x['reference'])}, "
                                              f"{side.name} {_short(x['actual'])}"
                                              + (f" (known: {x['explained']})" if "explained" in x else "")
                                              for x in mine)))
        unexplained = d is not None and any("explained" not in x for x in d)
        unbuilt = [r for r in rr + ar if not r["ok"] and r["error"]["name"] == "DRIVER_ERROR"]
        verdict = (Verdict.NOT_APPLICABLE if not_applicable else Verdict.ERROR if unbuilt
                   else Verdict.FAIL if unexplained else Verdict.PASS)
        out.append(Row(run_id=run_id, started_at=started, case=f"wirediff/{p.id}",
                       case_title=f"{p.api} v{p.version}: {_title(p)}", tags=["wirediff", p.api], scenario=[],
                       target=side.name, target_version=side.target.version, client="raw",
                       client_version="kconform codec", verdict=verdict, checks=checks,
                       outcome={"request": request, "steps": records}, diff=d,
                       reference_target=ref.name if d is not None else None,
                       reason=not_applicable or (f"kconform could not build step {unbuilt[0]['id']}: "
                                                 f"{unbuilt[0]['error']['message']}" if unbuilt else None),
                       unspecified=0))
    return out


def _title(p: Probe) -> str:
    if p.variant == "valid":
        return "the request a client sends"
    kind, _, where = p.variant.partition(":")
    text = {"empty": "empty", "null": "null", "unknown": "unknown", "zero": "zero UUID", "-1": "-1", "0": "0",
            "max": "the type's maximum"}.get(kind, kind)
    return f"{where} = {text}" + (" (not nullable: refused at parse time)" if p.violates_schema else "") \
        if where else p.variant


def _short(v: Any) -> str:
    text = json.dumps(v, default=str)
    return text if len(text) <= 120 else text[:117] + "..."
