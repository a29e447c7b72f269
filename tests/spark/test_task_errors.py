"""An error inside a Spark task that a command expects reaches the user as one line naming the
problem and the path, with its exit code, not as an executor traceback."""
from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from rocketlake.jobs.exit_codes import ExitCode, run
from rocketlake.store import Message, MessageStore
from rocketlake.store.config import load_config
from rocketlake.transforms.commitlog_scan import commitlog_files, plan_ranges
from rocketlake.transforms.store_rebuild import walk_parts

from .helpers import SMALL, rocketlake, sets, tree_bytes


def error_lines(stderr: str, prog: str = "rocketlake rebuild") -> list[str]:
    """The lines the command printed as errors (Spark's own log lines aside)."""
    return [line for line in stderr.splitlines() if line.startswith(f"{prog}: error:")]


def test_a_commitlog_file_the_executor_cannot_see_is_one_line_naming_it(spark, store_copy, capsys):
    cfg = load_config(SMALL)
    ranges = plan_ranges(store_copy, cfg, 1 << 16, 0)
    gone = commitlog_files(store_copy, cfg)[-1][0]
    gone.unlink()  # listed by the driver, missing where the task runs

    code = run("rocketlake rebuild-index",
               lambda: walk_parts(spark.sparkContext, ranges, "", (), False, False))

    err = capsys.readouterr().err.strip()
    assert code == ExitCode.USAGE
    assert len(err.splitlines()) == 1, err
    assert err.startswith("rocketlake rebuild-index: error: in a Spark task: ")
    assert f"{gone}: no such CommitLog file on executor host" in err


def test_an_unexpected_task_error_keeps_its_traceback(spark):
    from pyspark.errors import PythonException

    def boom(batches):
        raise KeyError("a bug")
        yield from batches

    with pytest.raises(PythonException):
        run("rocketlake x", lambda: spark.range(1).mapInArrow(boom, "id long").count())


def test_a_store_error_in_a_write_task_is_one_line_and_its_exit_code(tmp_path: Path) -> None:
    # a record claiming QUEUEOFFSET 2^62 after queue offsets 0..3: the ConsumeQueue write task
    # refuses the gap with a StoreFormatError (exit 3, as outside Spark)
    store = tmp_path / "store"
    with MessageStore(store, **SMALL) as ms:
        *_, prev, last = [ms.put(Message("t", b"m-%d" % i, 0)) for i in range(5)]
    path = store / "commitlog" / "00000000000000000000"
    data = bytearray(path.read_bytes())
    struct.pack_into(">q", data, last.commitlog_offset + 20, 1 << 62)  # QUEUEOFFSET (FORMAT.md §2)
    path.write_bytes(bytes(data))
    before = tree_bytes(store)

    r = rocketlake("rebuild", "--store", str(store), *sets(SMALL))

    assert r.returncode == ExitCode.UNUSABLE, r.stderr[-3000:]
    (line,) = error_lines(r.stderr)
    assert line.startswith("rocketlake rebuild: error: in a Spark task: ")
    assert line.endswith("/t/0: queue offset 4611686018427387904 leaves a gap after 3 (the "
                         f"records at CommitLog offsets {prev.commitlog_offset} and {last.commitlog_offset})")
    assert r.stderr.rstrip().endswith(line)
    assert tree_bytes(store) == before


def test_a_full_disk_in_a_task_is_one_line_naming_the_file_and_exit_3(
        library_store: Path, small_fs: Path) -> None:
    fd = os.open(small_fs / "filler", os.O_WRONLY | os.O_CREAT)
    st = os.statvfs(small_fs)
    os.write(fd, bytes(st.f_bavail * st.f_frsize - 8192))  # 8 KiB left: less than one part's units
    os.close(fd)
    out = small_fs / "out"

    r = rocketlake("rebuild", "--store", str(library_store), "--output", str(out), *sets(SMALL))

    assert r.returncode == ExitCode.UNUSABLE, r.stderr[-3000:]
    (line,) = error_lines(r.stderr)
    assert line.startswith(f"rocketlake rebuild: error: in a Spark task: [Errno 28] {out}/")
    assert "no space left on device" in line
    assert r.stderr.rstrip().endswith(line)
    assert sorted(os.listdir(small_fs)) == ["filler"]  # the output directory it made is gone
