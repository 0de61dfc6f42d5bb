"""Entry points the ``kconform`` command wires up: ``report`` and ``transcript``.

``kconform report --results DIR --out DIR`` -> :func:`report`;
``kconform transcript FILE`` -> :func:`transcript`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TextIO


def report(results_dir: str | Path | list, out_dir: str | Path, *, allure_results: str | Path | None = None,
           analytics_dir: str | Path | None = None, previous: str | Path | None = None,
           build_name: str | None = None, report_url: str | None = None) -> tuple[Path, Path]:
    """Allure HTML for the run in ``results_dir``: (served report directory, single-file report).

    ``results_dir`` may be several directories: the shards of one run make one report. Uses
    ``results_dir/allure-results`` (or ``allure_results``) when the pytest plugin wrote them,
    else converts ``results.jsonl``. When ``analytics_dir`` holds the charts of
    ``reports.analytics.analyze`` they are added as an "Analytics over all runs" entry. The
    Allure inputs are kept in ``out_dir/allure-results``. ``previous``: the last report (its
    history makes the Trend and Retries span runs; default ``out_dir``'s own).
    """
    from .allure_report import analytics_result, generate, stage_results

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    staging = stage_results(results_dir, out / "allure-results", allure_results)
    if analytics_dir:
        extra = analytics_result(analytics_dir, staging)
        if extra:
            (staging / f"{extra['uuid']}-result.json").write_text(json.dumps(extra), encoding="utf-8")
    return generate(staging, out, previous=previous, build_name=build_name, report_url=report_url)


def transcript_lines(path: str | Path) -> list[str]:
    """One line per Kafka frame of a pcap (or a transcript .jsonl): time, direction, API, version,
    correlation id, error codes of responses."""
    path = Path(path)
    if path.suffix == ".jsonl":
        from broker_impl.codec import ConnectionDecoder

        from .transcripts import read_transcript

        decoders: dict[str, ConnectionDecoder] = {}
        items = [(f.t, f.conn, f.dir, f.src, f.dst, decoders.setdefault(f.conn, ConnectionDecoder()).frame(f.dir, f.data))
                 for f in read_transcript(path)]
    else:
        from .kafka_layer import dissect
        from .pcap import read_pcap

        frames = read_pcap(path)
        t0 = frames[0].time if frames else 0.0
        items = [(f.time - t0, f.conn, f.dir, f.src, f.dst, info) for f, _pkt, info in dissect(frames)]
    lines = []
    for t, _conn, d, src, dst, info in items:
        arrow = "->" if d == "c2b" else "<-"
        client = src if d == "c2b" else dst
        broker = dst if d == "c2b" else src
        version = "?" if info.api_version is None else info.api_version
        corr = "?" if info.correlation_id is None else info.correlation_id
        line = (f"{t:10.6f} {client} {arrow} {broker} {info.api_label:<22} v{version:<3} "
                f"corr={corr:<6} size={info.size - 4:<7}")
        if d == "b2c":
            line += f" errors={info.errors_text()}"
        if info.note:
            line += f" ({info.note})"
        lines.append(line.rstrip())
    return lines


def transcript(path: str | Path, out: TextIO | None = None) -> int:
    """Print :func:`transcript_lines` for ``path``; exit status 0, or 1 when it cannot be read."""
    out = out or sys.stdout
    try:
        lines = transcript_lines(path)
    except (OSError, ValueError, RuntimeError) as exc:
        print(f"kconform transcript: {path}: {exc}", file=sys.stderr)
        return 1
    for line in lines:
        print(line, file=out)
    return 0
