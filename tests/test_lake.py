"""Where the lake lives: every ``--lake`` takes a URI of any filesystem Spark knows, or a path."""
from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from rocketlake.jobs import cli
from rocketlake.jobs.lake import lake_uri, local_path, store_name, table_properties, table_uri
from rocketlake.store.errors import SettingError
from rocketlake.store.store_dir import create_store

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


# --- a store's name in the lake -------------------------------------------------------------------
def _broker_store(root: Path, properties: str) -> Path:
    """A store whose broker keeps ``properties`` in config/broker.properties (as RocketMQ's
    BrokerPathConfigHelper places it)."""
    create_store(root)
    (root / "config").mkdir()
    (root / "config" / "broker.properties").write_text(properties)
    return root


def test_a_store_is_named_by_its_brokers_brokername(tmp_path: Path) -> None:
    root = _broker_store(tmp_path / "store", "brokerClusterName=DefaultCluster\nbrokerName = broker-a\n"
                                               "brokerId=0\n")
    assert store_name(root) == "broker-a"
    assert store_name(root, "b7") == "b7"              # --store-name wins


def test_a_store_without_a_name_is_refused_for_writing_and_read_by_its_directory(tmp_path: Path) -> None:
    nameless = [create_store(tmp_path / "store"),
                _broker_store(tmp_path / "b" / "store", "brokerId=0\n")]   # a file without brokerName
    for root in nameless:
        with pytest.raises(SettingError) as e:
            store_name(root)
        assert str(root) in str(e.value) and "--store-name" in str(e.value) and "~/store" in str(e.value)
        assert store_name(root, reading=True) == "store"   # the name lakes written before carry


@pytest.mark.parametrize("command", ["publish-offsets", "compact", "archive"])
def test_lake_writers_refuse_a_nameless_store_before_spark_starts(tmp_path: Path, command: str,
                                                                   capsys) -> None:
    root, lake = create_store(tmp_path / "store"), tmp_path / "lake"
    assert cli.main([command, "--store", str(root), "--lake", str(lake)]) == 2
    err = capsys.readouterr().err
    assert f"{root}: give the store's name in the lake with --store-name NAME" in err
    assert not lake.exists()                           # nothing written, no session started


@pytest.mark.parametrize("command, table", [(["publish-offsets", "--store-name", "b"], "offsets_history"),
                                            (["check-consistency", "--report", "R"], "maintenance_runs")])
def test_a_table_directory_holding_someones_files_is_refused(tmp_path: Path, capsys, command, table) -> None:
    """A lake table is never created among files that are not a Delta table's: its files would
    mix with them, and the lake's VACUUM (optimize-lake) deletes files no commit names."""
    store = create_store(tmp_path / "store")
    lake = tmp_path / "lake"
    (lake / table).mkdir(parents=True)
    (lake / table / "notes.txt").write_text("someone's")
    args = [a.replace("R", str(tmp_path / "r.json")) for a in command]
    assert cli.main([args[0], "--store", str(store), "--lake", str(lake), *args[1:]]) == 2
    assert (f"{lake / table}: holds files but no Delta table (no _delta_log); refusing"
            in capsys.readouterr().err)
    assert [p.name for p in (lake / table).iterdir()] == ["notes.txt"]
    assert (lake / table / "notes.txt").read_text() == "someone's"


@pytest.mark.parametrize("name", ["..", "../../victim", "a/b", "."])
def test_a_store_name_that_would_name_another_directory_is_refused(tmp_path: Path, capsys, name) -> None:
    """The name is a directory of the lake (<lake>/_checkpoints/archive/<name>): '../../victim'
    put archive's checkpoint outside the lake. Refused before Spark starts, from --store-name or
    from the broker's brokerName alike."""
    with pytest.raises(SettingError, match="cannot be"):
        store_name(_broker_store(tmp_path / "b" / "store", f"brokerName={name}\n"))
    root, lake = create_store(tmp_path / "store"), tmp_path / "lake"
    assert cli.main(["archive", "--store", str(root), "--lake", str(lake), "--store-name", name]) == 2
    assert f"the store's name {name!r} cannot be . or .. nor hold a / or \\" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b", "store"]
