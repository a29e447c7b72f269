"""Consistency check as a submittable job: verify a store and write the JSON report to a file.

    spark-submit jobs/check_consistency.py --store DIR --report FILE [--set NAME=VALUE ...]
    rocketlake check-consistency --store DIR --report FILE

Runs :func:`store.verify.verify` (library only; a Spark session only to record the run in the
lake's maintenance-run log when ``--lake`` is given) and writes its report plus
``"rebuild"``: the derived structures that drifted from the CommitLog (``"consumequeue"``,
``"index"``), which a scheduler rebuilds next. Drift is data, not a failure: the exit code is
0 whenever the report is written and the CommitLog itself is sound (a scheduler reads the report
to decide what to rebuild), 3 when the CommitLog is corrupt (nothing can be rebuilt from it), 2 on
bad arguments or a path that is not a store (see :mod:`rocketlake.jobs.exit_codes`).
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

from rocketlake.jobs.exit_codes import ExitCode
from rocketlake.jobs.job_commands import job_main
from rocketlake.store.config import parse_set_options
from rocketlake.store.file_sizes import reading_config
from rocketlake.store.safe_files import write_whole
from rocketlake.store.store_dir import check_store
from rocketlake.store.verify import VerifyReport, verify

PROG = "check-consistency"
log = logging.getLogger(__name__)
#: Derived structures, in rebuild order, named by the top-level path their problems point at.
STRUCTURES: tuple[str, ...] = ("consumequeue", "index")


def _top(file: str) -> str:
    return file.split("/", 1)[0]


def structures_to_rebuild(report: VerifyReport) -> list[str]:
    """The derived structures with at least one error, in :data:`STRUCTURES` order."""
    drifted = {_top(p.file) for p in report.problems if p.severity == "error"}
    return [s for s in STRUCTURES if s in drifted]


def commitlog_ok(report: VerifyReport) -> bool:
    """False when the store is missing or its CommitLog has an error."""
    return not any(p.severity == "error" and _top(p.file) in ("commitlog", ".")
                   for p in report.problems)


def consistency_report(store: Path, settings: dict[str, str]) -> dict[str, Any]:
    """The verify report of ``store`` with ``commitlog_ok`` and ``rebuild`` added; file sizes
    come from the files, and a ``settings`` size they contradict is a SettingError naming both
    (``store.file_sizes.reading_config``, as ``verify``)."""
    report = verify(store, reading_config(store, settings))
    return {**report.as_dict(), "commitlog_ok": commitlog_ok(report),
            "rebuild": structures_to_rebuild(report)}


def write_report(path: Path, report: dict[str, Any]) -> None:
    """Write ``report`` as JSON to ``path`` whole or not at all (``safe_files.write_whole``: a
    reader never sees half a file; a full disk or a directory at ``path`` is an error naming it,
    leaving nothing behind)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_whole(path, (json.dumps(report, indent=2) + "\n").encode(), "writing the JSON report")


def run(args: argparse.Namespace) -> int:
    """``rocketlake check-consistency`` (options in :mod:`rocketlake.jobs.job_commands`)."""
    started = time.time_ns() // 1_000_000
    settings = parse_set_options(args.set)
    check_store(args.store)
    report = consistency_report(args.store, settings)
    write_report(args.report, report)
    if args.lake is not None:
        record_verify_run(args.lake, args.store, started, report)
    errors = sum(p["severity"] == "error" for p in report["problems"])
    log.info("%s: %d records, %d error(s); rebuild: %s; report in %s", PROG, report["records"], errors,
             ", ".join(report["rebuild"]) or "nothing", args.report)
    if not report["commitlog_ok"]:
        log.error("%s: error: the CommitLog itself is corrupt; see %s", PROG, args.report)
        return ExitCode.UNUSABLE
    return ExitCode.OK


def record_verify_run(lake: str, store: Path, started_ms: int, report: dict[str, Any]) -> None:
    """Record the check in the lake's maintenance-run log."""
    from rocketlake.jobs.run_log import record_run

    errors = sum(p["severity"] == "error" for p in report["problems"])
    record_run(lake, PROG, store, started_ms,
               "ok" if report["commitlog_ok"] else "failed",
               {"records": report["records"], "errors": errors, "rebuild": report["rebuild"]})


def main(argv: list[str] | None = None) -> int:
    """``spark-submit jobs/check_consistency.py [options]`` (the options of :data:`job_commands.JOBS`)."""
    return job_main(PROG, run, argv)


if __name__ == "__main__":
    sys.exit(main())
