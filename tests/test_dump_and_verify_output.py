"""What `dump`, `get`, `query` and `verify` print: filters that select what RocketMQ stored (the
golden store's results.jsonl says where), one readable text line per message, a line on stderr
when nothing is found, and a verify report an operator can read (counts by file and kind, a
capped list, what to run next, whole lines in a pipe)."""
from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest
from goldens import GOLDEN_498, read_jsonl
from stderr_lines import said

from rocketlake.jobs.cli import main
from rocketlake.store import Message, MessageStore
from rocketlake.store.verify import KINDS

RESULTS = read_jsonl(GOLDEN_498 / "results.jsonl")
MESSAGES = read_jsonl(GOLDEN_498 / "messages.jsonl")
SMALL = dict(mappedFileSizeCommitLog=8192, mappedFileSizeConsumeQueue=200, maxHashSlotNum=32,
             maxIndexNum=50)


def _sets(settings: dict) -> list[str]:
    return [arg for k, v in settings.items() for arg in ("--set", f"{k}={v}")]


@pytest.fixture()
def run(golden_store, golden_settings, capsys):
    """``run(command, *options)`` on the golden store -> (exit code, stdout lines, stderr)."""
    def go(command: str, *options: str) -> tuple[int, list[str], str]:
        head = command.split()
        rc = main([*head, "--store", str(golden_store), *_sets(golden_settings), *options])
        out, err = capsys.readouterr()
        return rc, out.splitlines(), err
    return go


def _offsets(lines: list[str], field: str = "commitlog_offset") -> list[int]:
    return [json.loads(line)[field] for line in lines]


def _in_queue(r: dict) -> bool:
    """RocketMQ gives PREPARED (4) and ROLLBACK (12) records no ConsumeQueue unit."""
    return r["sys_flag"] & 0b1100 not in (4, 12)


# --- dump filters ----------------------------------------------------------------------------------
def test_dump_commitlog_topic_and_queue(run):
    rc, out, _ = run("dump commitlog", "--topic", "orders", "--queue", "3")
    assert rc == 0
    assert _offsets(out) == [r["wrote_offset"] for r in RESULTS
                             if (r["topic"], r["queue_id"]) == ("orders", 3)]
    assert _offsets(out)[:4] == [630, 3334, 6131, 9129]  # hand-read from results.jsonl


def test_dump_commitlog_offset_range_starts_inside_a_record(run):
    rc, out, _ = run("dump commitlog", "--from-offset", "631", "--to-offset", "1079")
    assert rc == 0 and _offsets(out) == [853]  # the record at 630 started before the range
    rc, out, _ = run("dump commitlog", "--from-offset", "65536")
    assert rc == 0 and _offsets(out) == [r["wrote_offset"] for r in RESULTS if r["wrote_offset"] >= 65536]


def test_dump_commitlog_from_offset_does_not_read_damage_before_it(golden_store, run):
    first = golden_store / "commitlog/00000000000000000000"
    raw = bytearray(first.read_bytes())
    raw[208 + 4] ^= 0x40  # the magic of the second record (at 208)
    first.write_bytes(bytes(raw))
    rc, _, err = run("dump commitlog")
    assert rc == 3 and "stopped after 1 records at commitlog offset 208" in err
    rc, out, err = run("dump commitlog", "--from-offset", "417", "--to-offset", "1079")
    assert (rc, _offsets(out)) == (0, [417, 630, 853])
    # the read-only open says once that the store is damaged (issue: reads of a damaged store say
    # so); the dump itself reads no damage, so nothing else is said
    assert [ln for ln in err.splitlines() if ln.strip()] == [
        ln for ln in err.splitlines() if "warning:" in ln and "CommitLog damaged at offset 208" in ln]
    assert len(err.splitlines()) == 1


def test_dump_commitlog_store_time_range_iso_or_epoch_ms(run):
    # 1795345575212 = 2026-11-22T11:06:15.212Z: two records were stored in that millisecond
    want = [r["wrote_offset"] for r in RESULTS if r["store_timestamp"] == 1795345575212]
    assert len(want) == 2
    for begin, end in (("1795345575212", "1795345575212"),
                       ("2026-11-22T11:06:15.212Z", "2026-11-22T11:06:15.212")):
        rc, out, _ = run("dump commitlog", "--begin", begin, "--end", end)
        assert rc == 0 and _offsets(out) == want


def test_dump_consumequeue_selects_queues_and_a_queue_offset_range(run):
    rc, out, _ = run("dump consumequeue", "--topic", "orders", "--queue", "3",
                     "--from-offset", "2", "--to-offset", "4")
    assert rc == 0
    assert [(json.loads(x)["queue_offset"], json.loads(x)["commitlog_offset"]) for x in out] == \
        [(2, 6131), (3, 9129)]
    rc, out, _ = run("dump consumequeue", "--topic", "payments")
    rows = [json.loads(x) for x in out]
    assert {r["topic"] for r in rows} == {"payments"}
    assert sorted(r["commitlog_offset"] for r in rows) == sorted(
        r["wrote_offset"] for r in RESULTS if r["topic"] == "payments" and _in_queue(r))


def test_dump_consumequeue_store_time_range(run):
    rc, out, _ = run("dump consumequeue", "--begin", "1795345575212", "--end", "1795345575212")
    assert rc == 0 and sorted(_offsets(out)) == sorted(
        r["wrote_offset"] for r in RESULTS if r["store_timestamp"] == 1795345575212 and _in_queue(r))


def test_dump_index_offset_range_and_no_topic(run):
    rc, out, _ = run("dump index", "--from-offset", "630", "--to-offset", "631")
    rows = [json.loads(x) for x in out]
    entries = [r for r in rows if "position" in r]
    # the record at 630 has three index keys: UNIQ_KEY, order-3, cust-3 (results.jsonl)
    assert rc == 0 and [r["phy_offset"] for r in entries] == [630, 630, 630]
    assert [r["file"] for r in rows if "index_count" in r] == [entries[0]["file"]]
    rc, out, err = run("dump index", "--topic", "orders")
    assert rc == 2 and out == [] and "--topic, --queue and --tags do not apply to dump index" in err


# --- text format -----------------------------------------------------------------------------------
#: the record at 630 (results.jsonl line 4) as one text line, written out by hand: store time
#: 1795345574057 ms, born 1732000000111 ms (messages.jsonl), body from messages.jsonl
ORDER_3 = ('store=2026-11-22T11:06:14.057Z born=2024-11-19T07:06:40.111Z topic=orders queue=3 '
           'queue_offset=0 commitlog_offset=630 msg_id=0A00000700002A9F0000000000000276 tags=TagA '
           'keys="order-3 cust-3" body=')


def test_dump_get_and_query_print_the_same_text_line(run):
    body = base64.b64decode(MESSAGES[3]["body_b64"]).decode()
    want = ORDER_3 + body
    rc, dump, _ = run("dump commitlog", "--from-offset", "630", "--to-offset", "631", "--format", "text")
    assert (rc, dump) == (0, [want])
    rc, get, _ = run("get", "--topic", "orders", "--queue", "3", "--max", "1", "--format", "text")
    assert (rc, get) == (0, ["status=FOUND next_begin_offset=1 min_offset=0 max_offset=31 count=1", want])
    rc, query, _ = run("query", "--topic", "orders", "--key", "order-3", "--format", "text")
    assert (rc, query) == (0, [want])


def test_text_bodies_are_escaped_and_cut(tmp_path, capsys):
    store = tmp_path / "s"
    with MessageStore(store, **SMALL) as ms:
        ms.put_batch([Message("t", b"\xff\xfeok\n\tend", born_timestamp=0, store_timestamp=0),
                      Message("t", "\u00e9t\u00e9 ".encode() * 20, born_timestamp=0, store_timestamp=0)])
    assert main(["dump", "commitlog", "--store", str(store), *_sets(SMALL), "--format", "text",
                 "--max-body", "12"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(" body=")[1] for line in lines] == [
        "\\xff\\xfeok\\n\\tend [not UTF-8]",
        "\u00e9t\u00e9 \u00e9t\u00e9 \u00e9t\u00e9 ... [120 bytes, cut at 12 characters]"]
    assert lines[0].startswith("store=1970-01-01T00:00:00.000Z born=1970-01-01T00:00:00.000Z topic=t ")


# --- finding nothing -------------------------------------------------------------------------------
def test_query_and_get_that_find_nothing_say_so_and_exit_0(run):
    rc, out, err = run("query", "--topic", "orders", "--key", "nope")
    assert (rc, out, said(err)) == (0, [], ["rocketlake query: no message with key 'nope' in topic 'orders'"])
    rc, out, err = run("query", "--topic", "orders", "--key", "cust-3", "--end", "2020-01-01T00:00:00Z")
    assert (rc, out) == (0, []) and said(err) == [
        "rocketlake query: no message with key 'cust-3' in topic 'orders' stored in "
        "[1970-01-01T00:00:00.000Z, 2020-01-01T00:00:00.000Z]"]
    rc, out, err = run("get", "--topic", "orders", "--queue", "3", "--offset", "31")
    assert (rc, len(out)) == (0, 1) and json.loads(out[0])["status"] == "OFFSET_OVERFLOW_ONE"
    assert said(err) == ["rocketlake get: no message in queue orders/3 from queue offset 31: "
                         "OFFSET_OVERFLOW_ONE (the queue holds offsets [0, 31))"]
    rc, out, err = run("query", "--topic", "orders", "--key", "cust-3")
    assert (rc, err) == (0, "") and _offsets(out) == [  # RocketMQ's own answer
        row["commitlog_offset"] for row in read_jsonl(GOLDEN_498 / "query-orders-cust-3.jsonl")
        if "msg_id" in row]


# --- verify ----------------------------------------------------------------------------------------
@pytest.fixture()
def damaged(tmp_path: Path) -> Path:
    """200 messages; queue t0/0 holds i % 6 == 0 (34 units, files of 10); the tagsCode of the
    20 units of its first two files is flipped and the index files are deleted."""
    root = tmp_path / "s"
    with MessageStore(root, **SMALL) as ms:
        ms.put_batch([Message(f"t{i % 2}", f"body-{i}".encode() * 3, i % 3, tags="A", keys=f"k{i}")
                      for i in range(200)])
    for name in ("00000000000000000000", "00000000000000000200"):
        path = root / "consumequeue/t0/0" / name
        raw = bytearray(path.read_bytes())
        for unit in range(10):
            raw[unit * 20 + 19] ^= 0x40
        path.write_bytes(bytes(raw))
    for f in (root / "index").iterdir():
        f.unlink()
    return root


def test_verify_counts_by_file_and_kind_caps_the_list_and_says_what_to_run(damaged, capsys):
    assert main(["verify", "--store", str(damaged), *_sets(SMALL), "--max-problems", "3"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("FAILED: 200 records, 200 ConsumeQueue units, 0 index keys checked; "
                             "21 errors, 0 warnings")
    counts = [line.split()[:4] for line in out[out.index("problems by file and kind:") + 1:][:3]]
    assert counts == [
        ["10", "error", "consumequeue/t0/0/00000000000000000000", "consumequeue-unit-mismatch:"],
        ["10", "error", "consumequeue/t0/0/00000000000000000200", "consumequeue-unit-mismatch:"],
        ["1", "error", "index", "index-missing:"]]
    listed = out.index("problems (the first 3 of 21):")
    assert [line.split(":")[0] for line in out[listed + 1:listed + 4]] == ["  error"] * 3
    assert out[listed + 4] == "  ... and 18 more (--max-problems N shows more, --json shows all)"
    store = f"--store {damaged} {' '.join(_sets(SMALL))}"
    assert out[out.index("next:") + 1:] == [
        f"  ConsumeQueue damage: rocketlake rebuild-consumequeue {store}  (rebuilt from the "
        f"CommitLog; --output DIR writes the files elsewhere first)",
        f"  index damage: rocketlake rebuild-index {store}  (rebuilt from the CommitLog; "
        f"--output DIR writes the files elsewhere first)"]


def test_verify_json_keeps_every_problem_with_its_kind(damaged, capsys):
    assert main(["verify", "--store", str(damaged), *_sets(SMALL), "--json"]) == 1
    problems = json.loads(capsys.readouterr().out)["problems"]
    assert len(problems) == 21 and {p["kind"] for p in problems} <= set(KINDS)
    assert set(problems[0]) == {"severity", "file", "offset", "what", "kind"}


def test_verify_commitlog_damage_says_what_follows_and_what_each_remedy_costs(tmp_path, capsys):
    """3 records of 50-byte bodies, the second's magic flipped: verify resumes at the third
    (the record-start search), says the damage reaches from the second to the third and that one
    valid record (the third's bytes) follows it, which a writable open would drop."""
    root = tmp_path / "s"
    with MessageStore(root, **SMALL) as ms:
        sizes = [r.size for r in ms.put_batch([Message("t", b"x" * 50) for _ in range(3)])]
    log = root / "commitlog/00000000000000000000"
    raw = bytearray(log.read_bytes())
    raw[sizes[0] + 4] ^= 0x40  # the second record's magic
    log.write_bytes(bytes(raw))
    assert main(["verify", "--store", str(root), *_sets(SMALL)]) == 1
    out = capsys.readouterr().out.splitlines()
    second, third = sizes[0], sizes[0] + sizes[1]
    assert out[0].startswith("FAILED: 2 records, 3 ConsumeQueue units")
    assert out[1] == (f"CommitLog: 1 damaged stretch, the first at commitlog offset {second} "
                      f"({sizes[1]} bytes up to the next valid record at {third}); 1 valid records "
                      f"follow it in {sizes[2]} bytes")
    step = out[out.index("next:") + 1]
    assert step.startswith(f"  CommitLog damage, first at commitlog/00000000000000000000 @{second} "
                           f"(commitlog offset {second}): the next writable open")
    assert f"cut at offset {second}, it drops the 1 valid records ({sizes[2]} bytes) after it." in step
    assert step.endswith(f"`rocketlake dump commitlog --store {root} {' '.join(_sets(SMALL))} "
                         f"--to-offset {second}` prints the records before it, `--from-offset "
                         f"{third}` the records after it.")
    salvage = out[out.index("next:") + 2]
    assert salvage == (f"  To keep every intact record instead: rocketlake salvage --store {root} "
                       f"{' '.join(_sets(SMALL))} --output NEW  (a new store with the 2 intact "
                       f"records and 1 placeholder: an empty message at each damaged record's queue "
                       f"offset, so queue and consumer offsets keep their meaning; {sizes[1]} bytes "
                       f"lost in 1 damaged range; CommitLog offsets change; the store is only read)")
    assert main(["dump", "commitlog", "--store", str(root), *_sets(SMALL), "--from-offset", str(third)]) == 0
    assert _offsets(capsys.readouterr().out.splitlines()) == [third]  # the advice's command works


def test_verify_lines_are_whole_in_a_pipe(damaged):
    """Piped (not a terminal) and 40 columns wide: no line is wrapped."""
    p = subprocess.run([sys.executable, "-m", "rocketlake.jobs.cli", "verify", "--store", str(damaged),
                        *_sets(SMALL)], capture_output=True, text=True,
                       env={**os.environ, "COLUMNS": "40"}, check=False)
    assert p.returncode == 1, p.stderr
    # tagsCode 65 is "A".hashCode(); its low byte flipped by 0x40 is 1
    assert [line for line in p.stdout.splitlines()
            if line.startswith("  error: consumequeue/t0/0/00000000000000000000 @0: unit 0: ")
            and line.endswith("/1, record says " + line.split("/")[-2].split()[-1] + "/65")]


@pytest.mark.parametrize("command", ["get", "query"])
def test_help_says_finding_nothing_exits_0(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert ("Finding nothing in a topic or queue the store has is not an error: a line on stderr "
            "says so and the exit code is 0. A topic or queue the store does not have is an error "
            "(exit 2) naming those it has.") in help_text


# --- dump streams: memory bounded by a chunk, not by a file -------------------------------------
def _peak_bytes(call: Callable[[], object]) -> int:
    """The most memory Python allocated (tracemalloc: numpy arrays too) while ``call`` ran."""
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_dump_index_streams_a_large_index_in_bounded_memory(tmp_path, monkeypatch):
    import pyarrow as pa
    n = 100_000
    settings = dict(mappedFileSizeCommitLog=64 << 20, maxHashSlotNum=50_000, maxIndexNum=n + 10)
    with MessageStore(tmp_path / "s", **settings) as ms:
        ms.put_table(pa.table({"topic": ["T"] * n, "body": [b"x"] * n,
                               "keys": [f"k{i}" for i in range(n)]}))
    lines = 0

    class Count:  # stdout that keeps nothing
        def write(self, text: str) -> None:
            nonlocal lines
            lines += text.count("\n")

    monkeypatch.setattr(sys, "stdout", Count())
    argv = ["dump", "index", "--store", str(tmp_path / "s")]
    assert main(argv) == 0  # the command's modules imported before the measuring
    assert lines == 1 + n  # the header, then every entry
    opened = _peak_bytes(lambda: MessageStore(tmp_path / "s", **settings, read_only=True).close())
    dumped = _peak_bytes(lambda: main(argv))
    # The entries as a list of row dicts would take about 50 MB (~480 bytes a row, measured); the
    # stream holds one chunk of 8192 at a time beyond what opening the store takes.
    assert dumped - opened < 8 << 20, f"{(dumped - opened) >> 20} MiB beyond the store's open"


def test_dump_index_with_a_huge_index_count_names_the_file(tmp_path, capsys):
    from rocketlake.store.codec import INDEX_HEADER
    root = tmp_path / "s"
    with MessageStore(root, **SMALL) as ms:
        ms.put(Message("T", b"x", keys="k1"))
    path, = (root / "index").iterdir()
    with open(path, "r+b") as f:
        header = list(INDEX_HEADER.unpack(f.read(INDEX_HEADER.size)))
        header[5] = 2 ** 31 - 1  # indexCount
        f.seek(0)
        f.write(INDEX_HEADER.pack(*header))
    assert main(["dump", "index", "--store", str(root), *_sets(SMALL)]) == 3
    err = capsys.readouterr().err
    assert f"{path}: the header's indexCount 2147483647 is outside [0, 50]" in err, err


def test_a_consume_queue_file_of_7_bytes_is_named(tmp_path, capsys):
    root = tmp_path / "s"
    with MessageStore(root, **SMALL) as ms:
        ms.put(Message("T", b"x"))
    path = root / "consumequeue" / "T" / "0" / "00000000000000000000"
    os.truncate(path, 7)
    for command in (["dump", "consumequeue"], ["get", "--topic", "T", "--queue", "0", "--offset", "0"],
                    ["verify"], ["topic-status"]):
        assert main([*command, "--store", str(root)]) == 3
        err = capsys.readouterr().err
        assert f"{path}: ConsumeQueue file is 7 bytes, not a multiple of the 20-byte unit" in err, err


def test_text_output_escapes_control_characters(tmp_path, capsys):
    """Tags, keys and bodies may hold any character but \\x01 and \\x02: shown escaped."""
    root = tmp_path / "s"
    with MessageStore(root, **SMALL) as ms:
        ms.put(Message("T", b"b\x1b[2J\xc2\x9bz", tags="t\x1b]0;x\x07", keys=["k\x7f", "q\u202e"]))
    for command in (["get", "--topic", "T", "--queue", "0", "--offset", "0"],
                    ["dump", "commitlog"], ["query", "--topic", "T", "--key", "k\x7f"]):
        assert main([*command, "--store", str(root), *_sets(SMALL), "--format", "text"]) == 0
        out = capsys.readouterr().out
        assert "tags=t\\x1b]0;x\\x07" in out and 'keys="k\\x7f q\\u202e"' in out, out
        assert "body=b\\x1b[2J\\x9bz" in out, out
        assert not any(c in out for c in "\x1b\x07\x7f\x9b\u202e"), repr(out)


def test_verify_text_escapes_control_characters():
    from rocketlake.jobs.cli.verify_words import verify_summary
    from rocketlake.store.verify import Problem, VerifyReport
    report = VerifyReport("s", problems=[Problem("error", "commitlog/0", 0, "topic 'a\x1b[31m'",
                                                 "commitlog-record")])
    lines = verify_summary(report, 10, [])
    assert any("topic 'a\\x1b[31m'" in line for line in lines)
    assert not any("\x1b" in line for line in lines)


@pytest.mark.parametrize("what", ["index", "consumequeue", "commitlog"])
def test_dump_into_a_closed_pipe_is_a_quiet_exit(tmp_path: Path, what: str) -> None:
    """`dump ... | head -1`: the reader goes away after one line; dump stops with exit 0 and
    says nothing (it printed a BufferError traceback, exit 1, for the index: views on the maps
    outlived the store's close)."""
    store = tmp_path / "s"
    with MessageStore(store, mappedFileSizeCommitLog=1 << 20, mappedFileSizeConsumeQueue=6000 * 20,
                      maxHashSlotNum=1024, maxIndexNum=8192) as ms:
        ms.put_batch([Message("t", b"x" * 32, 0, keys=[f"k{i}"]) for i in range(3000)])
    proc = subprocess.Popen([sys.executable, "-m", "rocketlake.jobs.cli", "dump", what, "--store",
                             str(store)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    assert json.loads(proc.stdout.readline())  # one whole line, then the pipe closes
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert (proc.wait(timeout=120), err) == (0, "")
