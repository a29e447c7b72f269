"""Delta tables read and written in this process (delta-rs, the ``deltalake`` package): no JVM and
no Spark job, for the lake's small tables, where a cold JVM's first Delta operation costs seconds
(benchmarks/RESULTS.md, "Fixed costs").

The tables are the same Delta tables Spark reads and writes (the protocol is the table's, the
commit's ``userMetadata`` and transaction ids are Delta's own actions); a lake URI names them as
it does for Spark (:func:`rocketlake.jobs.lake.lake_uri`: ``file:``, ``s3a:``, ``abfss:``,
``gs:``, ``hdfs:``). Object stores take their credentials from the environment (``AWS_*``,
``AZURE_*``, ``GOOGLE_*``; delta-rs' own settings), not from Spark's Hadoop configuration.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from rocketlake.jobs.lake import TableState, check_new_table, local_path, properties_to_set

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable


def location(uri: str) -> str:
    """Where delta-rs finds the table at ``uri``: a ``file:`` URI as its local path (a path with
    spaces is no URL), any other URI as it is."""
    path = local_path(uri)
    return str(path) if path is not None else uri


def open_table(uri: str) -> DeltaTable | None:
    """The Delta table at ``uri`` at its latest version; None when none is there."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        return DeltaTable(location(uri))
    except TableNotFoundError:
        return None


def table_state(table: DeltaTable, app_ids: Iterable[str]) -> TableState:
    """``table``'s properties and the newest committed version of each of ``app_ids`` (those
    committed at all; Delta's transaction ids)."""
    versions = {app: table.transaction_version(app) for app in app_ids}
    return TableState(dict(table.metadata().configuration),
                      {app: int(v) for app, v in versions.items() if v is not None})


def column_names(table: DeltaTable) -> set[str]:
    """The names of ``table``'s columns."""
    return {f.name for f in table.schema().fields}


def read_rows(table: DeltaTable, columns: Iterable[str],
              filters: list[tuple[str, str, Any]] | None = None) -> pa.Table:
    """The columns ``columns`` of ``table``'s rows that pass ``filters`` (delta-rs' DNF filters, for
    example ``[("snapshot_date", "=", date(2026, 11, 26))]``: a partition column's prunes files);
    timestamps in UTC."""
    return table.to_pyarrow_table(filters=filters, columns=list(columns))


def collected(rows: pa.Table) -> list[dict[str, Any]]:
    """``rows`` (as :func:`read_rows` returns them) as Spark's ``collect()`` gives them: dicts, a
    timestamp as pyspark's ``TimestampType`` makes it of its microseconds."""
    import pyarrow as pa
    from pyspark.sql.types import TimestampType

    stamps = {f.name for f in rows.schema if pa.types.is_timestamp(f.type)}
    out = rows.cast(pa.schema([pa.field(f.name, pa.int64()) if f.name in stamps else f
                               for f in rows.schema])).to_pylist()
    as_time = TimestampType().fromInternal
    return [{k: as_time(v) if k in stamps and v is not None else v for k, v in r.items()}
            for r in out]


def append(uri: str, rows: pa.Table, table: DeltaTable | None, *, partition_by: list[str],
           properties: Mapping[str, str], transaction: tuple[str, int] | None = None,
           user_metadata: str | None = None, merge_schema: bool = False) -> None:
    """Append ``rows`` to the table at ``uri`` (``table``: it, None when there is none) in one
    commit that carries ``transaction`` (a transaction id and its version) and ``user_metadata``
    when given. A new table is created by this commit, with ``properties`` and ``partition_by``
    (``lake.check_new_table`` first);
    an existing one first gets the ``properties`` it lacks or holds other values of (one commit,
    none when all are set), and with ``merge_schema`` the columns of ``rows`` it lacks."""
    from deltalake import CommitProperties, Transaction, write_deltalake

    if table is None:
        check_new_table(uri)
    else:
        differ = properties_to_set(table.metadata().configuration, properties)
        if differ:
            table.alter.set_table_properties(differ, raise_if_not_exists=False)
    write_deltalake(table if table is not None else location(uri), rows, mode="append",
                    partition_by=partition_by or None,
                    configuration=None if table else dict(properties),
                    schema_mode="merge" if merge_schema and table is not None else None,
                    commit_properties=CommitProperties(
                        custom_metadata=None if user_metadata is None else {"userMetadata": user_metadata},
                        app_transactions=None if transaction is None else [Transaction(*transaction)]))


def commit_metadata(table: DeltaTable, limit: int) -> list[str | None]:
    """The ``userMetadata`` of ``table``'s ``limit`` latest commits (None for a commit without),
    newest first; commits whose files the log no longer keeps are not read."""
    return [info.get("userMetadata") for info in table.history(limit)]
