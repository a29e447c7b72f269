"""The Delta tables of a store's lake, by name (each at ``<lake>/<name>``, ``jobs.lake.table_uri``):
the one list the jobs write, the report reads and the Airflow DAGs declare as assets.

It imports nothing: the DAG files import it where the package is installed without its
dependencies (Airflow's own environment).
"""
from __future__ import annotations

#: the current offset of every queue (publish-offsets)
QUEUE_OFFSETS = "queue_offsets"
#: the committed offset and lag of every consumer group and queue (publish-offsets)
CONSUMER_OFFSETS = "consumer_offsets"
#: every published snapshot of both, appended (publish-offsets; the report's lag history)
OFFSETS_HISTORY = "offsets_history"
#: the tables publish-offsets writes
OFFSETS_TABLES = (QUEUE_OFFSETS, CONSUMER_OFFSETS, OFFSETS_HISTORY)
#: the records of expired CommitLog files, archived before the files are deleted (compact)
ARCHIVE_TABLE = "messages_archive"
#: one row per job run (jobs/run_log.py; the report's last maintenance runs)
RUNS_TABLE = "maintenance_runs"
