"""Every Spark job and the rocketmq source take a store's file sizes from its files
(store.file_sizes), as verify and dump do: a store written with non-default sizes needs no --set."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from rocketlake.jobs import cli
from rocketlake.store.config import load_config
from rocketlake.store.config_files import write_consumer_offsets
from rocketlake.transforms.rocketmq_source import register

from .helpers import SMALL


def _digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_jobs_read_sizes_from_the_files_without_set(spark, store_copy: Path, tmp_path: Path,
                                                     capsys) -> None:
    defaults = load_config({})
    assert all(getattr(defaults, k) != v for k, v in SMALL.items())  # the store's are not these
    write_consumer_offsets(store_copy, {("orders", "g1"): {0: 1}})
    out, lake = tmp_path / "rebuilt", tmp_path / "lake"
    assert cli.main(["rebuild", "--store", str(store_copy), "--output", str(out)]) == 0
    for name in ("consumequeue", "index"):
        assert _digest(out / name) == _digest(store_copy / name)  # rebuilt at the files' sizes
    assert cli.main(["publish-offsets", "--store", str(store_copy), "--lake", str(lake),
                     "--store-name", "s1"]) == 0
    assert cli.main(["compact", "--store", str(store_copy), "--lake", str(lake), "--store-name", "s1",
                     "--dry-run"]) == 0
    capsys.readouterr()
    register(spark)
    records = spark.read.format("rocketmq").load(str(store_copy)).count()
    units = spark.read.format("rocketmq").option("kind", "consumequeue").load(str(store_copy)).count()
    assert cli.main(["verify", "--store", str(store_copy), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert records == report["records"] and units > 0


def test_a_size_option_the_files_contradict_is_refused(spark, store_copy: Path) -> None:
    register(spark)
    with pytest.raises(Exception, match=r"mappedFileSizeCommitLog=1048576 was given, but the "
                                        r"CommitLog files under .* are 65536 bytes"):
        (spark.read.format("rocketmq").option("mappedFileSizeCommitLog", "1048576")
         .load(str(store_copy)).count())
