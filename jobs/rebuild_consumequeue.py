"""Rebuild a store's ConsumeQueues from its CommitLog with Spark, byte-identical to the library.

    spark-submit jobs/rebuild_consumequeue.py --store DIR [--output DIR | --incremental]
        [--set NAME=VALUE ...] [--split-bytes N]

:mod:`rocketlake.jobs.rebuild` with ``--structures consumequeue`` (kept as its own entry point
for the DAGs): full (swap in), ``--incremental`` (append in place) or ``--output DIR``.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from rocketlake.jobs import rebuild
from rocketlake.jobs.job_commands import job_main
from rocketlake.store.config import StoreConfig
from rocketlake.transforms.commitlog_scan import DEFAULT_SPLIT_BYTES

PROG = "rebuild-consumequeue"
STRUCTURES = ("consumequeue",)


def rebuild_consumequeue(spark: SparkSession, store: Path, cfg: StoreConfig,
                         output: Path | None = None, incremental: bool = False,
                         split_bytes: int = DEFAULT_SPLIT_BYTES) -> dict[str, int]:
    """Rebuild the ConsumeQueues of ``store``; returns units written per topic."""
    return rebuild.rebuild(spark, store, cfg, output, incremental, split_bytes, STRUCTURES).units


def run(args: argparse.Namespace) -> int:
    """``rocketlake rebuild-consumequeue`` (options in :mod:`rocketlake.jobs.job_commands`)."""
    return rebuild.run_structures(PROG, STRUCTURES, args)


def main(argv: list[str] | None = None) -> int:
    """``spark-submit jobs/rebuild_consumequeue.py [options]`` (the options of :data:`job_commands.JOBS`)."""
    return job_main(PROG, run, argv)


if __name__ == "__main__":
    sys.exit(main())
