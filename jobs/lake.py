"""Where the lake lives and how its Delta tables are kept: one place for both.

A lake is a URI of any filesystem Spark knows (``file:///...``, ``s3a://bucket/lake``,
``abfss://container@account.dfs.core.windows.net/lake``, ``hdfs://nn/lake``) or a plain local path,
which :func:`lake_uri` turns into an absolute ``file:`` URI. Everything lake-side goes through
Delta (Spark's, or delta-rs' in process: ``jobs.delta_direct``; never ``pathlib``), so the same job
runs against a local lake and object storage.

Every table gets the same Delta properties (:func:`table_properties`): log and deleted-file
retention, ``delta.appendOnly`` for the append-only tables, change data feed when asked for.
No Spark is imported here at module level: the command line parses ``--lake`` without a JVM.
"""
from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocketlake.store.config import BROKER_PROPERTIES, broker_name
from rocketlake.store.errors import SettingError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

#: How long Delta keeps the transaction log (time travel this far back) ...
LOG_RETENTION_DAYS = 30
#: ... and the data files a newer version no longer uses (what VACUUM may delete once older).
DELETED_FILE_RETENTION_DAYS = 7

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+:")  # two letters at least: "C:" is a Windows path


def lake_uri(text: str) -> str:
    """A ``--lake`` value -> the lake's URI: a URI with a scheme as given (trailing ``/`` dropped),
    a plain path as the absolute ``file:`` URI of it (unencoded, as Hadoop's ``Path`` reads it)."""
    text = text.strip()
    if not text:
        raise ValueError("the lake location is empty (give a path or a URI such as s3a://bucket/lake)")
    if _SCHEME.match(text):
        return text.rstrip("/")
    return "file://" + os.path.abspath(os.path.expanduser(text))


def local_path(uri: str) -> Path | None:
    """The local directory of a ``file:`` lake URI (or plain path); None for any other scheme."""
    if not _SCHEME.match(uri):
        return Path(uri)
    if not uri.startswith("file:"):
        return None
    rest = uri[len("file:"):]
    return Path("/" + rest.lstrip("/")) if rest.startswith("/") else Path(rest)


def check_lake(uri: str) -> None:
    """Refuse a lake a reader is given that is a local path with no directory (a mistyped
    ``--lake``): FileNotFoundError naming it. Another filesystem's lake is read as it is."""
    local = local_path(uri)
    if local is not None and not local.is_dir():
        raise FileNotFoundError(f"{local}: no such lake directory (give the --lake that "
                                f"publish-offsets, compact or archive wrote)")


def check_new_table(uri: str) -> None:
    """Refuse to create a Delta table at ``uri`` where a local directory already holds files
    but no Delta table (no ``_delta_log``): the table's files would go among someone's, which
    the lake's VACUUM (optimize-lake) then deletes as files no commit names. FileExistsError
    naming it. A location on another filesystem is taken as it is."""
    local = local_path(uri)
    if local is not None and local.is_dir() and any(local.iterdir()):
        raise FileExistsError(f"{local}: holds files but no Delta table (no _delta_log); refusing "
                              f"to create the lake's table among them (a VACUUM would delete "
                              f"them): move them away, or give a new or empty --lake")


def store_name(root: Path, given: str | None = None, *, reading: bool = False) -> str:
    """The name a store's rows carry in the lake (the ``store`` column, its archive checkpoint):
    ``given``, else the broker's ``brokerName`` from the store's config
    (``store.config.broker_name``). Without either, a job that writes the lake gets a
    SettingError asking for ``--store-name``: the directory's name would be "store" for most
    brokers (RocketMQ's default store is ``~/store``) and their rows would mix in a shared lake.
    A reader (``reading``) falls back to the directory's name, the name lakes written before
    this rule carry. A name that is ``.`` or ``..`` or holds a path separator is a SettingError
    (it names a directory in the lake)."""
    name = given or broker_name(root)
    if name in (".", "..") or "/" in (name or "") or "\\" in (name or ""):
        raise SettingError(f"{root}: the store's name {name!r} cannot be . or .. nor hold a / or \\: "
                           f"it names one directory of the lake, the archive's checkpoint "
                           f"<lake>/_checkpoints/archive/<name>")
    if name:
        return name
    directory = root.resolve().name
    if reading:
        return directory
    raise SettingError(f"{root}: give the store's name in the lake with --store-name NAME (e.g. "
                       f"its broker's brokerName): the store's {BROKER_PROPERTIES} names no "
                       f"brokerName, and its directory's name ({directory!r}) is not used because "
                       f"brokers' stores share names (RocketMQ's default is ~/store) and would mix "
                       f"in a shared lake; a lake written before names it {directory!r}")


def table_uri(lake: str, table: str) -> str:
    """The URI of the table ``table`` in the lake ``lake``."""
    return f"{str(lake).rstrip('/')}/{table}"


def table_exists(spark: SparkSession, uri: str) -> bool:
    """True when a Delta table is at ``uri`` (``DeltaTable.isDeltaTable``)."""
    from delta.tables import DeltaTable

    return bool(DeltaTable.isDeltaTable(spark, uri))


def table_properties(*, append_only: bool, change_data_feed: bool = False) -> dict[str, str]:
    """The Delta properties of a lake table. Change data feed is only ever switched on here (a
    run without it leaves a feed someone enabled as it is)."""
    props = {"delta.logRetentionDuration": f"interval {LOG_RETENTION_DAYS} days",
             "delta.deletedFileRetentionDuration": f"interval {DELETED_FILE_RETENTION_DAYS} days"}
    if append_only:
        props["delta.appendOnly"] = "true"
    if change_data_feed:
        props["delta.enableChangeDataFeed"] = "true"
    return props


@dataclass(frozen=True)
class TableState:
    """What a Delta table's log says, read without touching its data: its properties and the
    newest version of each transaction id (``txnAppId`` -> ``txnVersion``) committed to it."""
    properties: dict[str, str]
    transactions: dict[str, int]


#: the table property under which Delta drops old transactions from a snapshot's state
TXN_RETENTION = "delta.setTransactionRetentionDuration"


def _jvm(spark: SparkSession) -> Any:
    jvm = spark.sparkContext._jvm
    assert jvm is not None, "a running session has a JVM"
    return jvm


def _delta_log(spark: SparkSession, uri: str) -> tuple[Any, Any] | None:
    """(the JVM's cached ``DeltaLog`` of the table at ``uri``, its snapshot brought up to date: the
    same log a write then uses); None when no Delta table is there."""
    jvm = _jvm(spark)
    none = jvm.scala.Option.empty()
    log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, uri)
    snapshot = log.update(False, none, none)
    return None if snapshot.version() < 0 else (log, snapshot)


def table_state(spark: SparkSession, uri: str) -> TableState | None:
    """The state of the Delta table at ``uri`` from its log; None when no Delta table is there.
    The transactions are those the latest version's checksum (``.crc``) lists, read with no Spark
    job; Delta reconstructs the table's state (Spark jobs) when the checksum lists none (no
    ``.crc``, or too many transactions for it) or the table expires transactions
    (:data:`TXN_RETENTION`)."""
    found = _delta_log(spark, uri)
    if found is None:
        return None
    as_java = _jvm(spark).scala.jdk.javaapi.CollectionConverters.asJava
    snapshot = found[1]
    properties = dict(as_java(snapshot.metadata().configuration()))
    checksum = snapshot.checksumOpt()
    listed = checksum.get().setTransactions() if checksum.isDefined() else None
    if listed is not None and listed.isDefined() and TXN_RETENTION not in properties:
        transactions = {t.appId(): int(t.version()) for t in as_java(listed.get())}
    else:
        transactions = {k: int(v) for k, v in as_java(snapshot.transactions()).items()}
    return TableState(properties, transactions)


def ensure_table(spark: SparkSession, uri: str, schema: StructType, partitions: Iterable[str],
                 properties: Mapping[str, str]) -> None:
    """Create the Delta table at ``uri`` (``schema``, ``partitions``, ``properties``) where none
    exists (a table that exists keeps its schema; ``check_new_table`` first); then set the
    properties it lacks or holds other values of (:func:`set_properties`)."""
    # by path: a LOCATION clause would see file:///x and file:/x as two places
    if not table_exists(spark, uri):
        check_new_table(uri)
        columns = ", ".join(f"{_identifier(f.name)} {f.dataType.simpleString()}"
                            + ("" if f.nullable else " NOT NULL") for f in schema.fields)
        parts = ", ".join(_identifier(p) for p in partitions)
        spark.sql(f"CREATE TABLE IF NOT EXISTS delta.{_identifier(uri)} ({columns}) USING DELTA"
                  + (f" PARTITIONED BY ({parts})" if parts else "")
                  + f" TBLPROPERTIES ({_settings(properties)})")
    state = table_state(spark, uri)
    assert state is not None, "the table was just created"
    set_properties(spark, uri, properties, state)


def properties_to_set(current: Mapping[str, str], properties: Mapping[str, str]) -> dict[str, str]:
    """Those of ``properties`` a table whose properties are ``current`` lacks or holds other
    values of."""
    return {k: v for k, v in properties.items() if current.get(k) != v}


def set_properties(spark: SparkSession, uri: str, properties: Mapping[str, str],
                   state: TableState) -> None:
    """Give the table at ``uri`` (whose state is ``state``) the ``properties`` it lacks or holds
    other values of: one ``ALTER TABLE ... SET TBLPROPERTIES`` commit, none when all are set."""
    differ = properties_to_set(state.properties, properties)
    if differ:
        spark.sql(f"ALTER TABLE delta.{_identifier(uri)} SET TBLPROPERTIES ({_settings(differ)})")


def register(spark: SparkSession, database: str, lake: str, tables: Iterable[str]) -> None:
    """Register the lake's tables ``tables`` (those that exist) in the catalog's ``database``
    (created if needed) as ``database.table``, external tables at their lake location."""
    db = _identifier(database)
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {db}")
    for table in tables:
        uri = table_uri(lake, table)
        if table_exists(spark, uri):
            spark.sql(f"CREATE TABLE IF NOT EXISTS {db}.{_identifier(table)} USING DELTA "
                      f"LOCATION {_literal(uri)}")


def _identifier(name: str) -> str:
    """``name`` as a quoted Spark SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


def _settings(properties: Mapping[str, str]) -> str:
    """``properties`` as the list of a TBLPROPERTIES clause."""
    return ", ".join(f"{_literal(k)} = {_literal(v)}" for k, v in sorted(properties.items()))


def _literal(text: str) -> str:
    """``text`` as a Spark SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
