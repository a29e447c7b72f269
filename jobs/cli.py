"""`rocketlake`: one command line over the store library and the Spark jobs.

The command table below declares every command, its options and the function that runs it
(``module:function``, called with the parsed arguments, returning an exit code). Options that
several commands take are declared once (``_store``, ``_settings``, ...). Modules are imported
only for the command that runs, so store commands never start (or import) Spark. A job script
(``spark-submit jobs/<job>.py ...``) runs the same command through :func:`job_main`.
"""
from __future__ import annotations

import argparse
import importlib
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from rocketlake import __version__
from rocketlake.jobs.exit_codes import run
from rocketlake.jobs.lake import DELETED_FILE_RETENTION_DAYS, lake_uri
from rocketlake.store import store_time


# --- times --------------------------------------------------------------------------------------
def parse_time(text: str) -> int:
    """A time option (``store.store_time.parse_time``) -> epoch milliseconds."""
    try:
        return store_time.parse_time(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def to_datetime(ms: int) -> datetime:
    """Epoch milliseconds -> an aware UTC datetime (exact to the millisecond)."""
    return datetime.fromtimestamp(ms // 1000, UTC).replace(microsecond=ms % 1000 * 1000)


# --- options several commands share -------------------------------------------------------------
def _store(p: argparse.ArgumentParser, default: Path | None = None) -> None:
    if default is None:
        p.add_argument("--store", required=True, type=Path, help="store root directory")
    else:
        p.add_argument("--store", type=Path, default=default,
                       help="store root directory (default %(default)s)")


def _settings(p: argparse.ArgumentParser) -> None:
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="override a store setting (RocketMQ name, see conf/store.conf); repeatable")


def _lake_location(text: str) -> str:
    """A ``--lake`` option: a path or a URI (file:, s3a:, abfss:, hdfs:, ...) -> the lake's URI."""
    try:
        return lake_uri(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


#: what a --lake option accepts (a sentence of its help)
LAKE_HELP = "a directory or a URI Spark can write: file:///..., s3a://, abfss://, hdfs://"


def _lake(p: argparse.ArgumentParser, required: bool = True, default: str | None = None) -> None:
    p.add_argument("--lake", type=_lake_location, required=required, default=default,
                   help=f"Delta lake root: {LAKE_HELP}" + (" (default %(default)s)" if default else ""))


def _run_log(p: argparse.ArgumentParser) -> None:
    p.add_argument("--lake", type=_lake_location,
                   help=f"also record this run in <lake>/maintenance_runs (the report lists it); "
                        f"{LAKE_HELP}")


def _lake_tables(p: argparse.ArgumentParser) -> None:
    """Options of the jobs that create lake tables: catalog registration, change data feed."""
    p.add_argument("--database", metavar="NAME",
                   help="also register the lake's tables in the Spark catalog as NAME.<table> "
                        "(CREATE DATABASE / CREATE TABLE ... USING DELTA LOCATION, if not there)")
    p.add_argument("--change-data-feed", action="store_true",
                   help="switch on Delta's change data feed of the tables this job writes "
                        "(default: off; once on, a run without this flag leaves it on)")


def _split_bytes(p: argparse.ArgumentParser) -> None:
    p.add_argument("--split-bytes", type=int,
                   help="CommitLog bytes per Spark scan task (default: the scan's, 64 MiB)")


def _store_name(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store-name", help="the store's name in the lake (default: the store directory's name)")


def _topic_queue(p: argparse.ArgumentParser, required: bool = False) -> None:
    p.add_argument("--topic", required=required, help="topic name")
    p.add_argument("--queue", type=int, required=required, help="queue id")


def _max(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max", type=int, default=32, help="most messages to return (default %(default)s)")


def _count(text: str) -> int:
    """A count option: an integer >= 0."""
    if not re.fullmatch(r"\d+", text.strip()):
        raise argparse.ArgumentTypeError(f"not a count: {text!r} (give an integer >= 0)")
    return int(text)


def _format(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=["json", "text"], default="json",
                   help="json: one JSON object a line (JSON Lines); text: one readable line a message "
                        "(ISO-8601 UTC times, body as UTF-8, escaped) (default %(default)s)")
    p.add_argument("--max-body", type=_count, default=200, metavar="N",
                   help="--format text: show at most N characters of a body (default %(default)s)")


def _store_time_range(p: argparse.ArgumentParser, note: str) -> None:
    p.add_argument("--begin", type=parse_time, default=0,
                   help=f"earliest store time, inclusive (ISO-8601 or epoch ms){note}")
    p.add_argument("--end", type=parse_time, default=2 ** 63 - 1,
                   help=f"latest store time, inclusive (ISO-8601 or epoch ms){note}")


#: how get and query end when they find nothing (a sentence of their --help)
NOTHING_FOUND = "Finding nothing is not an error: a line on stderr says so and the exit code is 0."


def _master(p: argparse.ArgumentParser) -> None:
    p.add_argument("--master", default="local[*]",
                   help="Spark master, e.g. spark://HOST:7077 (client mode: the executors get the "
                        "package from the driver; the store must be at the same path on every "
                        "executor); ignored under spark-submit (default %(default)s)")


def _job(p: argparse.ArgumentParser) -> None:
    """``--store``, ``--set``, ``--split-bytes`` and ``--master``: what every Spark job over a store
    takes."""
    _store(p)
    _settings(p)
    _split_bytes(p)
    _master(p)


# --- the commands -------------------------------------------------------------------------------
def _pipeline(p: argparse.ArgumentParser) -> None:
    _store(p, default=Path("var") / "store")
    _lake(p, required=False, default=str(Path("var") / "lake"))
    _settings(p)
    _master(p)
    p.add_argument("--messages", type=int, default=50_000,
                   help="sample events to ingest (default %(default)s)")
    p.add_argument("--skip-ingest", action="store_true", help="use the store as it is (a real store)")
    p.add_argument("--keep", action="store_true", help="keep an existing sample store and add to it")


def _ingest(p: argparse.ArgumentParser) -> None:
    _store(p)
    _settings(p)
    p.add_argument("file", help="JSON Lines file of events, or a Parquet file of put_table's "
                                "columns (rows counted from 0), or - for stdin")


def _dump(p: argparse.ArgumentParser) -> None:
    p.add_argument("what", choices=["commitlog", "consumequeue", "index"], help="which records to print")
    _store(p)
    _settings(p)
    p.add_argument("--topic", help="commitlog: records of this (stored) topic; consumequeue: this "
                                   "topic's queues only (not for index)")
    p.add_argument("--queue", type=int, help="records / queues of this queue id (not for index)")
    p.add_argument("--from-offset", type=int, default=0, metavar="OFFSET",
                   help="first offset, inclusive: commitlog and index: a CommitLog offset (the scan "
                        "starts there); consumequeue: a queue offset (default %(default)s)")
    p.add_argument("--to-offset", type=int, metavar="OFFSET",
                   help="end offset, exclusive, in the same unit as --from-offset (default: the end)")
    _store_time_range(p, "; consumequeue: of each unit's record; index: of each entry "
                         "(beginTimestamp + timeDiff seconds)")
    _format(p)


def _get(p: argparse.ArgumentParser) -> None:
    _store(p)
    _settings(p)
    _topic_queue(p, required=True)
    p.add_argument("--offset", type=int, default=0, help="first queue offset to read (default %(default)s)")
    _max(p)
    p.add_argument("--tags", help="subscription expression, e.g. 'TagA || TagB'")
    _format(p)
    p.description = f"{p.description}. {NOTHING_FOUND}"


def _query(p: argparse.ArgumentParser) -> None:
    _store(p)
    _settings(p)
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--key", help="message key (needs --topic)")
    g.add_argument("--msg-id",
                   help="offset msgId (32 or 56 hex digits) or UNIQ_KEY (with --topic: in that topic)")
    g.add_argument("--time", type=parse_time,
                   help="store time (ISO-8601 or epoch ms): the queue offset stored then "
                        "(needs --topic, --queue)")
    _topic_queue(p)
    _max(p)
    _store_time_range(p, "; --key only")
    _format(p)
    p.description = f"{p.description}. {NOTHING_FOUND}"


def _verify(p: argparse.ArgumentParser) -> None:
    _store(p)
    _settings(p)
    p.add_argument("--json", action="store_true",
                   help="print one JSON report on stdout, every problem with its file, offset and kind")
    p.add_argument("--max-problems", type=_count, default=20, metavar="N",
                   help="text report: list the first N problems (all are counted by file and kind "
                        "above them) (default %(default)s)")


def _check_consistency(p: argparse.ArgumentParser) -> None:
    _store(p)
    _settings(p)
    p.add_argument("--report", required=True, type=Path, help="where to write the JSON report")
    _run_log(p)


def _report(p: argparse.ArgumentParser) -> None:
    _store(p)
    _settings(p)
    _lake(p, required=False)
    _store_name(p)
    p.add_argument("--out", type=Path, required=True, help="the HTML file to write")
    p.add_argument("--lag-window", type=int, default=10,
                   help="snapshots per queue a group's lag status is judged over (default %(default)s)")


def _rebuild(p: argparse.ArgumentParser) -> None:
    _job(p)
    _run_log(p)
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--output", type=Path,
                      help="write the rebuilt files under this directory; leave the store alone")
    mode.add_argument("--incremental", action="store_true",
                      help="only add what the store's files lack, in place")


def _structures(value: str) -> list[str]:
    names = [v.strip() for v in value.split(",") if v.strip()]
    wrong = [n for n in names if n not in ("consumequeue", "index")]
    if wrong or not names:
        raise argparse.ArgumentTypeError(f"expected consumequeue, index or both, got {value!r}")
    return list(dict.fromkeys(names))


def _rebuild_both(p: argparse.ArgumentParser) -> None:
    _rebuild(p)
    p.add_argument("--structures", type=_structures, default=["consumequeue", "index"],
                   help="what to rebuild, comma-separated (default: consumequeue,index)")


def _publish_offsets(p: argparse.ArgumentParser) -> None:
    _job(p)
    _lake(p)
    _lake_tables(p)
    _store_name(p)
    p.add_argument("--snapshot-time", type=parse_time,
                   help="the snapshot's time, ISO-8601 or epoch ms (default: now); a scheduler passes "
                        "its logical time so a retried run is the same snapshot")


def _compact(p: argparse.ArgumentParser) -> None:
    _job(p)
    _lake(p)
    _lake_tables(p)
    _store_name(p)
    p.add_argument("--protect-unconsumed", action="store_true",
                   help="keep files holding messages a consumer group has not read")
    p.add_argument("--dry-run", action="store_true", help="print what would be deleted; change nothing")
    p.add_argument("--respect-delete-when", action="store_true",
                   help="expire only at a deleteWhen hour or above diskMaxUsedSpaceRatio, as the "
                        "broker does (default: whenever the job runs; its schedule picks the hour)")
    p.add_argument("--force", action="store_true",
                   help="with --respect-delete-when: expire now, whatever the hour")
    p.add_argument("--now", type=parse_time,
                   help="evaluate retention at this time (ISO-8601 or epoch ms), not now")
    p.add_argument("--topic", action="append", default=[], help="also compact this topic (repeatable)")


def _optimize_lake(p: argparse.ArgumentParser) -> None:
    _lake(p)
    p.add_argument("--retention-hours", type=_count, default=DELETED_FILE_RETENTION_DAYS * 24,
                   metavar="H", help="VACUUM data files unused for longer than H hours "
                                     "(default %(default)s, the tables' deleted-file retention)")
    p.add_argument("--allow-short-retention", action="store_true",
                   help="allow --retention-hours below the default (Delta's safety check: a "
                        "reader or writer still using an older version may fail)")


def _json_rows(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON object per row, not a table")


def _lag(p: argparse.ArgumentParser) -> None:
    _store(p)
    _settings(p)
    p.add_argument("--group", help="only this consumer group")
    p.add_argument("--topic", help="only this topic")
    _json_rows(p)


def _topic_status(p: argparse.ArgumentParser) -> None:
    _store(p)
    _settings(p)
    p.add_argument("--topic", help="only this topic")
    _json_rows(p)


def _offsets(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=["reset"], help="what to do with the group's offsets")
    _store(p)
    _settings(p)
    p.add_argument("--group", required=True, help="consumer group")
    p.add_argument("--topic", required=True, help="topic whose queues to reset")
    to = p.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-datetime", type=parse_time,
                    help="the offset of the message stored at this time (ISO-8601 or epoch ms)")
    to.add_argument("--to-offset", type=int, help="this offset, clamped to each queue's [min, max]")
    to.add_argument("--shift-by", type=int,
                    help="the committed offset plus this (negative: back), clamped to [min, max]")
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--dry-run", action="store_true", help="print old and new offsets; write nothing")
    mode.add_argument("--execute", action="store_true",
                      help="write the new offsets to config/consumerOffset.json (refused while a "
                           "writer holds the store)")
    _json_rows(p)


@dataclass(frozen=True)
class Command:
    help: str
    target: str  #: "module:function", the function taking the parsed arguments
    arguments: Callable[[argparse.ArgumentParser], None]
    example: str


_S = "rocketlake.jobs.store_commands"
_O = "rocketlake.jobs.operator_commands"
COMMANDS: dict[str, Command] = {
    "pipeline": Command("the main job: sample -> store -> checks -> Spark rebuild -> Delta -> summary",
                        "rocketlake.jobs.pipeline:run", _pipeline,
                        "rocketlake pipeline --messages 200000 --master 'local[2]'"),
    "ingest": Command("write JSON Lines or Parquet events into a store, all rows or none",
                      f"{_S}:cmd_ingest", _ingest,
                      "echo '{\"topic\":\"orders\",\"body\":\"hi\",\"keys\":\"k1\"}' "
                      "| rocketlake ingest --store var/store -"),
    "dump": Command("print commitlog / consumequeue / index records as JSON Lines or text",
                    f"{_S}:cmd_dump", _dump, "rocketlake dump consumequeue --store var/store --topic orders"),
    "get": Command("read a queue from an offset (RocketMQ getMessage)", f"{_S}:cmd_get", _get,
                   "rocketlake get --store var/store --topic orders --queue 0 --offset 0 "
                   "--tags 'TagA || TagB'"),
    "query": Command("find messages by --key, --msg-id or --time", f"{_S}:cmd_query", _query,
                     "rocketlake query --store var/store --topic orders --queue 0 "
                     "--time 2026-11-22T10:00:00Z"),
    "verify": Command("check a whole store (fsck); exit 1 on any disagreement", f"{_S}:cmd_verify", _verify,
                      "rocketlake verify --store var/store --json | jq .problems"),
    "check-consistency": Command("verify a store and write a JSON report naming what to rebuild",
                                 "rocketlake.jobs.check_consistency:run", _check_consistency,
                                 "rocketlake check-consistency --store var/store "
                                 "--report var/consistency.json"),
    "report": Command("write a self-contained HTML report of a store and its lake",
                      "rocketlake.jobs.report:run", _report,
                      "rocketlake report --store var/store --lake var/lake --out var/report.html"),
    "rebuild": Command("Spark: rebuild ConsumeQueues and IndexFiles from one CommitLog scan "
                       "(full, --incremental, --output)",
                       "rocketlake.jobs.rebuild:run", _rebuild_both,
                       "rocketlake rebuild --store var/store --structures consumequeue,index"),
    "rebuild-consumequeue": Command("Spark: rebuild ConsumeQueues from the CommitLog "
                                    "(full, --incremental, --output)",
                                    "rocketlake.jobs.rebuild_consumequeue:run", _rebuild,
                                    "rocketlake rebuild-consumequeue --store var/store --output var/rebuilt"),
    "rebuild-index": Command("Spark: rebuild IndexFiles from the CommitLog (full, --incremental, --output)",
                             "rocketlake.jobs.rebuild_index:run", _rebuild,
                             "rocketlake rebuild-index --store var/store --incremental"),
    "publish-offsets": Command("Spark: publish queue offsets, consumer offsets and lag as Delta tables",
                               "rocketlake.jobs.publish_offsets:run", _publish_offsets,
                               "rocketlake publish-offsets --store var/store --lake var/lake"),
    "compact": Command("Spark: expire old CommitLog files (archived to Delta first), compact keyed topics",
                       "rocketlake.jobs.compact:run", _compact,
                       "rocketlake compact --store var/store --lake var/lake --protect-unconsumed --dry-run"),
    "optimize-lake": Command("Spark: OPTIMIZE the lake's Delta tables (Z-order where it pays), then "
                             "VACUUM with the retention", "rocketlake.jobs.optimize_lake:run",
                             _optimize_lake, "rocketlake optimize-lake --lake s3a://bucket/lake"),
    "lag": Command("consumer offsets, max offsets and lag per group and queue (mqadmin consumerProgress)",
                   f"{_O}:cmd_lag", _lag, "rocketlake lag --store var/store --group billing --json"),
    "topic-status": Command("min / max offset and last update per queue (mqadmin topicStatus)",
                            f"{_O}:cmd_topic_status", _topic_status,
                            "rocketlake topic-status --store var/store --topic orders"),
    "offsets": Command("reset a group's offsets for a topic by time, offset or shift (dry run first)",
                       f"{_O}:cmd_offsets", _offsets,
                       "rocketlake offsets reset --store var/store --group billing --topic orders "
                       "--to-datetime 2026-11-22T10:00:00Z --dry-run"),
}

EXIT_CODES = """exit codes:
  0  ok
  1  the check found problems (verify, a pipeline check)
  2  bad usage or input (options, --set, an event line, a refused path, not a store)
  3  the store is unusable (corrupt beyond reading, locked by a live writer, disk full)
"""


def parser() -> argparse.ArgumentParser:
    """The `rocketlake` parser: one subcommand per entry of :data:`COMMANDS`."""
    fmt = argparse.RawDescriptionHelpFormatter
    p = argparse.ArgumentParser(prog="rocketlake", formatter_class=fmt, epilog=EXIT_CODES,
                                description="Write, read and maintain Apache RocketMQ 4.9 message stores.")
    p.add_argument("--version", action="version", version=f"rocketlake {__version__}")
    sub = p.add_subparsers(dest="command", metavar="<command>", required=True)
    for name, c in COMMANDS.items():
        cp = sub.add_parser(name, help=c.help, description=c.help, formatter_class=fmt,
                            epilog=f"example:\n  {c.example}\n\n{EXIT_CODES}")
        c.arguments(cp)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run ``rocketlake <command> [options]``; returns the exit code (see :mod:`exit_codes`)."""
    args = parser().parse_args(sys.argv[1:] if argv is None else argv)
    module, function = COMMANDS[args.command].target.split(":")
    if getattr(args, "master", None) is not None:  # a Spark job: its sessions use this master
        from rocketlake.jobs import spark_session

        spark_session.default_master = args.master
    target: Callable[[argparse.Namespace], int] = getattr(importlib.import_module(module), function)
    return int(run(f"rocketlake {args.command}", lambda: target(args)))


def job_main(command: str, argv: list[str] | None) -> int:
    """``spark-submit jobs/<job>.py [options]``: the same as ``rocketlake <command> [options]``."""
    return main([command, *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
