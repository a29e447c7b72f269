"""Each Spark job as a command: its help, its options, an example, and the entry spark-submit runs.

A job runs as ``spark-submit jobs/<job>.py [options]`` (its ``main``, through :func:`job_main`)
or as ``rocketlake <command> [options]`` (the `rocketlake` program builds its subcommands from
:data:`JOBS`); both parse the same options. Options several commands take are declared once here
(``add_store``, ``add_settings``, ...); the `rocketlake` program uses them for its own commands
too. No Spark here: the program builds its parser without importing Spark.
"""
from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocketlake.jobs import exit_codes
from rocketlake.jobs.console_log import add_verbosity
from rocketlake.jobs.default_store import CONFIG_ENV, STORE_ENV, default_store, missing_store
from rocketlake.jobs.lake import DELETED_FILE_RETENTION_DAYS, lake_uri, local_path
from rocketlake.jobs.rebuild_structures import STRUCTURES, parse_structures, structures_arg
from rocketlake.jobs.times import parse_time
from rocketlake.store.errors import UnsafePathError
from rocketlake.store.store_dir import check_outside

Arguments = Callable[[argparse.ArgumentParser], None]


@dataclass(frozen=True)
class Command:
    """A command: what it does (its help), its options, and the function that runs it."""
    help: str
    target: str  #: "module:function", the function taking the parsed arguments, returning an exit code
    arguments: Arguments
    example: str

    def parser_settings(self) -> dict[str, Any]:
        """The description, formatter and epilog (example, exit codes) of the command's parser;
        no abbreviated options (``--max`` must never be taken for ``--max-body``)."""
        return {"description": self.help, "formatter_class": argparse.RawDescriptionHelpFormatter,
                "epilog": f"example:\n  {self.example}\n\n{exit_codes.HELP}", "allow_abbrev": False}

    def declare(self, p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        """Declare the command's options on ``p``, and ``-q`` / ``-v`` (every command's)."""
        self.arguments(p)
        add_verbosity(p)
        return p


# --- options several commands share -------------------------------------------------------------
def add_store(p: argparse.ArgumentParser, default: Path | None = None) -> None:
    """``--store DIR``; without a ``default``, one of the flag, ``ROCKETLAKE_STORE`` or the
    config file's ``store`` is required (:func:`fill_store`, after parsing)."""
    if default is None:
        p.add_argument("--store", type=Path, default=None,
                       help=f"store root directory (default: ${STORE_ENV}, else store = \"DIR\" in "
                            f"the config file, ${CONFIG_ENV} or ~/.config/rocketlake/config.toml)")
    else:
        p.add_argument("--store", type=Path, default=default,
                       help="store root directory (default %(default)s)")


def fill_store(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """A command's ``--store`` when the command line has none (``None``: :func:`add_store`
    without a default): ``jobs.default_store``'s; else an error of ``p`` (exit 2) naming the
    three ways to give one."""
    if getattr(args, "store", False) is not None:
        return
    try:
        args.store = default_store()
    except ValueError as e:
        p.error(str(e))
    if args.store is None:
        p.error(missing_store())


#: the options naming where a command writes (its new store, report, rebuilt files, lake)
_OUTPUTS = ("output", "out", "report", "lake")


def check_outputs(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse (an error of ``p``, exit 2) an output option (``--output``, ``--out``, ``--report``,
    a local ``--lake``) that is the command's ``--store`` or a path inside it: what the command
    writes there would land among the store's own files (``store_dir.check_outside``)."""
    store = getattr(args, "store", None)
    if store is None:
        return
    for name in _OUTPUTS:
        value = getattr(args, name, None)
        path = local_path(value) if name == "lake" and value is not None else value
        if path is not None:
            try:
                check_outside(store, path, f"--{name}")
            except UnsafePathError as e:
                p.error(str(e))


def add_settings(p: argparse.ArgumentParser) -> None:
    """``--set NAME=VALUE``, repeatable: store settings."""
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


def add_lake(p: argparse.ArgumentParser, required: bool = True, default: str | None = None) -> None:
    """``--lake DIR|URI``: the Delta lake root, as a URI."""
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


def add_store_name(p: argparse.ArgumentParser) -> None:
    """``--store-name NAME``: the store's name in the lake."""
    p.add_argument("--store-name", help="the store's name in the lake (default: brokerName in the "
                                        "store's config/broker.properties; required without it)")


def count(text: str) -> int:
    """A count option: an integer >= 0."""
    if not re.fullmatch(r"\d+", text.strip()):
        raise argparse.ArgumentTypeError(f"not a count: {text!r} (give an integer >= 0)")
    return int(text)


def add_master(p: argparse.ArgumentParser) -> None:
    """``--master``: the Spark master of the session the command starts (``args.master``)."""
    p.add_argument("--master", default="local[*]",
                   help="Spark master, e.g. spark://HOST:7077 (client mode: the executors get the "
                        "package from the driver; the store must be at the same path on every "
                        "executor); ignored under spark-submit (default %(default)s)")


def _job(p: argparse.ArgumentParser) -> None:
    """``--store``, ``--set``, ``--split-bytes`` and ``--master``: what every Spark job over a store
    takes."""
    add_store(p)
    add_settings(p)
    _split_bytes(p)
    add_master(p)


# --- each job's options -------------------------------------------------------------------------
def _check_consistency(p: argparse.ArgumentParser) -> None:
    add_store(p)
    add_settings(p)
    p.add_argument("--report", required=True, type=Path, help="where to write the JSON report")
    _run_log(p)


def _rebuild(p: argparse.ArgumentParser) -> None:
    _job(p)
    _run_log(p)
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--output", type=Path,
                      help="write the rebuilt files under this directory; leave the store alone")
    mode.add_argument("--incremental", action="store_true",
                      help="only add what the store's files lack, in place")


def _structures(value: str) -> list[str]:
    try:
        return parse_structures(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _rebuild_both(p: argparse.ArgumentParser) -> None:
    _rebuild(p)
    p.add_argument("--structures", type=_structures, default=list(STRUCTURES),
                   help=f"what to rebuild, comma-separated (default: {structures_arg(STRUCTURES)})")


def _publish_offsets(p: argparse.ArgumentParser) -> None:
    _job(p)
    add_lake(p)
    _lake_tables(p)
    add_store_name(p)
    p.add_argument("--snapshot-time", type=parse_time,
                   help="the snapshot's time, ISO-8601 or epoch ms (default: now); a scheduler passes "
                        "its logical time so a retried run is the same snapshot")


def _compact(p: argparse.ArgumentParser) -> None:
    _job(p)
    add_lake(p)
    _lake_tables(p)
    add_store_name(p)
    p.add_argument("--protect-unconsumed", action="store_true",
                   help="never expire a CommitLog file holding messages a consumer group has not read")
    p.add_argument("--dry-run", action="store_true",
                   help="print what would expire and which topics would be compacted; change nothing")
    p.add_argument("--respect-delete-when", action="store_true",
                   help="expire only at a deleteWhen hour or above diskMaxUsedSpaceRatio, as the "
                        "broker does (default: whenever the job runs; its schedule picks the hour)")
    p.add_argument("--force", action="store_true",
                   help="with --respect-delete-when: expire now, whatever the hour")
    p.add_argument("--now", type=parse_time,
                   help="decide what has expired at this time (ISO-8601 or epoch ms), not now")
    p.add_argument("--topic", action="append", default=[], help="also compact this topic (repeatable)")


#: ``--trigger`` of ``archive``: what the stream reads at its start, then it ends
AVAILABLE_NOW = "available-now"
_INTERVAL = re.compile(r"(\d+)\s*(ms|s|m|h)")
_UNITS = {"ms": "milliseconds", "s": "seconds", "m": "minutes", "h": "hours"}


def trigger(text: str) -> str:
    """A ``--trigger`` value: ``available-now``, or an interval as Spark's processingTime
    (``30s`` -> ``30 seconds``)."""
    text = text.strip().lower()
    if text == AVAILABLE_NOW:
        return text
    m = _INTERVAL.fullmatch(text)
    if not m or int(m.group(1)) == 0:
        raise argparse.ArgumentTypeError(f"not a trigger: {text!r} (give available-now or an "
                                         f"interval such as 500ms, 30s, 5m, 1h)")
    return f"{int(m.group(1))} {_UNITS[m.group(2)]}"


def _archive(p: argparse.ArgumentParser) -> None:
    _job(p)
    add_lake(p)
    _lake_tables(p)
    add_store_name(p)
    p.add_argument("--trigger", type=trigger, default=AVAILABLE_NOW,
                   help="available-now (default: archive what the store holds, then end) or an "
                        "interval (500ms, 30s, 5m, 1h: keep running, a batch per interval)")


def _optimize_lake(p: argparse.ArgumentParser) -> None:
    add_lake(p)
    p.add_argument("--retention-hours", type=count, default=DELETED_FILE_RETENTION_DAYS * 24,
                   metavar="H", help="VACUUM data files unused for longer than H hours "
                                     "(default %(default)s, the tables' deleted-file retention)")
    p.add_argument("--allow-short-retention", action="store_true",
                   help="allow --retention-hours below the default (Delta's safety check: a "
                        "reader or writer still using an older version may fail)")


#: command name -> the job; ``spark-submit jobs/<module>.py`` runs the job of ``rocketlake.jobs.<module>``
JOBS: dict[str, Command] = {
    "check-consistency": Command("verify a store and write a JSON report naming what to rebuild",
                                 "rocketlake.jobs.check_consistency:run", _check_consistency,
                                 "rocketlake check-consistency --store var/store "
                                 "--report var/consistency.json"),
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
    "archive": Command("Spark: stream the store into the lake's archive table, exactly once "
                       "(AvailableNow, or running with a trigger interval)",
                       "rocketlake.jobs.archive_stream:run", _archive,
                       "rocketlake archive --store var/store --lake var/lake --trigger 30s"),
    "optimize-lake": Command("Spark: OPTIMIZE the lake's Delta tables (Z-order where it pays), then "
                             "VACUUM with the retention", "rocketlake.jobs.optimize_lake:run",
                             _optimize_lake, "rocketlake optimize-lake --lake s3a://bucket/lake"),
}


def job_main(name: str, run: Callable[[argparse.Namespace], int], argv: list[str] | None) -> int:
    """``spark-submit jobs/<job>.py [options]``: parse the options of the job ``name`` (as
    ``rocketlake <name>`` does) and ``run`` it; returns the exit code (see :mod:`exit_codes`)."""
    job = JOBS[name]
    p = job.declare(argparse.ArgumentParser(prog=f"rocketlake {name}", **job.parser_settings()))
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    fill_store(p, args)
    check_outputs(p, args)
    return int(exit_codes.run(f"rocketlake {name}", lambda: run(args), args.log_level))
