"""A run directory shaped like a real peer run: Apache Kafka as the reference, kfake and the
librdkafka mock, two clients, and every verdict the runner gives (pass, a documented and an
undocumented fail, a crash with the target's last words, not applicable, error, a pass whose
outcome differs). The checks, reasons and crash log are the runner's own wording as a real run
of the case library on these targets wrote them.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

from conformance.compare import structural_diff

REFERENCE = "apache-kafka"
TARGETS = [(REFERENCE, "4.3.1"), ("kfake", "v0.0.0-20260918054303-01f206a7e32c (franz-go v1.22.2)"),
           ("librdkafka-mock", "librdkafka 2.16.0 (confluent-kafka 2.16.1)")]
CLIENTS = [("confluent", "2.16.1"), ("java", "4.3.1")]
KFAKE_PANIC = ("panic: runtime error: invalid memory address or nil pointer dereference\n"
               "[signal SIGSEGV: segmentation violation code=0x1 addr=0x10 pc=0x6f1b2a]\n\n"
               "goroutine 41 [running]:\n"
               "github.com/twmb/franz-go/pkg/kfake.(*clientConn).read(0xc0001c2000)\n"
               "\t/root/go/pkg/mod/github.com/twmb/franz-go/pkg/kfake@v0.0.0-20260918054303-01f206a7e32c/"
               "client_conn.go:128 +0x472\n")
EMPTY_ID_CHECK = "step[1] raw.request: {data: {error: INVALID_REQUEST}}"
EMPTY_ID_DOC = ("kfake answers InitProducerId with an empty transactional.id INVALID_PRODUCER_ID_MAPPING; "
                "Kafka answers INVALID_REQUEST")
OFFSET_CHECK = "step[0] raw.request: {data: {error: NONE}}"
NA_POINTS = ("target 'kfake' cannot crash the coordinator exactly at protocol point 'after_prepare_durable': "
             "it has no fault points in its code")


def _step(i: int, actor: str, op: str, ok: bool = True, error: str | None = None, **data) -> dict:
    s = {"step": i, "actor": actor, "op": op, "ok": ok}
    if ok:
        s["data"] = data
    else:
        s["error"] = {"name": error, "code": 0}
    return s


def _rows() -> list[tuple[str, str, str, str, dict]]:
    """(case, title, target, client, fields) for every row."""
    out = []
    cases = {
        "txn/basic_commit": "A committed transaction is visible to read_committed",
        "txn/empty_transactional_id": "InitProducerId with an empty transactional.id",
        "wire/unknown_api_key": "A request with an unknown API key",
        "groups/offset_fetch_unknown_group": "OffsetFetch of a group that never committed",
        "coordinator/crash_after_prepare_commit": "Coordinator crash after PrepareCommit is durable",
        "eos/copy_commit": "Consume-transform-produce commits once",
    }
    for case, title in cases.items():
        for target, _ in TARGETS:
            for client, _ in CLIENTS:
                f: dict = {"verdict": "pass", "checks": [], "outcome": {"steps": []}, "diff": None, "reason": None}
                if case == "txn/basic_commit":
                    f["checks"] = [{"name": "records read_committed t1", "passed": True,
                                    "message": "3 records as expected"}]
                elif case == "txn/empty_transactional_id":
                    ok = target == REFERENCE
                    f["checks"] = [{"name": EMPTY_ID_CHECK, "passed": ok,
                                    "message": "ok" if ok else "expected error='INVALID_REQUEST', got "
                                                                "'INVALID_PRODUCER_ID_MAPPING'"}]
                    if target == "kfake":
                        f["verdict"] = "fail"
                        f["reason"] = f"known difference: {EMPTY_ID_DOC}"
                        f["known_difference"] = EMPTY_ID_DOC
                    elif target == "librdkafka-mock":
                        f.update(verdict="not_applicable", checks=[],
                                 reason="target 'librdkafka-mock' serves InitProducerId v0-4; the case sends v5")
                elif case == "wire/unknown_api_key":
                    if target == "kfake":
                        f.update(verdict="crash", reason="the target died after step 0: node 0's process 31802 "
                                                         "exited with code 2",
                                 artifacts={"crash": f"artifacts/kfake/{client}/wire__unknown_api_key/crash.txt"})
                    else:
                        f["checks"] = [{"name": "step[0] raw.send_frame: NETWORK_EXCEPTION", "passed": True,
                                        "message": "NETWORK_EXCEPTION"}]
                elif case == "groups/offset_fetch_unknown_group":
                    ok = target != "kfake"
                    f["checks"] = [{"name": OFFSET_CHECK, "passed": ok,
                                    "message": "ok" if ok else "expected error='NONE', got 'GROUP_ID_NOT_FOUND'"}]
                    f["outcome"] = {"steps": [_step(0, "raw", "request", ok, None if ok else "GROUP_ID_NOT_FOUND")]}
                    if not ok:
                        f["verdict"] = "fail"
                elif case == "coordinator/crash_after_prepare_commit" and target != REFERENCE:
                    f.update(verdict="not_applicable", reason=NA_POINTS.replace("kfake", target))
                elif case == "eos/copy_commit":
                    f["outcome"] = {"offsets": {"out-0": {"high_watermark": 4 if target == "kfake" else 5}}}
                    if target == "librdkafka-mock" and client == "java":
                        f.update(verdict="error", reason="RuntimeError: the observer's consumer did not start")
                out.append((case, title, target, client, f))
    return out


def write_peer_run(root: Path, run_id: str = "20261124T080000Z-peer01",
                   started: datetime = datetime(2026, 11, 24, 8, 0, tzinfo=timezone.utc)) -> Path:
    """The run directory under `root`: results.jsonl, run.json, kfake's crash artifacts."""
    run_dir = root / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    versions = dict(TARGETS)
    client_versions = dict(CLIENTS)
    ref_outcomes = {}
    rows = []
    t = started
    for case, title, target, client, f in _rows():
        row = {"run_id": run_id, "started_at": t.strftime("%Y-%m-%dT%H:%M:%SZ"), "case": case,
               "case_title": title, "tags": [], "scenario": [], "target": target,
               "target_version": versions[target], "client": client, "client_version": client_versions[client],
               "duration_s": 1.5, "reference_target": None, "artifacts": {"logs": []}, **f}
        if target == REFERENCE:
            ref_outcomes[(case, client)] = row["outcome"]
        elif row["verdict"] in ("pass", "fail"):
            row["reference_target"] = REFERENCE
            row["diff"] = structural_diff(ref_outcomes[(case, client)], row["outcome"]) or None
        if row["verdict"] == "crash":
            crash = run_dir / row["artifacts"]["crash"]
            crash.parent.mkdir(parents=True, exist_ok=True)
            crash.write_text(f"{row['reason']}\n\n{KFAKE_PANIC}")
        rows.append(row)
        t += timedelta(seconds=2)
    (run_dir / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    meta = {"run_id": run_id, "started_at": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "finished_at": t.strftime("%Y-%m-%dT%H:%M:%SZ"), "targets": [n for n, _ in TARGETS],
            "clients": [c for c, _ in CLIENTS], "cases": sorted({r["case"] for r in rows}),
            "reference_target": REFERENCE, "jobs": 2}
    (run_dir / "run.json").write_text(json.dumps(meta, indent=1))
    return run_dir

