"""Which scan rows get a ConsumeQueue unit (docs/FORMAT.md §6), as Spark column predicates."""
from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column
from pyspark.sql import functions as F

from rocketlake.store import codec, dispatch


def transaction_filter(rule: Callable[[int], bool]) -> Column:
    """Scan rows whose SYSFLAG transaction type passes ``rule``, a ``store.dispatch`` rule over
    a SYSFLAG (the one definition of which records it admits)."""
    types = [t for t in codec.TRANSACTION_TYPES if rule(t)]
    return F.col("sys_flag").bitwiseAND(codec.TRANSACTION_MASK).isin(types)


def gets_unit() -> Column:
    """Scan rows that get a ConsumeQueue unit (``store.dispatch.goes_to_consume_queue``: NOT and
    COMMIT records; PREPARED and ROLLBACK get none)."""
    return transaction_filter(dispatch.goes_to_consume_queue)
