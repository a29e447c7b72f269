"""An error inside a Spark task that a command expects reaches the user as one line naming the
problem and the path, with its exit code, not as an executor traceback."""
from __future__ import annotations

import pytest

from rocketlake.jobs.exit_codes import ExitCode, run
from rocketlake.transforms.commitlog_scan import commitlog_files, plan_ranges
from rocketlake.transforms.store_rebuild import scan_parts

from .helpers import SMALL


def test_a_commitlog_file_the_executor_cannot_see_is_one_line_naming_it(spark, store_copy, capsys):
    size = SMALL["mappedFileSizeCommitLog"]
    ranges = plan_ranges(store_copy, size, 1 << 16, 0)
    gone = commitlog_files(store_copy, size)[-1][0]
    gone.unlink()  # listed by the driver, missing where the task runs

    code = run("rocketlake rebuild-index",
               lambda: scan_parts(spark.sparkContext, ranges, "", (), False, False))

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
