"""`rocketlake salvage`: copy a damaged store into a new one, every intact record kept and an
empty placeholder where each damaged one stood (``store.salvage``), and say what was lost.
Options in :mod:`rocketlake.jobs.cli`; no Spark here."""
from __future__ import annotations

import argparse
import json

from rocketlake.jobs.cli.reading import reading_config
from rocketlake.jobs.exit_codes import ExitCode
from rocketlake.jobs.printable import printable
from rocketlake.store.salvage import SalvageReport, salvage
from rocketlake.store.store_dir import check_store


def cmd_salvage(a: argparse.Namespace) -> int:
    """Salvage ``--store`` into ``--output``; exit 0 when nothing was damaged, 1 when something
    was (the report says what)."""
    check_store(a.store)
    report = salvage(a.store, a.output, reading_config(a))
    if a.json:
        print(json.dumps(report.as_dict()))
    else:
        for line in salvage_lines(report):
            print(printable(line))
    return ExitCode.PROBLEMS if report.damaged else ExitCode.OK


def salvage_lines(report: SalvageReport) -> list[str]:
    """The text report: the verdict, the lost byte ranges, then per topic and queue what was
    kept and how many placeholders stand for lost records."""
    lost = sum(r.end - r.offset for r in report.lost)
    lines = [f"{'SALVAGED' if report.damaged else 'OK'}: {report.source} -> {report.output}: "
             f"{report.kept:,} records kept, {report.placeholders:,} "
             f"placeholder{'' if report.placeholders == 1 else 's'}, {lost:,} bytes "
             f"lost in {len(report.lost)} damaged range{'' if len(report.lost) == 1 else 's'}"]
    if report.lost:
        lines.append("lost (original commitlog offsets):")
        lines.extend(f"  [{r.offset}, {r.end}) {r.end - r.offset:,} bytes, {r.kind}: {r.why}; "
                     f"{r.placeholders} placeholder{'' if r.placeholders == 1 else 's'}"
                     for r in report.lost)
    lines.append("per topic and queue (records kept, placeholders):")
    lines.extend(f"  {t}/{q}: {kept:,} kept, {held:,} placeholders"
                 for (t, q), (kept, held) in sorted(report.queues.items()))
    if report.placeholders:
        lines.append("placeholders have an empty body and the property SALVAGED=<kind>@<offset>; "
                     "queue offsets and committed consumer offsets are those of the original")
    return lines
