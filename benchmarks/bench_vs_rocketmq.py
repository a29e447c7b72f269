"""rocketlake side by side with RocketMQ 4.9.8's own store (issue 14).

    .venv/bin/python benchmarks/bench_vs_rocketmq.py [--messages 3000000] [--dir var/bench-vs-rocketmq]
    .venv/bin/python benchmarks/bench_vs_rocketmq.py --topics 1000 --queues 10 --per-queue 3 \
        --crash halt --only restart --profile          # many queues (issue 27)

Needs a JDK and Maven: RocketMQ's ``DefaultMessageStore`` runs in a JVM through the test peer
(`tests/rocketmq_peer.py`, built once with Maven). Its times are measured inside the JVM, so JVM
start is not counted. Same data on both sides: message i is topic BenchTopic, queue i % 8, tag
TagA, key ``k<i>``, a 100-byte body ``m<i>....`` (with ``--topics T``: queue i % QUEUES of topic
``BenchTopic<(i // QUEUES) % T>``, and ``--per-queue K`` writes T x QUEUES x K messages); same
file sizes on both sides, the ones in ``conf/store.conf`` (RocketMQ's defaults: 1 GiB CommitLog,
6,000,000-byte ConsumeQueue files, 5,000,000 index slots / 20,000,000 entries). Measured, one function each:

a. write: RocketMQ's putMessage loop until its reput has dispatched every record (ConsumeQueue +
   index), vs ours: building the Messages, ``put_batch`` in batches of 10,000, ``close()``;
b. a restart after a crash: two copies of RocketMQ's store with an ``abort`` file and a zeroed
   checkpoint (every record is checked from the first file; ``--crash halt``: RocketMQ's writer
   halts without shutting down, and the store is left as that crash left it), each opened by a
   new process: a JVM running RocketMQ's load + start until dispatched, vs a Python process
   opening ``MessageStore(root)``; from the spawn until the process reports it is ready, and the
   recovery span (from the program's first step, runtime start left out, to ready), each with
   the CPU seconds the process used, and RocketMQ's phases (``--recovery-runs`` times); ``--profile`` adds one
   more restart per side on fresh copies, not timed: load()'s steps timed one by one in the JVM,
   and a cProfile of our open;
c. rebuild on open: a copy without consumequeue/, index/ and checkpoint: RocketMQ's open until
   dispatched, vs our ``single_process_rebuild.rebuild`` into a fresh directory;
d. verify: ``store.verify.verify`` vs a raw sequential read of the same files (both from page
   cache: the files are read once before);
e. CLI start: ``rocketlake dump commitlog`` of the first records, cold (fresh bytecode and numba
   caches) and warm (median of 5); a read-only open finds the end of the data first.

``--only`` runs some of a-e (RocketMQ's write always runs: it makes the store the others use).
Everything is written under a new directory in ``--dir`` (removed at the end unless ``--keep``).
Prints a Markdown table, ready for benchmarks/RESULTS.md.
"""
from __future__ import annotations

import argparse
import compileall
import io
import json
import os
import pstats
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import rocketlake
import rocketlake.store
from rocketlake.store import Message, MessageStore
from rocketlake.store.config import StoreConfig, load_config
from rocketlake.store.single_process_rebuild import rebuild
from rocketlake.store.verify import verify

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
import rocketmq_peer  # noqa: E402  (tests/ holds the peer's driver, shared with the interop test)

TAG = "TagA"
#: the steps --only can name: a. write (ours; RocketMQ's always runs), b. restart, c. rebuild,
#: d. verify, e. cli
STEPS = ("write", "restart", "rebuild", "verify", "cli")
SIZE_NAMES = ("mappedFileSizeCommitLog", "mappedFileSizeConsumeQueue", "maxHashSlotNum", "maxIndexNum")


class Row:
    """One line of the result table: RocketMQ's seconds, ours, and what was measured."""

    def __init__(self, what: str, rocketmq: float | None, ours: float, note: str = "") -> None:
        self.what, self.rocketmq, self.ours, self.note = what, rocketmq, ours, note

    def markdown(self) -> str:
        rmq = "" if self.rocketmq is None else f"{self.rocketmq:.2f}"
        ratio = "" if self.rocketmq is None else f"{self.ours / self.rocketmq:.2f}"
        return f"| {self.what} | {rmq} | {self.ours:.2f} | {ratio} | {self.note} |"


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def copy_store(src: Path, dst: Path) -> Path:
    """A copy (`cp -a --sparse=always`: RocketMQ's files are mostly holes at small sizes)."""
    subprocess.run(["cp", "-a", "--sparse=always", str(src), str(dst)], check=True)
    return dst


def same_end(what: str, ours: int, rmq: dict[str, Any]) -> None:
    """Both sides must have ended the CommitLog data at the same offset (same bytes, same data)."""
    if ours != rmq["max_phy_offset"]:
        raise AssertionError(f"{what}: CommitLog data ends at {ours} for us, "
                             f"at {rmq['max_phy_offset']} for RocketMQ")


def crash(root: Path, how: str) -> None:
    """As after a crash. ``zeroed``: an ``abort`` file, and the checkpoint's timestamps (physic,
    logics, index: the first 24 bytes) zeroed, so recovery checks every record from the first
    file. ``halt``: nothing to do, RocketMQ's writer halted without shutting down (it must have
    left its ``abort`` file)."""
    if how == "halt":
        if not (root / "abort").exists():
            raise AssertionError(f"{root}: RocketMQ's halted writer left no abort file")
        return
    (root / "abort").touch()
    raw = bytearray((root / "checkpoint").read_bytes())
    raw[:24] = bytes(24)
    (root / "checkpoint").write_bytes(raw)


def checkpoint_times(root: Path) -> str:
    """The checkpoint's physic, logics and index timestamps (ms, big-endian), as text."""
    raw = (root / "checkpoint").read_bytes()[:24]
    return ", ".join(f"{name} {int.from_bytes(raw[k:k + 8], 'big')}"
                     for k, name in ((0, "physic"), (8, "logics"), (16, "index")))


# --- a. write -------------------------------------------------------------------------------------
# Each path's input is built before the clock starts (as RocketMQ's messages are plain objects its
# put loop fills): a list of Messages per batch, or one Arrow table per batch.
def _messages(first: int, count: int, queues: int, body: int, topics: int) -> list[Message]:
    return [Message(rocketmq_peer.write_topic(i, queues, topics), rocketmq_peer.write_body(i, body),
                    i % queues, tags=TAG, keys=f"k{i}")
            for i in range(first, first + count)]


def _table(first: int, count: int, queues: int, body: int, topics: int) -> Any:
    import pyarrow as pa
    rows = range(first, first + count)
    return pa.table({
        "topic": pa.array([rocketmq_peer.write_topic(i, queues, topics) for i in rows]),
        "queue_id": pa.array([i % queues for i in rows], pa.int32()),
        "body": pa.array([rocketmq_peer.write_body(i, body) for i in rows], pa.binary()),
        "tags": pa.array([TAG] * count), "keys": pa.array([f"k{i}" for i in rows])})


#: write path -> (build one batch's input, put it, rows per batch)
WritePath = tuple[Callable[[int, int, int, int, int], Any], Callable[[MessageStore, Any], Any], int]
WRITE_PATHS: dict[str, WritePath] = {
    "put_batch": (_messages, MessageStore.put_batch, 10_000),
    "put_table": (_table, MessageStore.put_table, 100_000),
}


def bench_write(work: Path, a: argparse.Namespace, cfg: StoreConfig) -> tuple[list[Row], Path]:
    """RocketMQ's write (the store every other step uses), then ours unless ``write`` is not
    among ``a.only``."""
    rmq_root = work / "rocketmq-store"
    halt = ["--halt"] if a.crash == "halt" else []
    rmq = rocketmq_peer.run("write", rmq_root, a.messages, a.queues, a.body, a.topics, *halt,
                            *peer_sizes(cfg), timeout=7200)
    if "write" not in a.only:
        return [], rmq_root
    build, put, rows = WRITE_PATHS[a.write_path]
    batches = [build(first, min(rows, a.messages - first), a.queues, a.body, a.topics)
               for first in range(0, a.messages, rows)]
    ours_root = work / "ours-store"
    store = MessageStore(ours_root, cfg)

    def ours() -> int:
        for batch in batches:
            put(store, batch)
        return store.refresh()  # the end, once every dispatch is written (put_table's runs behind)

    t, ours_end = timed(ours)
    close, _ = timed(store.close)
    same_end("written", ours_end, rmq)
    n = a.messages
    note = (f"{n / rmq['seconds']:,.0f} vs {n / t:,.0f} msg/s; inputs built before the clock; "
            f"the shutdown / close (RocketMQ {rmq['shutdown_seconds']:.2f} s, ours {close:.2f} s) "
            f"not counted")
    shutil.rmtree(ours_root)
    what = f"a. write ({a.write_path} x{rows:,}, CQ + index dispatched)"
    return [Row(what, rmq["seconds"], t, note)], rmq_root


# --- b. abnormal recovery ---------------------------------------------------------------------------
# What a broker restart after a crash waits for: a new process (JVM / Python) is started on the
# crashed store and serves once recovery is done. RocketMQ: JVM start, load() (its abnormal
# recovery walks and CRC-checks every record from the first file and dispatches each one; the
# zeroed checkpoint makes load() delete every index file, so every key is indexed again), start()
# (which itself waits for the reput to catch up), then dispatchBehindBytes() == 0. Ours: Python
# start, imports, kernels loaded from the cache, MessageStore open (recovery). Each side's clock
# runs from the process spawn to the wall clock the process reports when ready; shutdown / close
# come after and are not counted. Two spans, the same on both sides:
# - the whole restart: spawn to ready, wall, and the CPU the process used until ready (each
#   process reads its own CPU clock when ready: all threads, and the helper processes it waited
#   for (ours reads many queue directories with one), shutdown / close not included);
# - the recovery span: from the program's first step (RocketMQ: the peer's recover() before the
#   DefaultMessageStore is made, its classes loaded on first use within the span; ours: the
#   script's first line, before rocketlake, numpy and numba are imported) to ready. Left out on
#   both sides: the runtime's own start (the JVM / the interpreter).
OURS_RESTART = """
import time
cpu0, t0 = time.process_time(), time.perf_counter()
import cProfile, json, resource, sys
from pathlib import Path
from rocketlake.store import MessageStore
from rocketlake.store.config import load_config
profile = cProfile.Profile() if len(sys.argv) > 2 else None
cpu1, t = time.process_time(), time.perf_counter()
if profile:
    profile.enable()
store = MessageStore(Path(sys.argv[1]), load_config())
if profile:
    profile.disable()
    profile.dump_stats(sys.argv[2])
ready, done, cpu2 = time.time(), time.perf_counter(), time.process_time()
helpers = resource.getrusage(resource.RUSAGE_CHILDREN)  # the open's helper processes, waited for
cpu2 += helpers.ru_utime + helpers.ru_stime
end = store.commitlog.max_offset
store.close()
print(json.dumps({"ready_epoch_ms": ready * 1000, "open_seconds": done - t, "span_seconds": done - t0,
                  "cpu_start_seconds": cpu0, "cpu_open_start_seconds": cpu1,
                  "cpu_ready_seconds": cpu2, "max_phy_offset": end}))
"""


def compile_bytecode() -> None:
    """Our package's bytecode written beside its modules, as an installed package has it (pip
    compiles it at install). An editable install gets it at its first import, unless
    ``PYTHONDONTWRITEBYTECODE`` is set: then every new process compiled rocketlake's ~45 modules
    from source, 0.07-0.1 s of CPU that a restart of an installed package does not pay."""
    for folder in (*rocketlake.__path__, *rocketlake.store.__path__):
        compileall.compile_dir(folder, quiet=1)


def ours_restart(root: Path, profile: Path | None = None) -> dict[str, Any]:
    """Our side of a restart: a new Python process opens the store (``OURS_RESTART``); with
    ``profile``, a cProfile of the open is written there."""
    extra = [] if profile is None else [str(profile)]
    proc = subprocess.run([sys.executable, "-c", OURS_RESTART, str(root), *extra], check=True,
                          capture_output=True, text=True)
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


def child_cpu() -> float:
    """CPU seconds of this process's finished children so far."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def restart(run: Callable[[], dict[str, Any]]) -> tuple[float, float, dict[str, Any]]:
    """(seconds from spawn to ready, CPU seconds of the process, its result) of one process."""
    cpu, spawned = child_cpu(), time.time()
    out = run()
    return out["ready_epoch_ms"] / 1000 - spawned, child_cpu() - cpu, out


def crashed_copies(work: Path, store: Path, how: str) -> tuple[Path, Path]:
    """Two copies of ``store`` (RocketMQ's, ours) as after a crash (:func:`crash`), written back
    to disk before either restart: neither shares the cores with the kernel's writeback of the
    copies (1.5 GB for the 3M store) or of the write before them."""
    theirs, ours = copy_store(store, work / "crashed-rmq"), copy_store(store, work / "crashed-ours")
    crash(theirs, how)
    crash(ours, how)
    os.sync()
    return theirs, ours


def bench_recovery(work: Path, store: Path, cfg: StoreConfig, runs: int, how: str) -> list[Row]:
    rows: list[Row] = []
    for k in range(1, runs + 1):
        theirs, ours = crashed_copies(work, store, how)
        t_rmq, cpu_rmq, rmq = restart(partial(rocketmq_peer.run, "recover", theirs, *peer_sizes(cfg),
                                              timeout=7200))
        assert rmq["abort_file"]
        t, cpu, res = restart(partial(ours_restart, ours))
        same_end("recovered", res["max_phy_offset"], rmq)
        shutil.rmtree(theirs)
        shutil.rmtree(ours)
        what = "abort + zeroed checkpoint" if how == "zeroed" else "RocketMQ's writer halted"
        rows.append(Row(f"b. restart after a crash ({what}), run {k}", t_rmq, t,
                        f"spawn to ready; CPU to ready {rmq['cpu_ready_seconds']:.2f} vs "
                        f"{res['cpu_ready_seconds']:.2f} s (process CPU with shutdown / close "
                        f"{cpu_rmq:.2f} vs {cpu:.2f} s)"))
        rows.append(Row(f"b. recovery span (program start to ready), run {k}", rmq["seconds"],
                        res["span_seconds"],
                        f"CPU {rmq['cpu_ready_seconds'] - rmq['cpu_start_seconds']:.2f} vs "
                        f"{res['cpu_ready_seconds'] - res['cpu_start_seconds']:.2f} s; runtime start "
                        f"(JVM / interpreter) CPU {rmq['cpu_start_seconds']:.2f} vs "
                        f"{res['cpu_start_seconds']:.2f} s; RocketMQ load() {rmq['load_seconds']:.2f} + "
                        f"start() {rmq['start_seconds']:.2f} + wait {rmq['await_seconds']:.2f} s; "
                        f"ours: imports {res['span_seconds'] - res['open_seconds']:.2f} "
                        f"+ open {res['open_seconds']:.2f} s (CPU "
                        f"{res['cpu_ready_seconds'] - res['cpu_open_start_seconds']:.2f} s); "
                        f"load average {os.getloadavg()[0]:.1f}"))
    return rows


class Profiles(NamedTuple):
    """Where each side's restart spends its time: RocketMQ's load() steps (seconds by step,
    and the whole run's phases) and our open's cProfile (pstats text)."""
    rocketmq: dict[str, Any]
    ours: str


def profile_recovery(work: Path, store: Path, cfg: StoreConfig, how: str, lines: int = 30) -> Profiles:
    """One more restart per side, on fresh crashed copies, not timed: RocketMQ's load() run step
    by step (``recover --phases``), our open under cProfile (the ``lines`` costliest functions
    by cumulative and by own time)."""
    theirs, ours = crashed_copies(work, store, how)
    rmq = rocketmq_peer.run("recover", theirs, "--phases", *peer_sizes(cfg), timeout=7200)
    prof = work / "open.prof"
    ours_restart(ours, prof)
    shutil.rmtree(theirs)
    shutil.rmtree(ours)
    text = io.StringIO()
    stats = pstats.Stats(str(prof), stream=text)
    stats.sort_stats("cumulative").print_stats(lines)
    stats.sort_stats("tottime").print_stats(lines)
    return Profiles(rmq, text.getvalue())


# --- c. rebuild on open -----------------------------------------------------------------------------
def bench_rebuild(work: Path, store: Path, cfg: StoreConfig) -> list[Row]:
    theirs = copy_store(store, work / "bare-rmq")
    for name in ("consumequeue", "index"):
        shutil.rmtree(theirs / name)
    (theirs / "checkpoint").unlink()
    (theirs / "abort").unlink(missing_ok=True)  # left by a halted writer (--crash halt)
    rmq = rocketmq_peer.run("recover", theirs, *peer_sizes(cfg), timeout=7200)
    out = work / "rebuilt-ours"
    t, stats = timed(lambda: rebuild(store, out, config=cfg))
    same_end("rebuilt", stats.commitlog_end, rmq)
    shutil.rmtree(theirs)
    shutil.rmtree(out)
    return [Row("c. rebuild ConsumeQueues + index", rmq["seconds"], t,
                "RocketMQ: open without consumequeue/, index/, checkpoint; ours: rebuild() to a new dir")]


# --- d. verify --------------------------------------------------------------------------------------
def raw_read(root: Path, chunk: int = 8 << 20) -> int:
    """Read every file under ``root`` sequentially with large reads; the bytes read."""
    buf, total = bytearray(chunk), 0
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        with open(path, "rb", buffering=0) as f:
            while n := f.readinto(buf):
                total += n
    return total


def bench_verify(store: Path, cfg: StoreConfig) -> list[Row]:
    nbytes = raw_read(store)  # into the page cache, for both
    t_raw, _ = timed(lambda: raw_read(store))
    t, report = timed(lambda: verify(store, cfg))
    if not report.ok:
        raise AssertionError(f"verify found problems in RocketMQ's store: {report.problems[:5]}")
    return [Row("d. verify vs raw read of the same files", t_raw, t,
                f"left column: raw read, {nbytes / 1e6:,.0f} MB ({nbytes / t_raw / 1e6:,.0f} MB/s); "
                f"{report.records:,} records, {report.keys_checked:,} keys")]


# --- e. CLI start -----------------------------------------------------------------------------------
def bench_cli_start(work: Path, store: Path, warm_runs: int = 5) -> list[Row]:
    """Wall time of ``rocketlake dump`` of the first records: cold (an empty numba cache
    directory: every kernel the command calls is compiled) and warm (the same cache, filled)."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(work / "cli-numba-cache")}
    cmd = [sys.executable, "-m", "rocketlake.jobs.cli", "dump", "commitlog", "--store", str(store),
           "--to-offset", "1000"]

    def dump() -> None:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode != 0 or not proc.stdout:
            raise AssertionError(f"dump failed ({proc.returncode}): {proc.stderr[-2000:]}")

    cold, _ = timed(dump)
    warm = statistics.median(timed(dump)[0] for _ in range(warm_runs))
    return [Row("e. `rocketlake dump` of the first records, cold", None, cold,
                "empty numba cache: compiles the kernels it calls; wall time of the process, "
                "which includes the read-only open's walk to the end of data"),
            Row("e. `rocketlake dump` of the first records, warm", None, warm,
                f"kernels loaded from the cache; median of {warm_runs}")]


def peer_sizes(cfg: StoreConfig) -> list[str]:
    """Our file size settings as the peer's options."""
    return rocketmq_peer.size_args(*(int(getattr(cfg, name)) for name in SIZE_NAMES))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=3_000_000)
    ap.add_argument("--queues", type=int, default=8, help="queues per topic (default %(default)s)")
    ap.add_argument("--topics", type=int, default=1, help="topics (default %(default)s)")
    ap.add_argument("--per-queue", type=int,
                    help="messages per queue: --messages becomes topics x queues x this")
    ap.add_argument("--body", type=int, default=100, help="body bytes (default %(default)s)")
    ap.add_argument("--write-path", choices=sorted(WRITE_PATHS), default="put_batch",
                    help="our write path in a. (default %(default)s)")
    ap.add_argument("--dir", type=Path, default=ROOT / "var" / "bench-vs-rocketmq",
                    help="where the run's directory is made (default %(default)s)")
    ap.add_argument("--recovery-runs", type=int, default=2,
                    help="restarts after a crash measured, each on a fresh copy (default %(default)s)")
    ap.add_argument("--crash", choices=("zeroed", "halt"), default="zeroed",
                    help="how b. crashes the store: an abort file and a zeroed checkpoint, or "
                         "RocketMQ's writer halted without shutting down (default %(default)s)")
    ap.add_argument("--profile", action="store_true",
                    help="after b., RocketMQ's load() steps and a cProfile of our open")
    ap.add_argument("--only", default=",".join(STEPS),
                    help=f"comma-separated steps among {','.join(STEPS)} (default: all)")
    ap.add_argument("--keep", action="store_true", help="keep the run's directory")
    a = ap.parse_args()
    a.only = a.only.split(",")
    if unknown := set(a.only) - set(STEPS):
        ap.error(f"--only: unknown steps {sorted(unknown)} (known: {', '.join(STEPS)})")
    if a.per_queue is not None:
        a.messages = a.topics * a.queues * a.per_queue
    if not rocketmq_peer.available():
        sys.exit("bench_vs_rocketmq: needs java and mvn on PATH")
    if a.write_path == "put_table" and not hasattr(MessageStore, "put_table"):
        sys.exit("bench_vs_rocketmq: this rocketlake has no MessageStore.put_table")
    cfg = load_config()
    rocketmq_peer.build()
    compile_bytecode()  # then our processes import as an installed package's do (JVM: from jars)
    a.dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="run-", dir=a.dir))
    profiles, checkpoint = None, ""
    try:
        rows, store = bench_write(work, a, cfg)
        checkpoint = checkpoint_times(store)
        if "restart" in a.only:
            rows += bench_recovery(work, store, cfg, a.recovery_runs, a.crash)
            if a.profile:
                profiles = profile_recovery(work, store, cfg, a.crash)
        if "rebuild" in a.only:
            rows += bench_rebuild(work, store, cfg)
        if "verify" in a.only:
            rows += bench_verify(store, cfg)
        if "cli" in a.only:
            rows += bench_cli_start(work, store)
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"{a.messages:,} messages of {a.body} B, {a.topics:,} topic(s) x {a.queues} queues, tag "
          f"{TAG}, one key each; " + ", ".join(f"{name}={getattr(cfg, name):,}" for name in SIZE_NAMES)
          + f"; crash: {a.crash} (RocketMQ's store after its write: checkpoint {checkpoint})\n")
    print("| measurement | RocketMQ 4.9.8 (s) | rocketlake (s) | rocketlake / RocketMQ | notes |")
    print("|---|---:|---:|---:|---|")
    for row in rows:
        print(row.markdown())
    if profiles is not None:
        steps = profiles.rocketmq.pop("load_steps")
        print("\nRocketMQ, load() step by step (s): "
              + ", ".join(f"{name} {sec:.3f}" for name, sec in steps.items())
              + f"; whole run: {json.dumps(profiles.rocketmq)}")
        print("\nOurs, cProfile of the open:\n" + profiles.ours)


if __name__ == "__main__":
    main()
