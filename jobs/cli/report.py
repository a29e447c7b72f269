"""`rocketlake report`: one self-contained HTML page about a store and its lake, for an operator.

    rocketlake report --store DIR [--lake DIR|URI] [--store-name NAME] [--lag-window N] --out report.html

The headline names both counts: messages in the ConsumeQueues and records in the CommitLog.
Sections: consumer group status per topic (Burrow's rules, ``jobs.cli.lag_status``, over the
lake's ``offsets_history`` of this store; a topic's status is its worst queue's, with the lag's
change over the window) and lag chart; lag per topic and queue now (the store's
consumerOffset.json); store health (``verify``'s summary, ``jobs.cli.verify_words``); user topics
and system topics (``store.topic_kinds``) apart, with their totals and CommitLog bytes; store
layout; why ConsumeQueue units and CommitLog records differ; message rate over store time (UTC
clock times on the axis); retention (``store.retention``'s plan for each CommitLog file); the last
maintenance runs in words (``jobs.cli.run_words``). Everything is read first (``store_facts``,
``lake_facts``: Spark only when there is a lake), then ``page_view`` turns them into what the page
shows and ``render`` draws it with the autoescaped jinja2 template ``templates/report.html``.
Charts are matplotlib PNGs embedded as data URIs; the page has no external references, so it can
be mailed or archived as one file. Numbers have thousands separators, byte sizes are
``verify_words.size_text``'s, times ``store.store_time.format_time``'s (ISO, UTC), everywhere.
"""
from __future__ import annotations

import argparse
import base64
import io
import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jinja2
import matplotlib

matplotlib.use("Agg")
import matplotlib.dates as mdates  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

from rocketlake.jobs.cli.lag_status import DEFAULT_WINDOW, GroupStatus, group_statuses  # noqa: E402
from rocketlake.jobs.cli.run_words import describe_run  # noqa: E402
from rocketlake.jobs.cli.verify_words import size_text, verify_summary  # noqa: E402
from rocketlake.jobs.lake import check_lake  # noqa: E402
from rocketlake.jobs.lake import store_name as lake_store_name  # noqa: E402
from rocketlake.jobs.table_names import OFFSETS_HISTORY  # noqa: E402
from rocketlake.store import MessageStore, codec  # noqa: E402
from rocketlake.store.commitlog import CommitLog  # noqa: E402
from rocketlake.store.config import load_config, parse_set_options  # noqa: E402
from rocketlake.store.config_files import read_consumer_offsets  # noqa: E402
from rocketlake.store.consumer_lag import consumer_lag as queue_lags  # noqa: E402
from rocketlake.store.file_sizes import reading_config  # noqa: E402
from rocketlake.store.kernels import records as kr  # noqa: E402
from rocketlake.store.record_walk import RecordBatch  # noqa: E402
from rocketlake.store.retention import (  # noqa: E402
    HOUR_MS,
    CommitLogDecision,
    RetentionPolicy,
    disk_used_ratio,
    plan_commitlog_deletion,
)
from rocketlake.store.safe_files import write_whole  # noqa: E402
from rocketlake.store.store_time import format_time  # noqa: E402
from rocketlake.store.topic_kinds import is_system_topic  # noqa: E402
from rocketlake.store.verify import verify  # noqa: E402

#: offsets_history columns the lag status reads
LAG_COLUMNS = ("consumer_group", "topic", "queue_id", "snapshot_ts", "consumer_offset", "lag")
MAX_RUNS = 20
#: problems the store-health section lists (verify's ``--max-problems``)
MAX_PROBLEMS = 10


@dataclass
class StoreFacts:
    commitlog_files: list[tuple[str, int, int]]   # name, mtime (ms), size, in offset order
    commitlog_bytes: int
    index_files: int
    queues: list[dict[str, Any]]           # topic, queue_id, min, max, messages
    committed: dict[tuple[str, str], dict[int, int]]  # consumerOffset.json: (topic, group) -> queue -> offset
    timestamps: np.ndarray                 # store time (ms) of every valid record
    topics: np.ndarray                     # topic of every valid record
    sizes: np.ndarray                      # size in bytes of every valid record
    records: RecordCounts
    health: list[str]                      # verify's summary (``verify_words.verify_summary``)


@dataclass(frozen=True)
class RecordCounts:
    """CommitLog records by what they give the ConsumeQueue (RocketMQ's
    CommitLogDispatcherBuildConsumeQueue): PREPARED and ROLLBACK records get no unit; a delayed
    message's unit is under SCHEDULE_TOPIC_XXXX (``delayed``: real topic -> count)."""
    records: int
    prepared: int
    rollback: int
    delayed: dict[str, int]


def count_records(topics: np.ndarray, sys_flags: np.ndarray, delayed_properties: list[str]) -> RecordCounts:
    """:class:`RecordCounts` of records given by column; ``delayed_properties`` are the properties
    strings of the SCHEDULE_TOPIC_XXXX records, in order (for their REAL_TOPIC)."""
    tx = sys_flags & codec.TRANSACTION_MASK
    delayed: dict[str, int] = {}
    for props in delayed_properties:
        real = codec.string_to_properties(props).get(codec.PROPERTY_REAL_TOPIC, "?")
        delayed[real] = delayed.get(real, 0) + 1
    return RecordCounts(int(topics.size), int((tx == codec.TRANSACTION_PREPARED).sum()),
                        int((tx == codec.TRANSACTION_ROLLBACK).sum()), dict(sorted(delayed.items())))


def _record_columns(log: CommitLog) -> tuple[np.ndarray, np.ndarray, np.ndarray, RecordCounts]:
    """(store time, topic, size) of every valid record, and their :class:`RecordCounts`, from one
    walk of the CommitLog (``CommitLog.walk``, CRCs not checked: recovery found the valid data)."""
    ts, topics, sizes, flags, delayed = [], [], [], [], []
    for batch in log.walk(check_crc=False):
        ids, names = batch.topics
        batch_topics = np.asarray(names, dtype=object)[ids]
        ts.append(batch.column(kr.STORE_TS).copy())
        sizes.append(batch.column(kr.SIZE).copy())
        topics.append(batch_topics)
        flags.append(batch.column(kr.SYS_FLAG).copy())
        scheduled = RecordBatch(batch.buf, batch.raw[batch_topics == codec.SCHEDULE_TOPIC])
        delayed += scheduled.strings(kr.PROPS_START, kr.PROPS_LEN)
    all_topics = np.concatenate(topics) if topics else np.zeros(0, object)
    return (np.concatenate(ts) if ts else np.zeros(0, np.int64), all_topics,
            np.concatenate(sizes) if sizes else np.zeros(0, np.int64),
            count_records(all_topics, np.concatenate(flags) if flags else np.zeros(0, np.int64), delayed))


def store_facts(root: Path, settings: dict[str, str]) -> StoreFacts:
    """Layout from the store's files; store timestamps, topics, sizes and counts from a CommitLog
    walk; health from ``verify``."""
    cfg = reading_config(root, settings)
    health = verify_summary(verify(root, cfg), MAX_PROBLEMS, [])
    with MessageStore(root, cfg, read_only=True) as ms:
        queues = [{"topic": t, "queue_id": q, "min": lo, "max": hi, "messages": hi - lo}
                  for (t, q), (lo, hi) in ms.queue_ranges().items()]
        end = ms.commitlog.max_offset
        timestamps, topics, sizes, records = _record_columns(ms.commitlog)
        index_files = len(ms.index.files) if ms.index is not None else 0
        files = [(mf.path.name, mf.path.stat().st_mtime_ns // 1_000_000, mf.size)
                 for mf in ms.commitlog.files.files]
        return StoreFacts(files, end - ms.commitlog.min_offset, index_files, queues,
                          read_consumer_offsets(root), timestamps, topics, sizes, records, health)


def lake_facts(lake: str | None, store: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the consumer rows of store ``store`` in the lake's ``offsets_history``: consumer_group,
    topic, queue_id, snapshot_ts, consumer_offset, lag) and (the latest runs) from its Delta tables,
    read in process (``jobs.delta_direct``: no Spark session).
    ``lake`` is a URI (:func:`rocketlake.jobs.lake.lake_uri`) that ``jobs.lake.check_lake``
    passed, or None for no lake."""
    if lake is None:
        return [], []
    from rocketlake.jobs import delta_direct
    from rocketlake.jobs.lake import table_uri
    from rocketlake.jobs.run_log import read_runs

    table = delta_direct.open_table(table_uri(lake, OFFSETS_HISTORY))
    found: list[dict[str, Any]] = []
    if table is not None and set(LAG_COLUMNS) | {"kind", "store"} <= delta_direct.column_names(table):
        rows = delta_direct.read_rows(table, (*LAG_COLUMNS, "kind", "store"))
        found = delta_direct.collected(rows.filter((pc.field("kind") == "consumer")
                                      & (pc.field("store") == store)).select(LAG_COLUMNS))
    lag_rows = sorted(found, key=lambda r: r["snapshot_ts"])
    return lag_rows, read_runs(lake, MAX_RUNS)


# --- what the page tells -------------------------------------------------------------------------
def consumer_lag(queues: list[dict[str, Any]], committed: dict[tuple[str, str], dict[int, int]]
                 ) -> list[dict[str, Any]]:
    """Lag per group, topic and queue now, by ``store.consumer_lag`` (``mqadmin
    consumerProgress``)."""
    maxes = {(q["topic"], q["queue_id"]): q["max"] for q in queues}
    return [{"group": r.group, "topic": r.topic, "queue_id": r.queue_id,
             "committed": r.consumer_offset, "max": r.max_offset, "lag": r.lag}
            for r in queue_lags(maxes, committed)]


@dataclass(frozen=True)
class TopicTotal:
    """One topic's totals: its queues and ConsumeQueue units (``messages``), and the CommitLog
    records stored under its name and their bytes (a delayed message's record is stored under
    SCHEDULE_TOPIC_XXXX)."""
    topic: str
    queues: int
    messages: int
    records: int
    bytes: int


def topic_totals(facts: StoreFacts) -> tuple[list[TopicTotal], list[TopicTotal]]:
    """(user topics, system topics: ``store.topic_kinds.is_system_topic``), each sorted by name."""
    names, index = np.unique(facts.topics.astype(str), return_inverse=True) if facts.topics.size \
        else (np.zeros(0, str), np.zeros(0, np.int64))
    records = dict(zip(names.tolist(), np.bincount(index, minlength=len(names)).tolist()))
    sizes = dict(zip(names.tolist(), np.bincount(index, weights=facts.sizes,
                                                  minlength=len(names)).astype(np.int64).tolist()))
    totals = [TopicTotal(t, sum(q["topic"] == t for q in facts.queues),
                         sum(q["messages"] for q in facts.queues if q["topic"] == t),
                         records.get(t, 0), sizes.get(t, 0))
              for t in sorted({q["topic"] for q in facts.queues} | set(records))]
    return ([t for t in totals if not is_system_topic(t.topic)],
            [t for t in totals if is_system_topic(t.topic)])


def trend_words(s: GroupStatus) -> str:
    """A status's lag change over its window in words: ``fell by 2,000``, ``rose by 5``,
    ``unchanged``, or ``-`` with one snapshot."""
    if s.samples < 2:
        return "-"
    return "unchanged" if s.change == 0 else f"{'fell' if s.change < 0 else 'rose'} by {abs(s.change):,}"


def retention_rows(files: list[tuple[str, int, int]], now_ms: int, policy: RetentionPolicy,
                   disk_ratio: float) -> tuple[CommitLogDecision, list[dict[str, Any]]]:
    """What the broker's expiry run (``store.retention``, with its deleteWhen / disk gate) would do at
    ``now_ms``, and one row per CommitLog file: size, mtime, when it expires, and its fate."""
    decision = plan_commitlog_deletion([(n, m) for n, m, _ in files], now_ms, policy, disk_ratio)
    rows = [{"file": name, "size": size_text(size), "modified (UTC)": format_time(mtime),
             "expires at (UTC)": format_time(mtime + policy.file_reserved_hours * HOUR_MS),
             "at the next expiry run": (f"deleted ({_TRIGGERS.get(decision.reason or '', decision.reason)})"
                                     if name in decision.delete else f"kept: {decision.kept[name]}")}
            for name, mtime, size in files]
    return decision, rows


_TRIGGERS = {"deleteWhen": "a deleteWhen hour", "disk": "disk use above diskMaxUsedSpaceRatio",
             "forced": "forced"}


def explain_counts(records: RecordCounts, units: int) -> list[str]:
    """Why the ConsumeQueue units and the CommitLog records differ, in sentences."""
    out = [f"The CommitLog holds {records.records:,} records; the ConsumeQueues hold {units:,} units."]
    if records.prepared or records.rollback:
        out.append(f"{records.prepared:,} PREPARED and {records.rollback:,} ROLLBACK transactional "
                   f"records get no unit (only plain and COMMIT records are dispatched).")
    if records.delayed:
        topics = ", ".join(f"{t} {n:,}" for t, n in records.delayed.items())
        out.append(f"{sum(records.delayed.values()):,} delayed messages have their unit under "
                   f"{codec.SCHEDULE_TOPIC} (queue = delay level - 1), not under their real topic "
                   f"({topics}), until the broker delivers them.")
    rest = records.records - records.prepared - records.rollback - units
    if rest:
        out.append(f"The other {rest:,} {'records have no unit' if rest > 0 else 'units have no record'}: "
                   f"ConsumeQueue files cleaned up or not rebuilt yet (run verify).")
    return out


# --- charts ------------------------------------------------------------------------------------
def _png(fig: Figure) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _legend_outside(ax: Axes) -> None:
    """The legend right of the axes (it never covers bars or lines); ``_png`` keeps it in the image."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)


def _ms(t: datetime) -> int:
    """Epoch milliseconds of ``t`` (a naive datetime is the machine's local time, as Spark
    collects a TIMESTAMP)."""
    return round(t.timestamp() * 1000)


def _clock_axis(ax: Axes) -> None:
    """An x axis of UTC clock times, its tick labels in ``format_time``'s one format."""
    ax.xaxis.set_major_locator(mdates.AutoDateLocator(tz=UTC, minticks=3, maxticks=7))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: format_time(_ms(mdates.num2date(x)))))
    for label in ax.get_xticklabels():
        label.set(rotation=20, horizontalalignment="right")
    ax.set_xlabel("UTC")


def layout_figure(queues: list[dict[str, Any]]) -> Figure:
    fig, ax = plt.subplots(figsize=(9, 3.2))
    topics = sorted({q["topic"] for q in queues})
    bottom = np.zeros(len(topics))
    width = max((q["queue_id"] for q in queues), default=0) + 1
    cmap = plt.get_cmap("tab20")
    for qid in range(width):
        vals = np.array([sum(q["messages"] for q in queues if q["topic"] == t and q["queue_id"] == qid)
                         for t in topics])
        ax.bar(topics, vals, bottom=bottom, color=cmap(qid % 20),
               label=f"queue {qid}" if width <= 20 else None)
        bottom += vals
    ax.set_ylabel("messages")
    ax.set_title("Messages per topic, stacked by queue")
    ax.tick_params(axis="x", rotation=20)
    _legend_outside(ax)
    return fig


def rate_figure(ts: np.ndarray, topics: np.ndarray) -> Figure:
    fig, ax = plt.subplots(figsize=(9, 3.2))
    if ts.size:
        span = max(1, int(ts.max() - ts.min()))
        step = next(s for s in (1000, 10_000, 60_000, 600_000, 3_600_000, 86_400_000)
                    if span / s <= 400 or s == 86_400_000)
        edges = np.arange(ts.min() - ts.min() % step, ts.max() + 2 * step, step)
        when = [datetime.fromtimestamp(ms / 1000, UTC) for ms in edges[:-1].tolist()]
        for t in sorted(set(topics.tolist())):
            counts, _ = np.histogram(ts[topics == t], bins=edges)
            ax.plot(mdates.date2num(when), counts / (step / 1000), label=t, lw=1.2)
        _clock_axis(ax)
        _legend_outside(ax)
    ax.set_ylabel("messages / s")
    ax.set_title("Message rate by store time")
    return fig


def _palette(n: int) -> list[tuple[float, float, float, float]]:
    """``n`` colours of matplotlib's "tab10", repeating after its ten."""
    tab10 = plt.get_cmap("tab10")
    return [tab10(i % tab10.N) for i in range(n)]


def lag_figure(rows: list[dict[str, Any]]) -> Figure:
    """Lag per group (summed over its queues) over snapshot time; bars when there is only one
    snapshot so far."""
    fig, ax = plt.subplots(figsize=(9, 3.2))
    total: dict[tuple[str, Any], int] = {}
    for r in rows:
        key = (r["consumer_group"], r["snapshot_ts"])
        total[key] = total.get(key, 0) + r["lag"]
    groups = sorted({g for g, _ in total})
    snapshots = sorted({s for _, s in total})
    if len(snapshots) == 1:
        ax.bar(groups, [total[(g, snapshots[0])] for g in groups], color=_palette(len(groups)))
        ax.set_title(f"Consumer lag per group at {format_time(_ms(snapshots[0]))} (one snapshot so far)")
    else:
        for group in groups:
            pts = sorted((s, v) for (g, s), v in total.items() if g == group)
            ax.plot(mdates.date2num([datetime.fromtimestamp(_ms(p[0]) / 1000, UTC) for p in pts]),
                    [p[1] for p in pts], marker="o", label=group)
        ax.set_title("Consumer lag per group (offsets_history)")
        if rows:
            _legend_outside(ax)
            _clock_axis(ax)
        else:
            ax.text(0.5, 0.5, "no offsets history yet: run publish-offsets", ha="center",
                    transform=ax.transAxes)
    ax.set_ylabel("messages behind")
    return fig


# --- page ----------------------------------------------------------------------------------------
#: the page's template (``templates/report.html``, package data), autoescaped
_PAGES = jinja2.Environment(loader=jinja2.PackageLoader("rocketlake.jobs.cli"), autoescape=True,
                            keep_trailing_newline=True,
                            undefined=jinja2.StrictUndefined)


def _cell(v: Any) -> str:
    """A table cell's or a card's text: integers with thousands separators."""
    if isinstance(v, int | np.integer) and not isinstance(v, bool):
        return f"{v:,}"
    return str(v)


_PAGES.filters["cell"] = _cell


def _table(rows: list[dict[str, Any]], cols: list[str], class_col: str | None = None) -> dict[str, Any]:
    """A table for the template: ``cols`` of ``rows``; the value of column ``class_col`` is also
    its cell's class."""
    return {"cols": cols, "rows": [[r.get(c, "") for c in cols] for r in rows],
            "class_col": cols.index(class_col) if class_col else None}


@dataclass(frozen=True)
class PageInput:
    """Everything the page shows, read before rendering (``render`` reads nothing)."""
    root: Path
    facts: StoreFacts
    history: list[dict[str, Any]]      # lake offsets_history consumer rows of this store
    runs: list[dict[str, Any]]         # lake maintenance_runs rows, newest first
    now_ms: int
    policy: RetentionPolicy
    disk_ratio: float
    lag_window: int = DEFAULT_WINDOW
    lake: bool = False                 # whether a lake was given


def _topic_row(t: TopicTotal) -> dict[str, Any]:
    return {"topic": t.topic, "queues": t.queues, "messages": t.messages,
            "CommitLog records": t.records, "CommitLog bytes": size_text(t.bytes)}


def page_view(p: PageInput) -> dict[str, Any]:
    """What the page shows, as plain values and tables for ``templates/report.html``."""
    facts = p.facts
    units = sum(q["messages"] for q in facts.queues)
    statuses = group_statuses(p.history, p.lag_window)
    by_topic = group_statuses(p.history, p.lag_window, by_topic=True)
    user, system = topic_totals(facts)
    decision, retention = retention_rows(facts.commitlog_files, p.now_ms, p.policy, p.disk_ratio)
    cards = [("messages in ConsumeQueues", units), ("records in the CommitLog", facts.records.records),
             ("user topics", len(user)), ("system topics", len(system)),
             ("queues", len(facts.queues)), ("CommitLog", size_text(facts.commitlog_bytes)),
             ("CommitLog files", len(facts.commitlog_files)), ("index files", facts.index_files),
             ("disk used", f"{p.disk_ratio:.0%}")]
    cards += [(f"group {s.group}", s.status) for s in statuses]
    topic_cols = ["topic", "queues", "messages", "CommitLog records", "CommitLog bytes"]
    gate = (f"deleteWhen {';'.join(f'{h:02d}' for h in sorted(p.policy.delete_hours))} (local time), "
            f"diskMaxUsedSpaceRatio {p.policy.disk_max_used_ratio}% (disk now {p.disk_ratio:.0%} used), "
            f"fileReservedTime {p.policy.file_reserved_hours} h")
    return {
        "name": p.root.name, "root": str(p.root), "generated": format_time(p.now_ms), "cards": cards,
        "headline": f"{units:,} messages in ConsumeQueues; {facts.records.records:,} records in the "
                    f"CommitLog",
        "lag_window": p.lag_window, "lake": p.lake,
        "statuses": _table([{"group": s.group, "topic": s.topic, "status": s.status,
                             "decided by queue": s.worst, "lag now": s.lag, "lag trend": trend_words(s),
                             "snapshots": s.samples} for s in by_topic],
                           ["group", "topic", "status", "decided by queue", "lag now", "lag trend",
                            "snapshots"], "status"),
        "health": facts.health,
        "user_topics": _table([_topic_row(t) for t in user], topic_cols),
        "system_topics": _table([_topic_row(t) for t in system], topic_cols),
        "lag_now": _table(consumer_lag(facts.queues, facts.committed),
                          ["group", "topic", "queue_id", "committed", "max", "lag"]),
        "queues": _table(facts.queues, ["topic", "queue_id", "min", "max", "messages"]),
        "counts": explain_counts(facts.records, units),
        "gate": gate, "deleted": list(decision.delete),
        "retention": _table(retention, ["file", "size", "modified (UTC)", "expires at (UTC)",
                                        "at the next expiry run"]),
        "runs": [describe_run(r) for r in p.runs],
        "charts": {"lag": _png(lag_figure(p.history)), "layout": _png(layout_figure(facts.queues)),
                   "rate": _png(rate_figure(facts.timestamps, facts.topics))},
    }


def render(p: PageInput) -> str:
    """The whole page as one HTML string (``templates/report.html`` over :func:`page_view`)."""
    return _PAGES.get_template("report.html").render(page_view(p))


def write_report(store: Path, lake: str | None, out: Path, settings: dict[str, str],
                 store_name: str | None = None, lag_window: int = DEFAULT_WINDOW) -> dict[str, Any]:
    """Write the HTML report of ``store`` (and ``lake``, when given: the history of the store
    named ``store_name``, default as ``jobs.lake.store_name`` reads it) to ``out``;
    returns a summary."""
    cfg = load_config(settings)
    if lake is not None:
        check_lake(lake)  # a mistyped --lake fails before the store is read
    facts = store_facts(store, settings)
    history, runs = lake_facts(lake, lake_store_name(store, store_name, reading=True))
    page = PageInput(store, facts, history, runs, time.time_ns() // 1_000_000,
                     RetentionPolicy.from_config(cfg), disk_used_ratio(store), lag_window, lake is not None)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_whole(out, render(page).encode(), "writing the HTML report")  # never half a page
    return {"report": str(out), "messages": int(sum(q["messages"] for q in facts.queues)),
            "lag_points": len(history), "runs": len(runs),
            "groups": {s.group: s.status for s in group_statuses(history, lag_window)}}


def run(a: argparse.Namespace) -> int:
    """``rocketlake report`` (options in :mod:`rocketlake.jobs.cli`)."""
    print(json.dumps(write_report(a.store, a.lake, a.out, parse_set_options(a.set), a.store_name,
                                  a.lag_window)))
    return 0

