"""`rocketlake verify`: the whole-store check, as one JSON report or in words: the verdict, the
problems counted by file and kind, the first ones, and what to run next. Options in
:mod:`rocketlake.jobs.cli`; no Spark here."""
from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

from rocketlake.jobs.cli.reading import reading_config
from rocketlake.jobs.exit_codes import ExitCode
from rocketlake.jobs.printable import printable
from rocketlake.store.salvage import SalvageReport, assess
from rocketlake.store.store_dir import check_store
from rocketlake.store.verify import KINDS, Damage, Problem, VerifyReport, verify


def cmd_verify(a: argparse.Namespace) -> int:
    check_store(a.store)
    report = verify(a.store, reading_config(a))
    if a.json:
        print(json.dumps(report.as_dict()))
    else:
        salvaged = assess(a.store, reading_config(a)) if report.damage else None
        for line in verify_summary(report, a.max_problems,
                                   _repair_steps(report, a.store, a.set, salvaged)):
            print(line)  # never wrapped: a pipe or a log gets whole lines
    return ExitCode.OK if report.ok else ExitCode.PROBLEMS


def verify_summary(report: VerifyReport, max_problems: int, steps: list[str]) -> list[str]:
    """The `verify` text report: the verdict, the problems counted by (file, kind), the first
    ``max_problems`` problems, then what to do."""
    errors = sum(p.severity == "error" for p in report.problems)
    lines = [f"{'OK' if report.ok else 'FAILED'}: {report.records:,} records, {report.units:,} "
             f"ConsumeQueue units, {report.keys_checked:,} index keys checked; {errors:,} errors, "
             f"{len(report.problems) - errors:,} warnings"]
    if not report.problems:
        return lines
    if report.damage:
        lines.append(damage_line(report.damage))
    groups: dict[tuple[str, str], list[Problem]] = {}
    for p in report.problems:
        groups.setdefault((p.file, p.kind), []).append(p)
    width = max(len(file) for file, _ in groups)
    lines.append("problems by file and kind:")
    for (file, kind), ps in groups.items():
        severity = "error" if any(p.severity == "error" for p in ps) else "warning"
        lines.append(f"  {len(ps):>8}  {severity:<7}  {file:<{width}}  {kind}: {KINDS.get(kind, kind)}")
    shown = report.problems[:max_problems]
    lines.append(f"problems (the first {len(shown)} of {len(report.problems)}):" if shown else "")
    for p in shown:
        where = p.file + (f" @{p.offset}" if p.offset is not None else "")
        lines.append(f"  {p.severity}: {where}: {p.what}")
    if len(report.problems) > len(shown):
        lines.append(f"  ... and {len(report.problems) - len(shown)} more "
                     f"(--max-problems N shows more, --json shows all)")
    if steps:
        lines.append("next:")
        lines.extend(f"  {step}" for step in steps)
    return [printable(line) for line in lines if line]


def size_text(n: int) -> str:
    """Bytes for people: ``812 bytes``, ``12.3 MiB``."""
    return f"{n:,} bytes" if n < 2 ** 20 else f"{n / 2 ** 20:,.1f} MiB"


def damage_line(damage: list[Damage]) -> str:
    """What is damaged in the CommitLog and what follows it: the first damaged stretch, how far
    it reaches, and the valid records after it."""
    d = damage[0]
    more = f" (and {len(damage) - 1} more after it)" if len(damage) > 1 else ""
    reach = (f"{d.resumes_at - d.offset:,} bytes up to the next valid record at {d.resumes_at}"
             if d.resumes_at is not None else "no valid record follows in its file")
    return (f"CommitLog: {len(damage)} damaged stretch{'es' if len(damage) > 1 else ''}, the first "
            f"at commitlog offset {d.offset} ({reach}){more}; {d.records_after:,} valid records "
            f"follow it in {size_text(d.bytes_after)}")


def _repair_steps(report: VerifyReport, store: Path, settings: list[str],
                  salvaged: SalvageReport | None = None) -> list[str]:
    """What to run next for the errors found, by the part of the store they are in
    (``salvaged``: what a salvage would keep, when the CommitLog is damaged)."""
    args = f"--store {shlex.quote(str(store))}" + "".join(f" --set {shlex.quote(s)}" for s in settings)
    first = {p.kind.split("-")[0]: p for p in reversed(report.problems) if p.severity == "error"}
    steps = []
    if "commitlog" in first:
        p = first["commitlog"]
        name = Path(p.file).name
        at = (f" (commitlog offset {int(name) + p.offset})"
              if name.isdigit() and p.offset is not None else "")
        steps.append(f"CommitLog damage, first at {p.file} @{p.offset}{at}: the next writable open "
                     f"(e.g. rocketlake ingest) recovers the store and cuts the CommitLog at the "
                     f"first invalid record its scan meets (the last three files; after a crash, "
                     f"from the checkpoint), zeroing what follows{_cut_cost(report.damage)}. Copy "
                     f"the store (cp -a) before writing to it. Reading costs nothing: "
                     f"{_reads_around(report.damage, args)}.")
        if salvaged is not None:
            steps.append(_salvage_step(salvaged, args))
    if "consumequeue" in first:
        steps.append(f"ConsumeQueue damage: rocketlake rebuild-consumequeue {args}  (rebuilt from the "
                     f"CommitLog; --output DIR writes the files elsewhere first)")
    if "index" in first:
        steps.append(f"index damage: rocketlake rebuild-index {args}  (rebuilt from the CommitLog; "
                     f"--output DIR writes the files elsewhere first)")
    return steps


def _salvage_step(s: SalvageReport, args: str) -> str:
    """The remedy that keeps every intact record, and what it costs."""
    lost = sum(r.end - r.offset for r in s.lost)
    return (f"To keep every intact record instead: rocketlake salvage {args} --output NEW  (a new "
            f"store with the {s.kept:,} intact records and {s.placeholders:,} "
            f"placeholder{'' if s.placeholders == 1 else 's'}: an empty message at each damaged "
            f"record's queue offset, so queue and consumer offsets keep their meaning; "
            f"{size_text(lost)} lost in {len(s.lost)} damaged range{'' if len(s.lost) == 1 else 's'}; "
            f"CommitLog offsets change; the store is only read)")


def _cut_cost(damage: list[Damage]) -> str:
    """What a recovery that cuts at the first damage drops."""
    if not damage:
        return ""
    d = damage[0]
    return (f": cut at offset {d.offset}, it drops the {d.records_after:,} valid records "
            f"({size_text(d.bytes_after)}) after it")


def _reads_around(damage: list[Damage], args: str) -> str:
    """The read-only commands that print the records before the first damage and after it."""
    if not damage:
        return f"`rocketlake dump commitlog {args} --to-offset N` prints the records before offset N"
    d = damage[0]
    before = f"`rocketlake dump commitlog {args} --to-offset {d.offset}` prints the records before it"
    if d.resumes_at is None:
        return before
    return f"{before}, `--from-offset {d.resumes_at}` the records after it"
