"""`rocketlake`: one command line over the store library and the Spark jobs.

The command table below declares every command, its options and the function that runs it
(``module:function``, called with the parsed arguments, returning an exit code); the Spark jobs
declare theirs in :mod:`rocketlake.jobs.job_commands`, whose shared options (``add_store``,
``add_settings``, ...) the commands here use too. Modules are imported only for the command that
runs, so store commands never start (or import) Spark. A job script
(``spark-submit jobs/<job>.py ...``) parses the same options itself.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from pathlib import Path

from rocketlake import version
from rocketlake.jobs.exit_codes import HELP as EXIT_CODES
from rocketlake.jobs.exit_codes import run
from rocketlake.jobs.job_commands import (
    JOBS,
    Command,
    add_lake,
    add_master,
    add_settings,
    add_store,
    add_store_name,
    check_outputs,
    count,
    fill_store,
)
from rocketlake.jobs.times import duration, parse_time, to_datetime

__all__ = ["COMMANDS", "main", "parser", "parse_time", "to_datetime"]


# --- options several commands share -------------------------------------------------------------
def _topic_queue(p: argparse.ArgumentParser, required: bool = False) -> None:
    p.add_argument("--topic", required=required, help="topic name")
    p.add_argument("--queue", type=int, required=required, help="queue id")


def _max(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max", type=int, default=32, help="most messages to return (default %(default)s)")


def _format(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=["json", "text"], default="json",
                   help="json: one JSON object a line (JSON Lines); text: one readable line a message "
                        "(ISO-8601 UTC times, body as UTF-8, escaped) (default %(default)s)")
    p.add_argument("--max-body", type=count, default=200, metavar="N",
                   help="--format text: show at most N characters of a body (default %(default)s)")
    p.add_argument("--stored-body", action="store_true",
                   help="print each message body as stored: a compressed body (SYSFLAG bit 0x1) "
                        "as its compressed bytes, not inflated as the producer sent it")


def _store_time_range(p: argparse.ArgumentParser, note: str) -> None:
    p.add_argument("--begin", type=parse_time, default=0,
                   help=f"earliest store time, inclusive (ISO-8601 or epoch ms){note}")
    p.add_argument("--end", type=parse_time, default=2 ** 63 - 1,
                   help=f"latest store time, inclusive (ISO-8601 or epoch ms){note}")


#: how get and query end when they find nothing (sentences of their --help)
NOTHING_FOUND = ("Finding nothing in a topic or queue the store has is not an error: a line on "
                 "stderr says so and the exit code is 0. A topic or queue the store does not "
                 "have is an error (exit 2) naming those it has.")


# --- the commands -------------------------------------------------------------------------------
def _pipeline(p: argparse.ArgumentParser) -> None:
    add_store(p, default=Path("var") / "store")
    add_lake(p, required=False, default=str(Path("var") / "lake"))
    add_settings(p)
    add_master(p)
    p.add_argument("--messages", type=int, default=50_000,
                   help="sample events to ingest (default %(default)s)")
    p.add_argument("--skip-ingest", action="store_true", help="use the store as it is (a real store)")
    p.add_argument("--keep", action="store_true", help="keep an existing sample store and add to it")
    p.add_argument("--store-name", help="the store's name in the lake (default: sample for the "
                                        "sample store; with --skip-ingest as publish-offsets names it)")


def _ingest(p: argparse.ArgumentParser) -> None:
    add_store(p)
    add_settings(p)
    p.add_argument("--create", action="store_true",
                   help="make a new store when --store does not exist or is an empty directory "
                        "(without it, such a path is an error: a mistyped path creates nothing)")
    p.add_argument("file", help="JSON Lines file of events, or a Parquet file of put_table's "
                                "columns (rows counted from 0), or - for stdin")


def _dump(p: argparse.ArgumentParser) -> None:
    p.add_argument("what", choices=["commitlog", "consumequeue", "index"], help="which records to print")
    add_store(p)
    add_settings(p)
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
    p.add_argument("--tags", help="records / units whose TAGS the subscription expression names, "
                                  "e.g. 'TagA || TagB' (not for index)")
    p.add_argument("--max", type=count, metavar="N",
                   help="print at most N records, units or index entries; a line on stderr says "
                        "when more match (default: all)")
    _format(p)


def _get(p: argparse.ArgumentParser) -> None:
    add_store(p)
    add_settings(p)
    _topic_queue(p, required=True)
    p.add_argument("--offset", type=int, default=0, help="first queue offset to read (default %(default)s)")
    _max(p)
    p.add_argument("--tags", help="subscription expression, e.g. 'TagA || TagB'")
    _format(p)
    p.description = f"{p.description}. {NOTHING_FOUND}"


def _query(p: argparse.ArgumentParser) -> None:
    add_store(p)
    add_settings(p)
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
    add_store(p)
    add_settings(p)
    p.add_argument("--json", action="store_true",
                   help="print one JSON report on stdout, every problem with its file, offset and kind")
    p.add_argument("--max-problems", type=count, default=20, metavar="N",
                   help="text report: list the first N problems (all are counted by file and kind "
                        "above them) (default %(default)s)")


def _salvage(p: argparse.ArgumentParser) -> None:
    add_store(p)
    add_settings(p)
    p.add_argument("--output", type=Path, required=True,
                   help="the new store to write (missing or an empty directory); --store is only read")
    p.add_argument("--json", action="store_true", help="print one JSON report on stdout")
    p.description = (f"{p.description}. Exit 0 when nothing was damaged, 1 when records were "
                     f"replaced by placeholders or bytes lost.")


def _report(p: argparse.ArgumentParser) -> None:
    add_store(p)
    add_settings(p)
    add_lake(p, required=False)
    add_store_name(p)
    p.add_argument("--out", type=Path, required=True, help="the HTML file to write")
    p.add_argument("--lag-window", type=int, default=10,
                   help="snapshots per queue a group's lag status is judged over (default %(default)s)")


def _json_rows(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON object per row, not a table")


def _lag(p: argparse.ArgumentParser) -> None:
    add_store(p)
    add_settings(p)
    p.add_argument("--group", help="only this consumer group")
    p.add_argument("--topic", help="only this topic")
    p.add_argument("--system", action="store_true",
                   help="also the broker's own groups (CID_RMQ_SYS_*: the transaction check's "
                        "progress on RMQ_SYS_TRANS_HALF_TOPIC), after the others; --group names "
                        "one directly")
    _json_rows(p)


def _topic_status(p: argparse.ArgumentParser) -> None:
    add_store(p)
    add_settings(p)
    p.add_argument("--topic", help="only this topic")
    _json_rows(p)


def _offsets(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=["reset", "delete"],
                   help="reset: set the group's offsets (kafka-consumer-groups --reset-offsets); "
                        "delete: remove them (--delete-offsets, mqadmin deleteSubGroup's offsets)")
    add_store(p)
    add_settings(p)
    p.add_argument("--group", required=True, help="consumer group")
    p.add_argument("--topic", action="append", default=[], metavar="T[:Q,...]",
                   help="this topic's queues, or only queues Q,... (orders:0,2); repeatable "
                        "(delete: default every topic the group has offsets for)")
    p.add_argument("--all-topics", action="store_true",
                   help="reset: every topic the group has committed offsets for")
    to = p.add_mutually_exclusive_group()
    to.add_argument("--to-datetime", type=parse_time,
                    help="the offset of the message stored at this time (ISO-8601 or epoch ms)")
    to.add_argument("--by-duration", type=duration, metavar="PnDTnHnM",
                    help="as --to-datetime, at now minus this ISO-8601 duration (P1DT2H, PT30M)")
    to.add_argument("--to-earliest", action="store_true", help="each queue's min offset")
    to.add_argument("--to-latest", action="store_true", help="each queue's max offset")
    to.add_argument("--to-current", action="store_true",
                    help="the committed offset (the max offset where none is, as Kafka)")
    to.add_argument("--to-offset", type=int, help="this offset, clamped to each queue's [min, max]")
    to.add_argument("--shift-by", type=int,
                    help="the committed offset plus this (negative: back), clamped to [min, max]")
    to.add_argument("--from-file", type=Path, metavar="CSV",
                    help="the offsets of a CSV file of topic,queue,offset rows (what --export prints)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="print the plan; write nothing (the default)")
    mode.add_argument("--execute", action="store_true",
                      help="write config/consumerOffset.json (refused while a writer holds the store)")
    shown = p.add_mutually_exclusive_group()
    shown.add_argument("--export", action="store_true",
                       help="reset: print the planned offsets as topic,queue,offset CSV "
                            "(what --from-file reads)")
    shown.add_argument("--json", action="store_true", help="print one JSON object per row, not a table")


def _tail(p: argparse.ArgumentParser) -> None:
    add_store(p)
    add_settings(p)
    p.add_argument("--topic", required=True, help="topic name")
    p.add_argument("--queue", type=int, help="only this queue id (default: all the topic's queues)")
    p.add_argument("-n", "--last", type=count, default=10, metavar="N",
                   help="print the newest N messages first, in CommitLog order (default %(default)s)")
    p.add_argument("-f", "--follow", action="store_true",
                   help="then print each new message as a writer or broker appends it, until "
                        "Ctrl-C or SIGTERM")
    p.add_argument("--interval", type=float, default=0.5, metavar="SECONDS",
                   help="--follow: seconds between looks at the CommitLog end (default %(default)s)")
    _format(p)


def _store_status(p: argparse.ArgumentParser) -> None:
    add_store(p)
    add_settings(p)
    p.add_argument("--json", action="store_true", help="print one JSON object, not name: value lines")


def _topic_stats(p: argparse.ArgumentParser) -> None:
    add_store(p)
    add_settings(p)
    p.add_argument("--topic", help="only this topic")
    p.add_argument("--now", action="store_true",
                   help="last_hour / last_day end at the clock (default: at the newest store time "
                        "in the store, so a copied or idle store shows its last traffic)")
    _json_rows(p)


def _config_rows(p: argparse.ArgumentParser) -> None:
    add_store(p)
    add_settings(p)
    _json_rows(p)


_R = "rocketlake.jobs.cli.read_commands"
_O = "rocketlake.jobs.cli.operator_commands"
COMMANDS: dict[str, Command] = {
    "pipeline": Command("the main job: sample -> store -> checks -> Spark rebuild -> Delta -> summary",
                        "rocketlake.jobs.cli.pipeline:run", _pipeline,
                        "rocketlake pipeline --messages 200000 --master 'local[2]'"),
    "ingest": Command("write JSON Lines or Parquet events into a store, all rows or none",
                      "rocketlake.jobs.cli.ingest:cmd_ingest", _ingest,
                      "echo '{\"topic\":\"orders\",\"body\":\"hi\",\"keys\":\"k1\"}' "
                      "| rocketlake ingest --store var/store --create -"),
    "dump": Command("print commitlog / consumequeue / index records as JSON Lines or text",
                    f"{_R}:cmd_dump", _dump, "rocketlake dump consumequeue --store var/store --topic orders"),
    "get": Command("read a queue from an offset (RocketMQ getMessage)", f"{_R}:cmd_get", _get,
                   "rocketlake get --store var/store --topic orders --queue 0 --offset 0 "
                   "--tags 'TagA || TagB'"),
    "query": Command("find messages by --key, --msg-id or --time", f"{_R}:cmd_query", _query,
                     "rocketlake query --store var/store --topic orders --queue 0 "
                     "--time 2026-11-22T10:00:00Z"),
    "verify": Command("check a whole store (fsck); exit 1 on any disagreement",
                      "rocketlake.jobs.cli.verify_words:cmd_verify", _verify,
                      "rocketlake verify --store var/store --json | jq .problems"),
    "salvage": Command("copy a damaged store into a new one: intact records kept, placeholders "
                       "for damaged ones", "rocketlake.jobs.cli.salvage:cmd_salvage", _salvage,
                       "rocketlake salvage --store var/store --output var/salvaged"),
    "check-consistency": JOBS["check-consistency"],
    "report": Command("write a self-contained HTML report of a store and its lake",
                      "rocketlake.jobs.cli.report:run", _report,
                      "rocketlake report --store var/store --lake var/lake --out var/report.html"),
    **{name: job for name, job in JOBS.items() if name != "check-consistency"},
    "lag": Command("consumer offsets, max offsets and lag per group and queue (mqadmin consumerProgress)",
                   f"{_O}:cmd_lag", _lag, "rocketlake lag --store var/store --group billing --json"),
    "topic-status": Command("min / max offset and last update per queue (mqadmin topicStatus)",
                            f"{_O}:cmd_topic_status", _topic_status,
                            "rocketlake topic-status --store var/store --topic orders"),
    "offsets": Command("reset or delete a group's committed offsets (kafka-consumer-groups "
                       "--reset-offsets / --delete-offsets); a dry run unless --execute",
                       "rocketlake.jobs.cli.offsets:cmd_offsets", _offsets,
                       "rocketlake offsets reset --store var/store --group billing --topic orders "
                       "--to-datetime 2026-11-22T10:00:00Z --dry-run"),
    "store-status": Command("CommitLog offsets and times, disk use, dispatch behind, lock and last "
                            "shutdown (mqadmin brokerStatus)",
                            "rocketlake.jobs.cli.store_status:cmd_store_status", _store_status,
                            "rocketlake store-status --store var/store"),
    "topic-stats": Command("messages, bytes, messages of the last hour and day, oldest and newest "
                           "message per topic and queue (mqadmin statsAll, kafka-log-dirs)",
                           "rocketlake.jobs.cli.topic_stats:cmd_topic_stats", _topic_stats,
                           "rocketlake topic-stats --store var/store --topic orders"),
    "topics": Command("declared topics (config/topics.json: queues, perm, order, attributes) and "
                      "undeclared ones with ConsumeQueues (mqadmin topicList, kafka-topics --describe)",
                      "rocketlake.jobs.cli.topics:cmd_topics", _config_rows,
                      "rocketlake topics --store var/store"),
    "groups": Command("consumer groups: declared (config/subscriptionGroup.json) or with committed "
                      "offsets, their retry and DLQ topics (kafka-consumer-groups --list)",
                      "rocketlake.jobs.cli.groups:cmd_groups", _config_rows,
                      "rocketlake groups --store var/store"),
    "timers": Command("timed messages a 5.x broker has not delivered yet, per real topic: how "
                      "many, earliest and latest delivery (timerwheel, timerlog)",
                      "rocketlake.jobs.cli.timers:cmd_timers", _config_rows,
                      "rocketlake timers --store var/store"),
    "tail": Command("the newest messages of a topic, then with --follow each new one "
                    "(kafka-console-consumer without a broker)", "rocketlake.jobs.cli.tail:cmd_tail",
                    _tail, "rocketlake tail --store var/store --topic orders -n 5 --follow --format text"),
}


class _Version(argparse.Action):
    """``--version``: argparse's version action, with the version read only when asked for
    (:func:`rocketlake.version`)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        print(f"rocketlake {version()}")
        parser.exit()


def parser() -> argparse.ArgumentParser:
    """The `rocketlake` parser: one subcommand per entry of :data:`COMMANDS`."""
    p = argparse.ArgumentParser(prog="rocketlake", formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=EXIT_CODES, allow_abbrev=False,
                                description="Write, read and maintain Apache RocketMQ 4.9 message stores.")
    p.add_argument("--version", action=_Version, nargs=0, default=argparse.SUPPRESS,
                   help="show the version and exit")
    sub = p.add_subparsers(dest="command", metavar="<command>", required=True)
    for name, c in COMMANDS.items():
        c.declare(sub.add_parser(name, help=c.help, **c.parser_settings()))
    return p


def main(argv: list[str] | None = None) -> int:
    """Run ``rocketlake <command> [options]``; returns the exit code (see :mod:`exit_codes`)."""
    p = parser()
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    fill_store(p, args)
    check_outputs(p, args)
    module, function = COMMANDS[args.command].target.split(":")

    def command() -> int:  # imported inside ``run``: a job without Spark installed says so
        target: Callable[[argparse.Namespace], int] = getattr(importlib.import_module(module), function)
        return target(args)
    return int(run(f"rocketlake {args.command}", command, args.log_level))

