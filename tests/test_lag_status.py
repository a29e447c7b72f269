"""Burrow's consumer lag evaluation rules over hand-made offset histories."""
from __future__ import annotations

import pytest

from rocketlake.jobs.cli.lag_status import (
    OK,
    REWIND,
    STALLED,
    UNKNOWN,
    WARNING,
    GroupStatus,
    Sample,
    group_statuses,
    partition_status,
)


def _s(*points: tuple[int, int]) -> list[Sample]:
    return [Sample(o, lag) for o, lag in points]


@pytest.mark.parametrize("samples, expected", [
    # offset fixed, lag > 0 and growing as messages arrive: the consumer is stuck
    (_s((10, 5), (10, 8), (10, 12)), STALLED),
    # offset fixed, lag > 0 and not growing (no new messages): still stuck
    (_s((10, 5), (10, 5), (10, 5)), STALLED),
    # committing, but lag grows between every two samples: falling behind
    (_s((10, 5), (20, 9), (30, 14)), WARNING),
    # committing, lag flat (never decreases): Burrow's "not decreasing" is a warning too
    (_s((10, 5), (20, 5), (30, 5)), WARNING),
    # lag 0 at one point in the window: OK, whatever else happens
    (_s((10, 5), (15, 0), (15, 7)), OK),
    (_s((10, 0), (10, 0)), OK),
    # committing and the lag decreases somewhere: catching up
    (_s((10, 50), (40, 30), (60, 35)), OK),
    # the committed offset goes back: a rewind (an error, checked before the stall rule)
    (_s((30, 5), (10, 25), (10, 30)), REWIND),
    # one snapshot with lag cannot tell a stall from a slow consumer
    (_s((10, 5)), UNKNOWN),
    (_s((10, 0)), OK),
    ([], OK),
])
def test_partition_status_follows_burrows_rules(samples, expected):
    assert partition_status(samples) == expected


def _rows(group, topic, queue_id, points):
    return [{"consumer_group": group, "topic": topic, "queue_id": queue_id, "snapshot_ts": t,
             "consumer_offset": o, "lag": lag} for t, (o, lag) in enumerate(points)]


def test_group_status_is_its_worst_queue_and_lag_is_the_latest_sum():
    rows = (_rows("billing", "orders", 0, [(0, 3), (5, 0), (9, 1)])       # OK (lag hit 0)
            + _rows("billing", "orders", 1, [(2, 4), (2, 6), (2, 9)])     # STALLED
            + _rows("billing", "orders", 2, [(1, 4), (3, 5), (5, 6)])     # WARNING
            + _rows("audit", "audit", 0, [(0, 9), (4, 6), (8, 2)]))       # OK (catching up)
    rows.reverse()  # the evaluation orders samples by snapshot time itself
    # change = latest minus first lag, summed: audit 2 - 9; billing (1 - 3) + (9 - 4) + (6 - 4)
    assert group_statuses(rows) == [GroupStatus("audit", OK, "audit/0", 2, 3, 2 - 9),
                                    GroupStatus("billing", STALLED, "orders/1", 1 + 9 + 6, 3, -2 + 5 + 2)]


def test_the_window_keeps_only_the_last_snapshots():
    # moving (lag never decreasing) at first, stuck at offset 4 in the last three snapshots
    rows = _rows("g", "t", 0, [(2, 3), (4, 4), (4, 6), (4, 8)])
    assert group_statuses(rows, window=4)[0].status == WARNING
    assert group_statuses(rows, window=3) == [GroupStatus("g", STALLED, "t/0", 8, 3, 8 - 4)]
    with pytest.raises(ValueError, match="at least 1 snapshot"):
        group_statuses(rows, window=0)


def test_no_history_no_groups():
    assert group_statuses([]) == []
