"""Rebuild a store's IndexFiles from its CommitLog with Spark, byte-identical to the library.

    spark-submit jobs/rebuild_index.py --store DIR [--output DIR | --incremental]
        [--set NAME=VALUE ...] [--split-bytes N]

:mod:`rocketlake.jobs.rebuild` with ``--structures index`` (kept as its own entry point
for the DAGs): full (swap in), ``--incremental`` (continue the last file in place) or
``--output DIR``.
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

PROG = "rebuild-index"
STRUCTURES = ("index",)


def rebuild_index(spark: SparkSession, store: Path, cfg: StoreConfig,
                  output: Path | None = None, incremental: bool = False,
                  split_bytes: int = DEFAULT_SPLIT_BYTES) -> dict[str, int]:
    """Rebuild the index files of ``store``; returns index keys written per topic."""
    return rebuild.rebuild(spark, store, cfg, output, incremental, split_bytes, STRUCTURES).keys


def run(args: argparse.Namespace) -> int:
    """``rocketlake rebuild-index`` (options in :mod:`rocketlake.jobs.job_commands`)."""
    return rebuild.run_structures(PROG, STRUCTURES, args)


def main(argv: list[str] | None = None) -> int:
    """``spark-submit jobs/rebuild_index.py [options]`` (the options of :data:`job_commands.JOBS`)."""
    return job_main(PROG, run, argv)


if __name__ == "__main__":
    sys.exit(main())
