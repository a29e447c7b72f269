"""messages -> ConsumeQueue units (docs/FORMAT.md §6): the records a ConsumeQueue gets, as rows."""
from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from rocketlake.store import codec, dispatch

#: Transaction types whose records get a unit, read off ``store.dispatch`` (the one rule).
CONSUME_QUEUE_TRANSACTIONS = [t for t in (codec.TRANSACTION_NOT, codec.TRANSACTION_PREPARED,
                                          codec.TRANSACTION_COMMIT, codec.TRANSACTION_ROLLBACK)
                              if dispatch.goes_to_consume_queue(t)]

UNIT_COLUMNS = ("topic", "queue_id", "queue_offset", "commitlog_offset", "size", "tags_code")


def consumequeue_units(messages: DataFrame) -> DataFrame:
    """One row per ConsumeQueue unit: ``topic, queue_id, queue_offset, commitlog_offset, size,
    tags_code``. PREPARED and ROLLBACK records get none. Input: scan message columns."""
    tx = F.col("sys_flag").bitwiseAND(codec.TRANSACTION_MASK)
    return messages.filter(tx.isin(CONSUME_QUEUE_TRANSACTIONS)).select(*UNIT_COLUMNS)
