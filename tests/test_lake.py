"""Where the lake lives: every ``--lake`` takes a URI of any filesystem Spark knows, or a path."""
from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from rocketlake.jobs import cli
from rocketlake.jobs.lake import lake_uri, local_path, table_properties, table_uri

#: every command with a --lake option, with the other options it requires
LAKE_COMMANDS = {
    "pipeline": [], "report": ["--store", "s", "--out", "r.html"],
    "check-consistency": ["--store", "s", "--report", "r.json"],
    "rebuild": ["--store", "s"], "rebuild-consumequeue": ["--store", "s"], "rebuild-index": ["--store", "s"],
    "publish-offsets": ["--store", "s"], "compact": ["--store", "s"], "optimize-lake": [],
    "archive": ["--store", "s"],
}


def test_every_lake_option_is_listed_here() -> None:
    action = next(a for a in cli.parser()._actions if isinstance(a, argparse._SubParsersAction))
    with_lake = {name for name, p in action.choices.items()
                 if any("--lake" in a.option_strings for a in p._actions)}
    assert with_lake == set(LAKE_COMMANDS)


@pytest.mark.parametrize("command", sorted(LAKE_COMMANDS))
@pytest.mark.parametrize("uri", ["s3a://bucket/lake", "abfss://c@acct.dfs.core.windows.net/lake",
                                 "hdfs://namenode:8020/data/lake", "file:///srv/lake"])
def test_lake_uris_reach_the_job_as_given(command: str, uri: str) -> None:
    args = cli.parser().parse_args([command, *LAKE_COMMANDS[command], "--lake", uri])
    assert args.lake == uri           # not s3a:/bucket/lake (what a Path makes of it)


def test_a_plain_path_becomes_an_absolute_file_uri(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert lake_uri("var/lake") == f"file://{tmp_path}/var/lake"
    assert lake_uri(f"{tmp_path}/lake/") == f"file://{tmp_path}/lake"
    assert lake_uri("~/lake") == f"file://{os.path.expanduser('~')}/lake"
    assert cli.parser().parse_args(["pipeline"]).lake == f"file://{tmp_path}/var/lake"  # the default


def test_trailing_slashes_go_and_tables_sit_under_the_lake() -> None:
    assert lake_uri("s3a://bucket/lake/") == "s3a://bucket/lake"
    assert table_uri("s3a://bucket/lake", "offsets_history") == "s3a://bucket/lake/offsets_history"


def test_an_empty_lake_is_refused(capsys) -> None:
    with pytest.raises(SystemExit) as e:
        cli.main(["publish-offsets", "--store", "s", "--lake", " "])
    assert e.value.code == 2 and "the lake location is empty" in capsys.readouterr().err


def test_only_file_uris_have_a_local_directory() -> None:
    assert local_path("file:///srv/lake") == Path("/srv/lake")
    assert local_path("file:/srv/lake") == Path("/srv/lake")
    assert local_path("s3a://bucket/lake") is None
    assert local_path("hdfs://nn/lake") is None


def test_table_properties() -> None:
    assert table_properties(append_only=True) == {
        "delta.appendOnly": "true", "delta.logRetentionDuration": "interval 30 days",
        "delta.deletedFileRetentionDuration": "interval 7 days"}
    assert table_properties(append_only=False, change_data_feed=True) == {
        "delta.enableChangeDataFeed": "true", "delta.logRetentionDuration": "interval 30 days",
        "delta.deletedFileRetentionDuration": "interval 7 days"}


def test_the_pipeline_makes_no_sample_lake_on_a_remote_filesystem(tmp_path: Path, capsys) -> None:
    from rocketlake.jobs.cli import pipeline

    store = tmp_path / "store"
    assert pipeline.main(["--store", str(store), "--lake", "s3a://bucket/lake", "--messages", "5"]) == 2
    err = capsys.readouterr().err
    assert "s3a://bucket/lake: the pipeline makes a sample lake on a local path" in err
    assert "--skip-ingest" in err and list(tmp_path.iterdir()) == []    # nothing made


def test_optimize_lake_refuses_a_short_retention_before_spark(capsys) -> None:
    assert cli.main(["optimize-lake", "--lake", "s3a://bucket/lake", "--retention-hours", "1"]) == 2
    assert "--retention-hours 1 is below the tables' deleted-file retention (168 hours)" in \
        capsys.readouterr().err
