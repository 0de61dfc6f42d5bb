"""PNG charts of the analytics tables (matplotlib, no display needed).

They take plain lists of dicts (collected aggregates, a few hundred rows at
most), so they need neither Spark nor pandas.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import ListedColormap  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from conformance.results import Verdict  # noqa: E402

VERDICT_COLOURS = {Verdict.PASS: "#2e9e44", Verdict.FAIL: "#d43c3c", Verdict.CRASH: "#7a0a0a",
                   Verdict.NOT_APPLICABLE: "#a0a0a0", Verdict.ERROR: "#e0a020"}
_DPI = 80


def matrix_chart(matrix: list[dict], path: Path) -> Path:
    """Cases down, target·client across, a cell per latest verdict; a dot where it diverges."""
    cases = sorted({r["case"] for r in matrix})
    cols = sorted({(r["target"], r["client"]) for r in matrix})
    order = list(VERDICT_COLOURS)
    grid = [[-1] * len(cols) for _ in cases]
    dots = []
    for r in matrix:
        i, j = cases.index(r["case"]), cols.index((r["target"], r["client"]))
        grid[i][j] = order.index(r["verdict"]) if r["verdict"] in order else -1
        if r.get("diverges"):
            dots.append((j, i))
    cmap = ListedColormap(["#ffffff"] + list(VERDICT_COLOURS.values()))
    fig, ax = plt.subplots(figsize=(3.5 + 0.55 * len(cols), 2.2 + 0.22 * len(cases)), dpi=_DPI)
    ax.imshow([[v + 1 for v in row] for row in grid], cmap=cmap, vmin=0, vmax=len(order), aspect="auto")
    if dots:
        ax.scatter([d[0] for d in dots], [d[1] for d in dots], marker="o", s=14, c="black")
    ax.set_xticks(range(len(cols)), [f"{t} · {c}" for t, c in cols], fontsize=7, rotation=35, ha="right")
    ax.set_xticks([j - 0.5 for j in range(1, len(cols))], minor=True)
    ax.set_yticks([i - 0.5 for i in range(1, len(cases))], minor=True)
    ax.grid(which="minor", color="white", linewidth=1)
    ax.tick_params(which="minor", length=0)
    ax.set_yticks(range(len(cases)), cases, fontsize=7)
    ax.set_title("Latest verdict per case x target x client (dot: diverges from reference)", fontsize=9)
    ax.legend(handles=[Patch(color=c, label=v) for v, c in VERDICT_COLOURS.items()], fontsize=7,
              loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def durations_chart(durations: list[dict], path: Path) -> Path:
    targets = [r["target"] for r in durations]
    fig, ax = plt.subplots(figsize=(6, 3.2), dpi=_DPI)
    width = 0.25
    for k, (col, colour) in enumerate((("p50_s", "#4c78a8"), ("p90_s", "#f58518"), ("p99_s", "#e45756"))):
        ax.bar([i + (k - 1) * width for i in range(len(targets))], [r[col] for r in durations], width,
               label=col[:-2], color=colour)
    ax.set_xticks(range(len(targets)), targets)
    ax.set_ylabel("seconds per case")
    ax.set_title("Case duration percentiles per target", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def trend_chart(per_run: list[dict], path: Path) -> Path:
    """Per target over runs: pass rate and the share of rows diverging from the reference."""
    targets = sorted({r["target"] for r in per_run})
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(7, 4.6), dpi=_DPI, sharex=True)
    for t in targets:
        rs = sorted((r for r in per_run if r["target"] == t), key=lambda r: r["run_at"])
        xs = [r["run_at"] for r in rs]
        a1.plot(xs, [r["passed"] / r["rows"] for r in rs], marker=".", label=t)
        a2.plot(xs, [r["diverging"] / r["rows"] for r in rs], marker=".", label=t)
    a1.set_ylabel("pass rate")
    a2.set_ylabel("diverging")
    a1.set_ylim(0, 1.05)
    a2.set_ylim(0, 1.05)
    a1.set_title("Per run and target", fontsize=10)
    a1.legend(fontsize=8)
    fig.autofmt_xdate()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
