"""The Delta tables of a store's lake, by name (each at ``<lake>/<name>``, ``jobs.lake.table_uri``):
the one list the jobs write, the report reads and the Airflow DAGs declare as assets.

It imports nothing: the DAG files import it where the package is installed without its
dependencies (Airflow's own environment).
"""
from __future__ import annotations

#: every published snapshot of the queue offsets and of the consumer groups' offsets and lag of
#: every store, one commit each (publish-offsets, jobs/offsets_lake.py; the report's lag
#: history); the current offsets are each store's newest snapshot
OFFSETS_HISTORY = "offsets_history"
#: the tables publish-offsets writes
OFFSETS_TABLES = (OFFSETS_HISTORY,)
#: the current-state tables of lakes written before (one row per queue, per group and queue;
#: MERGEd each run): no longer written; their rows are migrated into OFFSETS_HISTORY once
QUEUE_OFFSETS = "queue_offsets"
CONSUMER_OFFSETS = "consumer_offsets"
#: the records of expired CommitLog files, archived before the files are deleted (compact)
ARCHIVE_TABLE = "messages_archive"
#: one row per job run (jobs/run_log.py; the report's last maintenance runs)
RUNS_TABLE = "maintenance_runs"
