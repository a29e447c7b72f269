"""spark_progress: a bar of the tasks done / total of the Spark stages run inside the block."""
from __future__ import annotations

import io
import re
import threading

from rich.console import Console

from rocketlake.jobs.spark_progress import spark_progress


def _sleepy_job(spark) -> list:
    """One stage of 8 tasks (8 partitions), each sleeping 0.2 s, so the poller sees it running;
    collect() adds no second stage (count() would: a 1-task final aggregate)."""
    def sleep(batches):
        import time
        for batch in batches:
            time.sleep(0.2)
            yield batch
    return spark.range(0, 8, numPartitions=8).mapInPandas(sleep, "id long").collect()


def test_a_terminal_sees_the_tasks_of_the_stage_until_all_are_done(spark) -> None:
    out = io.StringIO()
    with spark_progress(spark, "scan", console=Console(file=out, force_terminal=True, width=100)):
        assert len(_sleepy_job(spark)) == 8
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue())  # colours and cursor moves
    assert "scan" in text
    counts = {(int(done), int(total)) for done, total in re.findall(r"(\d+)/(\d+) tasks", text)}
    assert counts, text
    assert {total for _, total in counts} == {8}  # the stage's 8 tasks, never another total
    assert (8, 8) in counts
    assert not [t for t in threading.enumerate() if t.name.startswith("spark-progress")]


def test_a_log_file_gets_nothing(spark) -> None:
    out = io.StringIO()
    with spark_progress(spark, "scan", console=Console(file=out, force_terminal=False)):
        assert len(_sleepy_job(spark)) == 8
    assert out.getvalue() == ""


def test_the_block_raising_stops_the_bar_and_the_error_passes_through(spark) -> None:
    out = io.StringIO()
    try:
        with spark_progress(spark, "scan", console=Console(file=out, force_terminal=True)):
            raise KeyError("boom")
    except KeyError as e:
        assert e.args == ("boom",)
    else:
        raise AssertionError("the error was swallowed")
    assert not [t for t in threading.enumerate() if t.name.startswith("spark-progress")]
