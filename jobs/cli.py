"""`rocketlake`: one command line over the store library and the Spark jobs.

Each subcommand lives in its own module with ``main(argv) -> int``; this file only routes.
Spark jobs are imported lazily, so store commands never start a JVM.
"""
from __future__ import annotations

import importlib
import sys

#: subcommand -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "pipeline": ("rocketlake.jobs.pipeline", "the main job: sample -> store -> checks -> summary"),
    "ingest": ("rocketlake.jobs.store_commands", "write JSON Lines events into a store"),
    "dump": ("rocketlake.jobs.store_commands", "print commitlog / consumequeue / index records as JSON Lines"),
    "get": ("rocketlake.jobs.store_commands", "read a queue from an offset (RocketMQ getMessage)"),
    "query": ("rocketlake.jobs.store_commands", "find messages by --key, --msg-id or --time"),
    "report": ("rocketlake.jobs.report", "write a self-contained HTML report of a store and its lake"),
    "verify": ("rocketlake.jobs.store_commands", "check a whole store (fsck); exit 3 on any disagreement"),
    "check-consistency": ("rocketlake.jobs.check_consistency",
                          "verify a store, write a JSON report naming what to rebuild (exit 0 on drift)"),
    "rebuild-consumequeue": ("rocketlake.jobs.rebuild_consumequeue",
                             "Spark: rebuild ConsumeQueues from the CommitLog (full, --incremental, --output)"),
    "rebuild-index": ("rocketlake.jobs.rebuild_index",
                      "Spark: rebuild IndexFiles from the CommitLog (full, --incremental, --output)"),
    "publish-offsets": ("rocketlake.jobs.publish_offsets",
                        "Spark: publish queue offsets, consumer offsets and lag as Delta tables"),
}

EPILOG = """examples:
  rocketlake pipeline
  rocketlake ingest --store var/store events.jsonl
  rocketlake dump commitlog --store var/store | head
  rocketlake get --store var/store --topic orders --queue 0 --offset 0
  rocketlake query --store var/store --topic orders --key order-17
  rocketlake <command> --help
"""


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = ["usage: rocketlake <command> [options]", "", "commands:"]
    lines += [f"  {name:<{width}}  {help_}" for name, (_, help_) in COMMANDS.items()]
    return "\n".join(lines) + "\n\n" + EPILOG


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"rocketlake: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    if hasattr(module, "run_command"):
        return module.run_command(name, rest)
    return module.main(rest)


if __name__ == "__main__":
    sys.exit(main())
