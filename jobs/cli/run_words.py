"""A maintenance run (a row of ``jobs.run_log``'s table) told in one sentence for the report.

    compact at 2026-11-23 04:00 UTC: archived 2 files (1,234 messages), deleted 2 files,
    compacted user-state: 17 keys kept

Each job's summary JSON has its own shape (``jobs.compact.maintain``,
``jobs.publish_offsets.publish_store``, ``jobs.rebuild.run_structures``); a job this module does
not know is told as its summary's top-level fields. Pure Python, no Spark.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from rocketlake.store.store_time import format_time, parse_time


def when(ms: int) -> str:
    """Epoch ms -> "2026-11-23T04:00:00.000Z" (``store.store_time``)."""
    return format_time(ms)


def _n(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def _compact(s: Mapping[str, Any]) -> list[str]:
    plan = s.get("plan") or {}
    parts = []
    archived = s.get("archived") or {}
    if archived:
        parts.append(f"archived {_n(len(archived), 'file')} ({_n(sum(archived.values()), 'message')})")
    deleted, planned = s.get("deleted"), plan.get("delete") or []
    if deleted is not None:
        parts.append(f"deleted {_n(len(planned), 'file')} (CommitLog now from offset "
                     f"{deleted.get('commitlog_min_offset', 0):,}; "
                     f"{_n(len(deleted.get('consume_queue_files') or ()), 'ConsumeQueue file')}, "
                     f"{_n(len(deleted.get('index_files') or ()), 'index file')} with them)")
    elif planned:
        parts.append(f"would delete {_n(len(planned), 'file')}")
    elif plan:
        why = "none expired" if plan.get("reason") else "waiting for a deleteWhen hour or disk use"
        parts.append(f"deleted no CommitLog file ({why})")
    for topic, c in sorted((s.get("compacted") or {}).items()):
        parts.append(f"compacted {topic}: {_n(c.get('kept', 0), 'key')} kept")
    if "compact_topics" in s:  # a dry run: the plan only
        parts.append(f"would compact {', '.join(s['compact_topics']) or 'no topic'}")
    return parts


def _time(text: object) -> str:
    """A run summary's time in the one format (rows of older runs hold other ISO-8601 forms);
    what it holds, as it is, when that is no time."""
    try:
        return format_time(parse_time(str(text)))
    except ValueError:
        return "?" if text is None else str(text)


def _publish_offsets(s: Mapping[str, Any]) -> list[str]:
    return [f"snapshot {_time(s.get('snapshot'))}: {_n(s.get('queues', 0), 'queue')}, "
            f"{_n(s.get('consumer_rows', 0), 'consumer row')}"]


def _rebuild(s: Mapping[str, Any]) -> list[str]:
    wrote = s.get("wrote") or {}
    per_topic = wrote.get("per_topic") or {}
    noun = str(wrote.get("noun", "units")).rstrip("s")
    return [f"{s.get('mode', '?')} rebuild wrote {_n(sum(per_topic.values()), noun)} "
            f"for {_n(len(per_topic), 'topic')} under {s.get('target', '?')}"]


def _check_consistency(s: Mapping[str, Any]) -> list[str]:
    rebuild = s.get("rebuild") or []
    return [f"checked {_n(s.get('records', 0), 'record')}, {_n(s.get('errors', 0), 'error')}",
            f"to rebuild: {', '.join(rebuild)}" if rebuild else "nothing to rebuild"]


def _archive(s: Mapping[str, Any]) -> list[str]:
    offset, batches = (s.get("offset") or {}).get("commitlogOffset"), s.get("batches", 0)
    return [f"archived {_n(s.get('rows', 0), 'record')} in {batches:,} batch"
            f"{'' if batches == 1 else 'es'}"
            + ("" if offset is None else f", up to CommitLog offset {offset:,}")]


def _any(s: Mapping[str, Any]) -> list[str]:
    return [f"{k.replace('_', ' ')} {v:,}" if isinstance(v, int) and not isinstance(v, bool)
            else f"{k.replace('_', ' ')} {v}" for k, v in sorted(s.items())
            if not isinstance(v, (dict, list))]


#: job name -> its summary told as phrases
TELLERS: dict[str, Callable[[Mapping[str, Any]], list[str]]] = {
    "archive": _archive, "compact": _compact, "publish-offsets": _publish_offsets, "rebuild": _rebuild,
    "rebuild-consumequeue": _rebuild, "rebuild-index": _rebuild, "check-consistency": _check_consistency}


def describe_run(run: Mapping[str, Any]) -> str:
    """One sentence for a run row (``job, status, started_ms, finished_ms, summary`` JSON)."""
    try:
        summary = json.loads(run.get("summary") or "{}")
    except ValueError:
        summary = {"summary": run.get("summary")}
    if not isinstance(summary, dict):
        summary = {"summary": summary}
    parts = TELLERS.get(run["job"], _any)(summary)
    status = "" if run["status"] == "ok" else f" [{run['status']}]"
    took = (run["finished_ms"] - run["started_ms"]) / 1000
    return (f"{run['job']} at {when(run['started_ms'])}{status}: {', '.join(parts) or 'nothing to report'}"
            f" (took {took:,.1f} s)")
