"""Rebuild a store's ConsumeQueues from its CommitLog with Spark, byte-identical to the library.

    spark-submit jobs/rebuild_consumequeue.py --store DIR [--output DIR | --incremental]
        [--set NAME=VALUE ...] [--split-bytes N]

:mod:`rocketlake.jobs.rebuild` with ``--structures consumequeue`` (the README's
`rocketlake rebuild-consumequeue` command): full (swap in), ``--incremental`` (append in place)
or ``--output DIR``.
"""
from __future__ import annotations

import argparse
import sys

from rocketlake.jobs import rebuild
from rocketlake.jobs.job_commands import job_main

PROG = "rebuild-consumequeue"
STRUCTURES = ("consumequeue",)


def run(args: argparse.Namespace) -> int:
    """``rocketlake rebuild-consumequeue`` (options in :mod:`rocketlake.jobs.job_commands`)."""
    return rebuild.run_structures(PROG, STRUCTURES, args)


def main(argv: list[str] | None = None) -> int:
    """``spark-submit jobs/rebuild_consumequeue.py [options]`` (the options of :data:`job_commands.JOBS`)."""
    return job_main(PROG, run, argv)


if __name__ == "__main__":
    sys.exit(main())
