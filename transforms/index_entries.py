"""messages -> IndexFile entries (docs/FORMAT.md §7), the whole put chain done with sorts and windows.

RocketMQ puts keys one at a time: entry ``i`` of a file takes position ``indexCount``, its
prevIndex is the slot's old value, the slot then points at it; a file holds ``maxIndexNum - 1``
keys and the next key opens a new file. Because every key's place depends only on how many keys
came before it, the whole chain follows from one global rank:

- rank ``g`` of a key in put order (CommitLog offset, then key order within the message),
  counted per offset bucket with ``row_number`` and offset by the bucket sizes before it;
- file ``g // (maxIndexNum - 1)`` and position ``g % (maxIndexNum - 1) + 1``;
- prevIndex = the previous position in the same (file, slot), a ``lag`` window;
- timeDiff against the header's beginTimestamp as it was at each put (the first put of a file
  still sees the previous file's end time, see ``store.kernels.index.place``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType

from rocketlake.store import codec, dispatch
from rocketlake.transforms.consume_queue_units import transaction_filter

#: What joins topic and key in an index key ("topic#key"), read off ``store.dispatch``.
TOPIC_KEY_SEPARATOR = dispatch.index_keys("t", {codec.PROPERTY_KEYS: "k"}, 0)[0][1:-1]
#: The message columns :func:`index_keys` reads.
KEY_INPUT_COLUMNS = ("commitlog_offset", "store_timestamp", "topic", "sys_flag", "uniq_key", "keys")
DEFAULT_BUCKET_BYTES = 64 << 20


@dataclass(frozen=True)
class IndexStart:
    """The open index file new keys continue in. The defaults describe an empty index: a virtual
    file with no keys and beginTimestamp 0 (RocketMQ's first file starts from (0, 0)).

    ``index_count`` is that file's indexCount (``maxIndexNum`` when it is full, so new keys open
    a new file), ``begin_ts`` / ``end_ts`` its header times, and ``slots`` (columns ``slot``,
    ``value``) its non-empty hash slots.
    """
    index_count: int = 1
    begin_ts: int = 0
    end_ts: int = 0
    slots: DataFrame | None = None


class IndexChain(NamedTuple):
    """``entries``: file_no, position, key_hash, phy_offset, time_diff, prev_index.
    ``files``: file_no, first_ts, first_phy, last_ts, last_phy, index_count, new_slots
    (file_no 0 is the open file of the IndexStart). ``slots``: file_no, slot, value (the slot's
    final value)."""
    entries: DataFrame
    files: DataFrame
    slots: DataFrame
    #: every key's place (:func:`place_keys`), persisted: the three frames above derive from it
    placed: DataFrame

    def release(self) -> None:
        """Drop the persisted placements once the chain has been written."""
        self.placed.unpersist()


@F.arrow_udf(IntegerType())  # type: ignore[call-overload]  # pyspark's stubs lack the type-hint form
def index_key_hash(keys: pa.Array) -> pa.Array:
    """IndexFile keyHash of "topic#key" strings (``store.codec.index_key_hash``), vectorised."""
    hashes = codec.index_key_hash(codec.java_hash_many(keys.to_pylist()))
    return pa.array(np.asarray(hashes, dtype=np.int32))


def _is_indexed(sys_flag: int) -> bool:
    """Whether a record of this SYSFLAG gets index keys, read off ``store.dispatch.index_keys``."""
    return bool(dispatch.index_keys("t", {codec.PROPERTY_KEYS: "k"}, sys_flag))


def index_keys(messages: DataFrame) -> DataFrame:
    """One row per index key, as the store puts them: ``commitlog_offset, key_pos,
    store_timestamp, topic, key`` (key: "topic#key"); UNIQ_KEY first, then each KEYS token; none for
    ROLLBACK records."""
    uniq = F.when(F.col("uniq_key").isNotNull(), F.array("uniq_key")).otherwise(F.array())
    keys = F.concat(uniq, F.coalesce(F.col("keys"), F.array().cast("array<string>")))
    return (messages.filter(transaction_filter(_is_indexed))
            .select("commitlog_offset", "store_timestamp", "topic",
                    F.posexplode(keys).alias("key_pos", "k"))
            .select("commitlog_offset", "key_pos", "store_timestamp", "topic",
                    F.concat_ws(TOPIC_KEY_SEPARATOR, "topic", "k").alias("key")))


def place_keys(keys: DataFrame, slot_num: int, entry_num: int, start: IndexStart = IndexStart(),
               bucket_bytes: int = DEFAULT_BUCKET_BYTES) -> DataFrame:
    """Each key's place: ``file_no, position, slot, key_hash, phy_offset, ts, prev_index,
    new_slot`` (new_slot: the put found its slot empty, so hashSlotCount grows)."""
    per_file = entry_num - 1
    hashed = keys.withColumn("key_hash", index_key_hash("key")).withColumn(
        "bucket", F.floor(F.col("commitlog_offset") / bucket_bytes))
    order = Window.partitionBy("bucket").orderBy("commitlog_offset", "key_pos")
    ranked = hashed.withColumn("local", F.row_number().over(order) - 1)
    sizes = ranked.groupBy("bucket").agg(F.count(F.lit(1)).alias("n"))
    # Keys in earlier buckets (a join of the tiny per-bucket table with itself).
    earlier = sizes.select(F.col("bucket").alias("b"), F.col("n").alias("m"))
    bases = (sizes.join(F.broadcast(earlier), F.col("b") < F.col("bucket"), "left")
             .groupBy("bucket").agg(F.coalesce(F.sum("m"), F.lit(0)).alias("base")))
    g = F.col("base") + F.col("local") + (start.index_count - 1)
    placed = (ranked.join(F.broadcast(bases), "bucket")
              .select((g / per_file).cast("long").alias("file_no"),
                      (g % per_file + 1).cast("int").alias("position"),
                      (F.col("key_hash") % slot_num).cast("int").alias("slot"),
                      "key_hash", F.col("commitlog_offset").alias("phy_offset"),
                      F.col("store_timestamp").alias("ts")))
    prev = F.lag("position").over(Window.partitionBy("file_no", "slot").orderBy("position"))
    placed = placed.withColumn("prev", prev)
    if start.slots is not None:
        old = start.slots.select(F.col("slot").alias("old_slot"), F.col("value").alias("old"))
        placed = placed.join(F.broadcast(old), (F.col("file_no") == 0)
                             & (F.col("slot") == F.col("old_slot")), "left").drop("old_slot")
    else:
        placed = placed.withColumn("old", F.lit(None).cast("int"))
    old_valid = (F.col("old") > 0) & (F.col("old") <= F.col("position"))
    return placed.select(
        "file_no", "position", "slot", "key_hash", "phy_offset", "ts",
        F.coalesce("prev", F.when(old_valid, F.col("old")), F.lit(0)).cast("int").alias("prev_index"),
        (F.col("prev").isNull() & ~F.coalesce(old_valid, F.lit(False))).alias("new_slot"))


def index_files(placed: DataFrame) -> DataFrame:
    """Per file of placed keys: ``file_no, first_ts, first_phy, last_ts, last_phy, index_count,
    new_slots``."""
    return placed.groupBy("file_no").agg(
        F.min_by("ts", "position").alias("first_ts"),
        F.min_by("phy_offset", "position").alias("first_phy"),
        F.max_by("ts", "position").alias("last_ts"),
        F.max_by("phy_offset", "position").alias("last_phy"),
        (F.max("position") + 1).cast("int").alias("index_count"),
        F.sum(F.col("new_slot").cast("int")).alias("new_slots"))


def index_slots(placed: DataFrame) -> DataFrame:
    """Each touched slot's final value: ``file_no, slot, value``."""
    return placed.groupBy("file_no", "slot").agg(F.max("position").alias("value"))


def index_entries(placed: DataFrame, files: DataFrame, start: IndexStart = IndexStart()) -> DataFrame:
    """The entries: ``file_no, position, key_hash, phy_offset, time_diff, prev_index``. timeDiff
    is against beginTimestamp as each put saw it: the first put of a file sees the previous
    file's end time (``start.begin_ts`` for file 0), later ones the file's first put time."""
    before = files.select((F.col("file_no") + 1).alias("file_no"), F.col("last_ts").alias("prev_last"))
    prev_end = F.coalesce(F.col("prev_last"), F.lit(start.end_ts))
    begins = files.join(before, "file_no", "left").select(
        "file_no",
        F.when(F.col("file_no") == 0, F.lit(start.begin_ts)).otherwise(prev_end).alias("open_begin"),
        F.when((F.col("file_no") == 0) & F.lit(start.index_count > 1), F.lit(start.begin_ts))
        .otherwise(F.col("first_ts")).alias("begin"))
    seen = F.when(F.col("position") == 1, F.col("open_begin")).otherwise(F.col("begin"))
    diff = F.least(F.greatest(F.floor((F.col("ts") - seen) / 1000), F.lit(0)),
                   F.lit(codec.INDEX_MAX_TIME_DIFF))
    return (placed.join(F.broadcast(begins), "file_no")
            .select("file_no", "position", "key_hash", "phy_offset",
                    F.when(seen > 0, diff).otherwise(0).cast("int").alias("time_diff"),
                    "prev_index"))


def index_chain(keys: DataFrame, slot_num: int, entry_num: int, start: IndexStart = IndexStart(),
                bucket_bytes: int = DEFAULT_BUCKET_BYTES) -> IndexChain:
    """Place ``keys`` (rows of :func:`index_keys`) into index files as RocketMQ's puts would;
    the placements are persisted (``IndexChain.release`` drops them)."""
    placed = place_keys(keys, slot_num, entry_num, start, bucket_bytes).persist()
    files = index_files(placed)
    return IndexChain(index_entries(placed, files, start), files, index_slots(placed), placed)
