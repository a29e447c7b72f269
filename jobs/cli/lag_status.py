"""Consumer group status over a window of offset snapshots, by Burrow's consumer lag evaluation rules.

Burrow (linkedin/Burrow, ``core/internal/evaluator/caching.go``, ``calculatePartitionStatus``)
evaluates each partition a group consumes over its last ``window`` offsets, in this order:

1. the lag is zero at any point in the window -> OK;
2. the committed offset goes back between two samples -> REWIND (an error);
3. the committed offset does not change over the window (and, by 1., the lag is never 0) -> STALLED;
4. the offset advances but the lag decreases between no two samples -> WARNING (the consumer is slow);
5. else OK (the consumer is catching up).

Here a partition is a (topic, queue id) of the group and a sample is one ``publish-offsets``
snapshot (``offsets_history`` rows of kind "consumer"). Burrow's STOP rule (no commit for longer
than the window spans) needs commit times, which consumerOffset.json does not keep, so it is not
evaluated. A window of one sample with lag cannot tell a stall from a slow consumer: UNKNOWN. A
group's status (and a group's status on one topic) is its worst partition's. Pure Python: the
report runs it without Spark.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

OK, UNKNOWN, WARNING, STALLED, REWIND = "OK", "UNKNOWN", "WARNING", "STALLED", "REWIND"
#: status -> severity; a group shows its most severe partition
SEVERITY = {OK: 0, UNKNOWN: 1, WARNING: 2, STALLED: 3, REWIND: 4}
#: Burrow's default window: 10 offsets per partition (storage ``intervals``)
DEFAULT_WINDOW = 10


@dataclass(frozen=True)
class Sample:
    """One snapshot of a partition: the committed offset and the lag then."""
    consumer_offset: int
    lag: int


def partition_status(samples: Sequence[Sample]) -> str:
    """The status of one partition over ``samples`` (oldest first), by the rules above."""
    if not samples or any(s.lag == 0 for s in samples):
        return OK
    pairs = list(zip(samples, samples[1:]))
    if not pairs:
        return UNKNOWN
    if any(b.consumer_offset < a.consumer_offset for a, b in pairs):
        return REWIND
    if all(b.consumer_offset == a.consumer_offset for a, b in pairs):
        return STALLED
    if not any(b.lag < a.lag for a, b in pairs):
        return WARNING
    return OK


@dataclass(frozen=True)
class GroupStatus:
    """A group's status (on ``topic``, or on all its topics when None), the partition that decides
    it ("topic/queue"), its lag now (summed over its partitions' latest samples), how many
    snapshots the window holds, and the lag's change over the window (summed over the partitions:
    latest minus first sample; negative when it fell)."""
    group: str
    status: str
    worst: str
    lag: int
    samples: int
    change: int = 0
    topic: str | None = None


def group_statuses(rows: Iterable[Mapping[str, Any]], window: int = DEFAULT_WINDOW,
                   by_topic: bool = False) -> list[GroupStatus]:
    """Rows with ``consumer_group, topic, queue_id, snapshot_ts, consumer_offset, lag`` (any order)
    -> one status per group (sorted by name), or per group and topic with ``by_topic``, each
    partition judged over its last ``window`` snapshots."""
    if window < 1:
        raise ValueError(f"the lag window must hold at least 1 snapshot, got {window}")
    series: dict[tuple[str, str, int], list[tuple[Any, Sample]]] = {}
    for r in rows:
        series.setdefault((r["consumer_group"], r["topic"], r["queue_id"]), []).append(
            (r["snapshot_ts"], Sample(int(r["consumer_offset"]), int(r["lag"]))))
    out: dict[tuple[str, str | None], GroupStatus] = {}
    for (group, topic, queue_id), points in sorted(series.items()):
        samples = [s for _, s in sorted(points, key=lambda p: p[0])][-window:]
        status = partition_status(samples)
        key = (group, topic if by_topic else None)
        prev = out.get(key)
        lag = samples[-1].lag + (prev.lag if prev else 0)
        change = samples[-1].lag - samples[0].lag + (prev.change if prev else 0)
        n = max(len(samples), prev.samples if prev else 0)
        if prev is None or SEVERITY[status] > SEVERITY[prev.status]:
            out[key] = GroupStatus(group, status, f"{topic}/{queue_id}", lag, n, change, key[1])
        else:
            out[key] = GroupStatus(group, prev.status, prev.worst, lag, n, change, key[1])
    return [out[k] for k in sorted(out, key=lambda k: (k[0], k[1] or ""))]
