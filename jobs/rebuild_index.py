"""Rebuild a store's IndexFiles from its CommitLog with Spark, byte-identical to the library.

    spark-submit jobs/rebuild_index.py --store DIR [--output DIR | --incremental]
        [--set NAME=VALUE ...] [--split-bytes N]

:mod:`rocketlake.jobs.rebuild` with ``--structures index`` (the `rocketlake rebuild-index`
command of the README): full (swap in), ``--incremental`` (continue the last file in place) or
``--output DIR``.
"""
from __future__ import annotations

import argparse
import sys

from rocketlake.jobs import rebuild
from rocketlake.jobs.job_commands import job_main

PROG = "rebuild-index"
STRUCTURES = ("index",)


def run(args: argparse.Namespace) -> int:
    """``rocketlake rebuild-index`` (options in :mod:`rocketlake.jobs.job_commands`)."""
    return rebuild.run_structures(PROG, STRUCTURES, args)


def main(argv: list[str] | None = None) -> int:
    """``spark-submit jobs/rebuild_index.py [options]`` (the options of :data:`job_commands.JOBS`)."""
    return job_main(PROG, run, argv)


if __name__ == "__main__":
    sys.exit(main())
