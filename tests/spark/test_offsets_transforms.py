"""chispa tests of the pure offsets transforms on tiny literal DataFrames (values by hand)."""
from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path

import pyarrow as pa
from chispa import assert_df_equality
from pyspark.sql.pandas.types import from_arrow_schema

from rocketlake.store.config_files import read_consumer_offsets
from rocketlake.transforms.offset_units import UNIT_SCHEMA
from rocketlake.transforms.offsets import (
    COMMITTED_SCHEMA,
    CONSUMER_OFFSETS_SCHEMA,
    HISTORY_SCHEMA,
    QUEUE_OFFSETS_SCHEMA,
    QUEUES_SCHEMA,
    REQUESTS_SCHEMA,
    arrow_schema,
    committed_offsets,
    committed_rows,
    consumer_offsets,
    consumer_rows,
    history_rows,
    queue_offsets,
    queue_requests,
    queue_rows,
    request_rows,
    same_rows,
)

STUDY_STORE = Path(__file__).resolve().parent.parent / "golden" / "study" / "store"
SNAP = datetime(2026, 11, 22, 10, 0, 0, tzinfo=UTC)
BLANK = 0x7FFFFFFF


def ms(n: int | None) -> datetime | None:
    """Epoch milliseconds as the UTC datetime Spark's timestamp_millis gives."""
    return None if n is None else datetime.fromtimestamp(n / 1000, tz=UTC)


def equal(actual, expected) -> None:
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)


def units_df(spark, rows):
    return spark.createDataFrame(rows, from_arrow_schema(UNIT_SCHEMA))


def test_committed_offsets_from_the_golden_broker_file(spark) -> None:
    table = read_consumer_offsets(STUDY_STORE)
    group = "please_rename_unique_group_name_4"
    expected = [(group, "TopicTest", q, 250) for q in range(4)] + [(group, f"%RETRY%{group}", 0, 0)]
    equal(committed_offsets(spark, table), spark.createDataFrame(expected, COMMITTED_SCHEMA))


def test_queue_requests_ask_for_each_last_consumed_unit(spark) -> None:
    queues = spark.createDataFrame([("t", 0), ("t", 1), ("u", 0)], QUEUES_SCHEMA)
    committed = spark.createDataFrame(
        [("g1", "t", 0, 10), ("g2", "t", 0, 4), ("g3", "t", 0, 10), ("g1", "t", 1, 0),
         ("g1", "gone", 0, 7)], COMMITTED_SCHEMA)
    expected = [("t", 0, [3, 9]), ("t", 1, []), ("u", 0, [])]
    equal(queue_requests(queues, committed), spark.createDataFrame(expected, REQUESTS_SCHEMA))


def test_the_arrow_rules_on_empty_inputs_and_a_queue_listed_twice() -> None:
    """No Spark: a store without queues or offsets gives empty tables of the schemas; a queue
    listed twice is requested once, at its first place."""
    queues = pa.Table.from_pylist([{"topic": t, "queue_id": q} for t, q in
                                   [("u", 300), ("t", 0), ("u", 300)]], schema=arrow_schema(QUEUES_SCHEMA))
    committed = committed_rows({("u", "g"): {300: 5, 2: 9}, ("u", "h"): {300: 5}, ("t", "g"): {0: 0}})
    assert request_rows(queues, committed).to_pylist() == [
        {"topic": "u", "queue_id": 300, "wanted": [4]}, {"topic": "t", "queue_id": 0, "wanted": []}]
    none = committed_rows({})
    assert none.schema == arrow_schema(COMMITTED_SCHEMA) and none.num_rows == 0
    assert request_rows(queues.slice(0, 0), none).num_rows == 0
    units = UNIT_SCHEMA.empty_table()
    rows = queue_rows(units, 0, "s", SNAP)
    assert rows.schema == arrow_schema(QUEUE_OFFSETS_SCHEMA) and rows.num_rows == 0
    consumers = consumer_rows({}, rows, units, "s", SNAP)
    assert consumers.schema == arrow_schema(CONSUMER_OFFSETS_SCHEMA) and consumers.num_rows == 0


def test_queue_offsets_skip_pre_blank_and_expired_units(spark) -> None:
    units = units_df(spark, [
        # t/0: a pre-blank unit, one below the CommitLog minimum (1000), then live units
        ("t", 0, 0, 0, BLANK, None, None),
        ("t", 0, 1, 500, 100, None, None),
        ("t", 0, 2, 1000, 100, 5_000, None),
        ("t", 0, 7, 1600, 120, 9_000, None),
        # t/1: every message gone from the CommitLog
        ("t", 1, 0, 100, 50, None, None),
        ("t", 1, 4, 300, 50, None, None),
        # u/3: one unit whose record failed the CommitLog check
        ("u", 3, 0, 2000, 80, None, "no valid record"),
    ])
    expected = [
        ("s", "t", 0, 2, 8, 1000, 1600, ms(9_000), 6, SNAP),
        ("s", "t", 1, 5, 5, None, None, None, 0, SNAP),
        ("s", "u", 3, 0, 1, 2000, 2000, None, 1, SNAP),
    ]
    equal(queue_offsets(units, 1000, "s", SNAP),
          spark.createDataFrame(expected, QUEUE_OFFSETS_SCHEMA))


def test_queue_offsets_same_from_all_units_or_the_boundary_ones(spark) -> None:
    every = [("t", 0, q, 1000 + 100 * q, 100, 7_000 + q, None) for q in range(6)]
    boundary = [every[0], every[3], every[-1]]
    expected = [("s", "t", 0, 0, 6, 1000, 1500, ms(7_005), 6, SNAP)]
    for rows in (every, boundary):
        equal(queue_offsets(units_df(spark, rows), 0, "s", SNAP),
              spark.createDataFrame(expected, QUEUE_OFFSETS_SCHEMA))


def test_consumer_offsets_lag_and_last_consumed_time(spark) -> None:
    queues = spark.createDataFrame([
        ("s", "t", 0, 0, 34, 0, 9_000, ms(1), 34, SNAP),
        ("s", "t", 1, 0, 33, 0, 9_000, ms(1), 33, SNAP),
        ("s", "t", 2, 0, 33, 0, 9_000, ms(1), 33, SNAP),
        ("s", "r", 0, 0, 0, None, None, None, 0, SNAP),
    ], QUEUE_OFFSETS_SCHEMA)
    committed = spark.createDataFrame([
        ("g1", "t", 0, 10),  # lag 24, last consumed = unit 9
        ("g1", "t", 1, 40),  # committed past the max: lag 0, no unit 39
        ("g2", "t", 0, 0),   # nothing consumed: lag 34, no time
        ("g2", "r", 0, 0),   # empty queue
        ("g2", "r", 5, 3),   # a queue the store does not have: max 0
    ], COMMITTED_SCHEMA)
    units = units_df(spark, [("t", 0, 9, 900, 90, 4_242, None),
                             ("t", 0, 33, 3300, 90, 5_000, None)])
    expected = [
        ("s", "g1", "t", 0, 10, 34, 24, ms(4_242), SNAP),
        ("s", "g1", "t", 1, 40, 33, 0, None, SNAP),
        ("s", "g1", "t", 2, 0, 33, 33, None, SNAP),   # t/2 not committed by g1: offset 0
        ("s", "g2", "t", 0, 0, 34, 34, None, SNAP),
        ("s", "g2", "t", 1, 0, 33, 33, None, SNAP),
        ("s", "g2", "t", 2, 0, 33, 33, None, SNAP),
        ("s", "g2", "r", 0, 0, 0, 0, None, SNAP),
        ("s", "g2", "r", 5, 3, 0, 0, None, SNAP),
    ]
    equal(consumer_offsets(committed, queues, units, "s", SNAP),
          spark.createDataFrame(expected, CONSUMER_OFFSETS_SCHEMA))


def test_history_rows_tag_kind_and_date(spark) -> None:
    q = spark.createDataFrame([("s", "t", 0, 2, 8, 1000, 1600, ms(9_000), 6, SNAP)],
                              QUEUE_OFFSETS_SCHEMA)
    c = spark.createDataFrame([("s", "g1", "t", 0, 5, 8, 3, ms(8_000), SNAP)],
                              CONSUMER_OFFSETS_SCHEMA)
    day = date(2026, 11, 22)
    expected = [
        (day, SNAP, "s", "queue", None, "t", 0, 2, 8, 1000, 1600, ms(9_000), 6, None, None, None),
        (day, SNAP, "s", "consumer", "g1", "t", 0, None, 8, None, None, None, None, 5, 3,
         ms(8_000)),
    ]
    equal(history_rows(q, c), spark.createDataFrame(expected, HISTORY_SCHEMA))


def test_same_rows_ignores_snapshot_time_and_order_only(spark) -> None:
    later = datetime(2026, 11, 23, tzinfo=UTC)

    def rows(*consumer_rows: tuple, when: datetime = SNAP):
        """History rows (Arrow) of consumer rows (group, queue, offset, lag) at ``when``."""
        return history_rows(spark.createDataFrame([], QUEUE_OFFSETS_SCHEMA), spark.createDataFrame(
            [("s", g, "t", q, o, 8, lag, None, when) for g, q, o, lag in consumer_rows],
            CONSUMER_OFFSETS_SCHEMA)).toArrow()

    a = rows(("g1", 0, 5, 3), ("g2", 0, 8, 0))
    assert same_rows(a, rows(("g2", 0, 8, 0), ("g1", 0, 5, 3), when=later))  # time, order
    assert not same_rows(a, rows(("g1", 0, 6, 2), ("g2", 0, 8, 0), when=later))
    assert not same_rows(a, rows(("g1", 0, 5, 3)))
    assert not same_rows(a, rows())
