"""Commands reading a damaged store say so once on stderr and answer what an undamaged copy
answers (issue 26's example: two flipped bytes at CommitLog offset 5000 of the sample store):
`lag` and `topic-status` still print every number and time, `get` the same max offset every call."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from stderr_lines import said

from rocketlake.jobs.cli import main
from rocketlake.jobs.cli.pipeline import ingest
from rocketlake.store import MessageStore

DAMAGE_AT = 5000


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, int]:
    """(the sample store, a copy with two bytes flipped at CommitLog offset 5000, the offset of
    the record those bytes are in, found in the undamaged store)."""
    top = tmp_path_factory.mktemp("damaged-reads")
    clean, damaged = top / "clean", top / "damaged"
    ingest(clean, 5000, {})
    shutil.copytree(clean, damaged)
    with (damaged / "commitlog" / f"{0:020d}").open("r+b") as f:
        f.seek(DAMAGE_AT)
        two = f.read(2)
        f.seek(DAMAGE_AT)
        f.write(bytes(b ^ 0xFF for b in two))
    with MessageStore(clean, read_only=True) as ms:
        record = next(r for r in ms.commitlog.walk_records() if r.commitlog_offset + r.size > DAMAGE_AT)
    return clean, damaged, record.commitlog_offset


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, list[str]]:
    code = main(list(argv))
    cap = capsys.readouterr()
    return code, cap.out, said(cap.err)


def _warning(store: Path, command: str, record: int) -> str:
    return (f"rocketlake {command}: warning: {store}: CommitLog damaged at offset {record} (")


@pytest.mark.parametrize("command", ["lag", "topic-status"])
def test_lag_and_topic_status_print_what_an_undamaged_copy_prints_and_warn_once(stores, capsys, command):
    clean, damaged, record = stores
    code, want, err = _run(capsys, command, "--store", str(clean), "--json")
    assert (code, err) == (0, [])
    code, got, err = _run(capsys, command, "--store", str(damaged), "--json")
    assert code == 0 and got == want
    assert all(v is not None for line in got.splitlines() for v in json.loads(line).values())
    assert len(err) == 1 and err[0].startswith(_warning(damaged, command, record))


def test_get_answers_the_same_max_offset_every_call(stores, capsys):
    clean, damaged, record = stores
    with MessageStore(clean, read_only=True) as ms:
        rec = ms.read(record)
        topic, queue, damaged_offset = rec.topic, rec.queue_id, rec.queue_offset
        hi = ms.max_offset(topic, queue)
    assert damaged_offset + 1 < hi
    answers = []
    for offset in (0, damaged_offset + 1, 0, damaged_offset + 1, damaged_offset):
        code, out, err = _run(capsys, "get", "--store", str(damaged), "--topic", topic,
                              "--queue", str(queue), "--offset", str(offset), "--max", "1")
        status, message = map(json.loads, out.splitlines())
        answers.append((status["max_offset"], message["queue_offset"]))
        assert code == 0 and len(err) == 1 and err[0].startswith(_warning(damaged, "get", record))
    # the damaged record's queue offset is skipped: the next message is served
    assert answers == [(hi, 0), (hi, damaged_offset + 1), (hi, 0), (hi, damaged_offset + 1),
                       (hi, damaged_offset + 1)]


def test_time_searches_skip_the_damaged_record(stores, capsys):
    """`query --time` at each store time around the damaged record answers the queue offset the
    undamaged copy answers (with no store time where that is the damaged record's), and
    `topic-stats` (whose hour / day windows are time searches) what the undamaged copy prints:
    the binary search reads the nearest intact record's store time in place of the damaged one's.
    They raised the record's CorruptRecordError, exit 3, naming neither store nor file."""
    clean, damaged, record = stores
    with MessageStore(clean, read_only=True) as ms:
        rec = ms.read(record)
        topic, queue = rec.topic, str(rec.queue_id)
        times = [rec.store_timestamp - 1, rec.store_timestamp, rec.store_timestamp + 1, 0]
    for at in times:
        argv = ("query", "--topic", topic, "--queue", queue, "--time", str(at), "--store")
        code, out, err = _run(capsys, *argv, str(clean))
        assert (code, err) == (0, [])
        want = json.loads(out)
        if want["queue_offset"] == rec.queue_offset:
            want.update(store_time=None, store_timestamp=None)
        code, out, err = _run(capsys, *argv, str(damaged))
        assert (code, json.loads(out)) == (0, want)
        assert len(err) == 1 and err[0].startswith(_warning(damaged, "query", record))
    code, want, _ = _run(capsys, "topic-stats", "--json", "--store", str(clean))
    assert code == 0
    code, got, err = _run(capsys, "topic-stats", "--json", "--store", str(damaged))
    assert (code, got) == (0, want)
    assert err[0].startswith(_warning(damaged, "topic-stats", record))


def test_a_unit_pointing_at_no_record_is_not_called_commitlog_damage(golden_store, capsys):
    """A flipped bit in a ConsumeQueue unit's CommitLog offset (the CommitLog intact, as verify
    finds): the warning said "CommitLog damaged at offset 11437", pointing at salvage rather than
    a ConsumeQueue rebuild. It names the unit and says either may be damaged."""
    cq = golden_store / "consumequeue" / "orders" / "0" / "00000000000000000000"
    raw = bytearray(cq.read_bytes())
    unit = 3  # orders/0 @3 points at the record at 11436 (docs/FORMAT.md: offset, size, tagsCode)
    assert int.from_bytes(raw[unit * 20:unit * 20 + 8], "big") == 11436
    raw[unit * 20 + 7] ^= 1
    cq.write_bytes(bytes(raw))
    code, out, err = _run(capsys, "get", "--store", str(golden_store), "--topic", "orders",
                          "--queue", "0", "--offset", "0", "--max", "5")
    assert code == 0 and [json.loads(m)["queue_offset"] for m in out.splitlines()[1:]] == [0, 1, 2, 4, 5]
    assert len(err) == 1 and err[0].startswith(
        f"rocketlake get: warning: {golden_store}: no valid record at CommitLog offset 11437 (bad "
        f"magic 0xa320a773), where the ConsumeQueue unit orders/0 @3 points: the unit or the record "
        f"is damaged; reads skip the damaged records (")
