"""`rocketlake report`: one self-contained HTML page about a store and its lake.

    rocketlake report --store DIR [--lake DIR] --out report.html

Sections: store layout and sizes per topic and queue, message rate over time (store timestamps),
consumer lag per group over time (the lake's `offsets_history`), and the last maintenance runs
(`maintenance_runs`). Charts are matplotlib PNGs embedded as data URIs; the page has no external
references, so it can be mailed or archived as one file.
"""
from __future__ import annotations

import argparse
import base64
import html
import io
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from rocketlake.jobs.cli import job_main  # noqa: E402
from rocketlake.store import MessageStore  # noqa: E402
from rocketlake.store.config import load_config, parse_set_options  # noqa: E402
from rocketlake.transforms.commitlog_batch import parse_range  # noqa: E402


@dataclass
class StoreFacts:
    commitlog_files: int
    commitlog_bytes: int
    index_files: int
    queues: list[dict[str, Any]]           # topic, queue_id, min, max, messages
    timestamps: np.ndarray                 # store time (ms) of every valid record
    topics: np.ndarray                     # topic of every valid record


def store_facts(root: Path, settings: dict[str, str]) -> StoreFacts:
    """Layout from the store's files; store timestamps from a vectorised CommitLog parse."""
    with MessageStore(root, load_config(settings), read_only=True) as ms:
        queues = [{"topic": t, "queue_id": q, "min": lo, "max": hi, "messages": hi - lo}
                  for (t, q), (lo, hi) in ms.queue_ranges().items()]
        end = ms.commitlog.max_offset
        ts, topics = [], []
        for mf in ms.commitlog.files.files:
            if mf.start >= end:
                break
            buf = np.frombuffer(mf.mm, dtype=np.uint8)
            batch = parse_range(buf, mf.start, 0, min(mf.size, end - mf.start), check_crc=False)
            ok = batch.column("commitlog_offset").to_numpy() < end
            ts.append(batch.column("store_timestamp").to_numpy()[ok].copy())
            topics.append(np.asarray(batch.column("topic").to_pylist(), dtype=object)[ok])
            del buf, batch  # views on the mapped file must go before it is closed
        index_files = len(ms.index.files) if ms.index is not None else 0
        return StoreFacts(len(ms.commitlog.files.files), end - ms.commitlog.min_offset, index_files,
                          queues, np.concatenate(ts) if ts else np.zeros(0, np.int64),
                          np.concatenate(topics) if topics else np.zeros(0, object))


def lake_facts(lake: Path | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(lag rows: snapshot_ts, consumer_group, lag) and (latest runs) from the lake's Delta tables."""
    if lake is None or not lake.exists():
        return [], []
    history, runs = lake / "offsets_history", lake / "maintenance_runs"
    if not (history / "_delta_log").exists() and not (runs / "_delta_log").exists():
        return [], []
    from rocketlake.jobs.spark_session import build_session  # a JVM only when there is a lake to read

    spark = build_session("rocketlake-report", conf={"spark.ui.enabled": "false"})
    lag_rows: list[dict[str, Any]] = []
    run_rows: list[dict[str, Any]] = []
    if (history / "_delta_log").exists():
        df = spark.read.format("delta").load(str(history))
        if {"consumer_group", "lag", "snapshot_ts"} <= set(df.columns):
            lag_rows = [r.asDict() for r in df.where("consumer_group IS NOT NULL")
                        .groupBy("snapshot_ts", "consumer_group").sum("lag")
                        .withColumnRenamed("sum(lag)", "lag").orderBy("snapshot_ts").collect()]
    if (runs / "_delta_log").exists():
        run_rows = [r.asDict() for r in spark.read.format("delta").load(str(runs))
                    .orderBy("finished_ms", ascending=False).limit(20).collect()]
    return lag_rows, run_rows


# --- charts ------------------------------------------------------------------------------------
def _png(fig: plt.Figure) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def chart_layout(queues: list[dict[str, Any]]) -> str:
    fig, ax = plt.subplots(figsize=(9, 3.2))
    topics = sorted({q["topic"] for q in queues})
    bottom = np.zeros(len(topics))
    width = max((q["queue_id"] for q in queues), default=0) + 1
    cmap = plt.get_cmap("tab20")
    for qid in range(width):
        vals = np.array([sum(q["messages"] for q in queues if q["topic"] == t and q["queue_id"] == qid)
                         for t in topics])
        ax.bar(topics, vals, bottom=bottom, color=cmap(qid % 20), label=f"queue {qid}")
        bottom += vals
    ax.set_ylabel("messages")
    ax.set_title("Messages per topic, stacked by queue")
    ax.tick_params(axis="x", rotation=20)
    if width <= 20:
        ax.legend(fontsize=7, ncol=4)
    return _png(fig)


def chart_rate(ts: np.ndarray, topics: np.ndarray) -> str:
    fig, ax = plt.subplots(figsize=(9, 3.2))
    if ts.size:
        span = max(1, int(ts.max() - ts.min()))
        step = next(s for s in (1000, 10_000, 60_000, 600_000, 3_600_000, 86_400_000)
                    if span / s <= 400 or s == 86_400_000)
        edges = np.arange(ts.min() - ts.min() % step, ts.max() + 2 * step, step)
        for t in sorted(set(topics.tolist())):
            counts, _ = np.histogram(ts[topics == t], bins=edges)
            ax.plot((edges[:-1] - edges[0]) / 1000, counts / (step / 1000), label=t, lw=1.2)
        ax.set_xlabel(f"seconds since {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(edges[0] / 1000))} UTC")
        ax.legend(fontsize=7)
    ax.set_ylabel("messages / s")
    ax.set_title("Message rate by store time")
    return _png(fig)


def _palette(n: int) -> list[tuple[float, float, float, float]]:
    """``n`` colours of matplotlib's "tab10", repeating after its ten."""
    tab10 = plt.get_cmap("tab10")
    return [tab10(i % tab10.N) for i in range(n)]


def chart_lag(rows: list[dict[str, Any]]) -> str:
    """Lag per group over snapshot time; bars when there is only one snapshot so far."""
    fig, ax = plt.subplots(figsize=(9, 3.2))
    groups = sorted({r["consumer_group"] for r in rows})
    snapshots = sorted({r["snapshot_ts"] for r in rows})
    if len(snapshots) == 1:
        ax.bar(groups, [sum(r["lag"] for r in rows if r["consumer_group"] == g) for g in groups],
               color=_palette(len(groups)))
        ax.set_title(f"Consumer lag per group at {snapshots[0]:%Y-%m-%d %H:%M:%S} (one snapshot so far)")
    else:
        for group in groups:
            pts = [(r["snapshot_ts"], r["lag"]) for r in rows if r["consumer_group"] == group]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=group)
        ax.set_title("Consumer lag per group (offsets_history)")
        if rows:
            ax.legend(fontsize=7)
            fig.autofmt_xdate()
        else:
            ax.text(0.5, 0.5, "no offsets history yet: run publish-offsets", ha="center",
                    transform=ax.transAxes)
    ax.set_ylabel("messages behind")
    return _png(fig)


# --- page ----------------------------------------------------------------------------------------
def _table(rows: list[dict[str, Any]], cols: list[str]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(r.get(c, '')))}</td>" for c in cols) + "</tr>"
                   for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render(root: Path, facts: StoreFacts, lag: list[dict[str, Any]], runs: list[dict[str, Any]]) -> str:
    """The whole page as one HTML string."""
    total = sum(q["messages"] for q in facts.queues)
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    runs_view = [{"job": r["job"], "status": r["status"],
                  "finished (UTC)": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(r["finished_ms"] / 1000)),
                  "seconds": round((r["finished_ms"] - r["started_ms"]) / 1000, 1),
                  "summary": (r.get("summary") or "")[:160]} for r in runs]
    cards = [("messages", f"{total:,}"), ("topics", len({q['topic'] for q in facts.queues})),
             ("queues", len(facts.queues)), ("CommitLog", f"{facts.commitlog_bytes / 1e6:,.1f} MB"),
             ("CommitLog files", facts.commitlog_files), ("index files", facts.index_files)]
    card_html = "".join(f"<div class=card><div class=v>{v}</div><div class=k>{k}</div></div>"
                        for k, v in cards)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>rocketlake report: {html.escape(root.name)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1000px; color: #1d2733; }}
h1 {{ margin-bottom: .2rem; }} .sub {{ color: #5b6b7c; margin-top: 0; }}
.cards {{ display: flex; gap: .8rem; flex-wrap: wrap; margin: 1rem 0; }}
.card {{ background: #eef3f8; border-radius: 8px; padding: .7rem 1rem; min-width: 120px; }}
.card .v {{ font-size: 1.4rem; font-weight: 600; }} .card .k {{ color: #5b6b7c; font-size: .85rem; }}
table {{ border-collapse: collapse; width: 100%; font-size: .85rem; margin: .5rem 0 1.5rem; }}
th, td {{ border-bottom: 1px solid #d8e0e8; padding: .3rem .5rem; text-align: left; }}
th {{ background: #f6f8fa; }} img {{ max-width: 100%; }}
</style></head><body>
<h1>rocketlake report</h1>
<p class=sub>store <code>{html.escape(str(root))}</code>, generated {when}</p>
<div class=cards>{card_html}</div>
<h2>Store layout</h2>
<img alt="messages per topic and queue" src="{chart_layout(facts.queues)}">
{_table(facts.queues, ["topic", "queue_id", "min", "max", "messages"])}
<h2>Message rate</h2>
<img alt="message rate over time" src="{chart_rate(facts.timestamps, facts.topics)}">
<h2>Consumer lag</h2>
<img alt="consumer lag per group over time" src="{chart_lag(lag)}">
<h2>Last maintenance runs</h2>
{_table(runs_view, ["job", "status", "finished (UTC)", "seconds", "summary"]) if runs_view
 else "<p>No maintenance run recorded yet.</p>"}
</body></html>
"""


def write_report(store: Path, lake: Path | None, out: Path, settings: dict[str, str]) -> dict[str, Any]:
    """Write the HTML report of ``store`` (and ``lake``, when given) to ``out``; returns a summary."""
    facts = store_facts(store, settings)
    lag, runs = lake_facts(lake)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(store, facts, lag, runs), encoding="utf-8")
    return {"report": str(out), "messages": int(sum(q["messages"] for q in facts.queues)),
            "lag_points": len(lag), "runs": len(runs)}


def run(a: argparse.Namespace) -> int:
    """``rocketlake report`` (options in :mod:`rocketlake.jobs.cli`)."""
    print(json.dumps(write_report(a.store, a.lake, a.out, parse_set_options(a.set))))
    return 0


def main(argv: list[str] | None = None) -> int:
    return job_main("report", argv)


if __name__ == "__main__":
    sys.exit(main())
