"""Where a failed task is reported: the default ``on_failure_callback`` of every rocketlake task.

It logs one structured line (JSON after ``rocketlake task failed:``) that a log shipper can
alert on. To page someone instead, name your own function ``f(context)`` in `conf/airflow.toml`
``[alerts] on_failure = "package.module.function"``; Airflow calls it in the task's worker with
the task's context.
"""
from __future__ import annotations

import json
import logging
from typing import Any

log = logging.getLogger("rocketlake.airflow")
#: The prefix of the logged line, before its JSON.
FAILURE_PREFIX = "rocketlake task failed: "


def failure_fields(context: Any) -> dict[str, Any]:
    """What identifies a failed task instance in ``context``, and why it failed."""
    ti = context["ti"]
    exception = context.get("exception")
    return {"dag_id": ti.dag_id, "task_id": ti.task_id, "run_id": ti.run_id,
            "map_index": ti.map_index, "try_number": ti.try_number,
            "error": None if exception is None else f"{type(exception).__name__}: {exception}"}


def log_failure(context: Any) -> None:
    """The default failure callback: log :func:`failure_fields` as one JSON line at ERROR."""
    log.error("%s%s", FAILURE_PREFIX, json.dumps(failure_fields(context), sort_keys=True))
