"""Config JSON as fastjson writes it: tab-indented, integer map keys unquoted (docs/FORMAT.md §8)."""
from __future__ import annotations

import json
import re
import warnings
from pathlib import Path
from typing import Any

from rocketlake.store.errors import ConfigFileError
from rocketlake.store.rocksdb_store import rocksdb_config
from rocketlake.store.safe_files import read_file, replace_files

#: the committed offsets of every consumer group, under the store root (ConsumerOffsetManager)
CONSUMER_OFFSETS = "config/consumerOffset.json"
_UNQUOTED_INT_KEY = re.compile(r'([{,]\s*)(-?\d+)(\s*:)')


class ConfigFallbackWarning(UserWarning):
    """A config JSON file was unreadable and its .bak was used instead."""


def parse_fastjson(text: str) -> Any:
    """Parse fastjson output: JSON whose integer map keys may be unquoted (they come back as int)."""
    quoted = _UNQUOTED_INT_KEY.sub(lambda m: f'{m.group(1)}"\\u0000{m.group(2)}"{m.group(3)}', text)

    def hook(pairs: list[tuple[str, Any]]) -> dict[str | int, Any]:
        return {int(k[1:]) if k.startswith("\x00") else k: v for k, v in pairs}
    return json.loads(quoted, object_pairs_hook=hook)


#: ``json.dumps(obj, ensure_ascii=False)``, without making an encoder per call
_encode = json.JSONEncoder(ensure_ascii=False).encode


def dump_fastjson(obj: Any, indent: int = 0) -> str:
    """Serialise like fastjson's PrettyFormat: string-keyed maps one entry per line, int-keyed
    maps inline, closing brace on its own line."""
    tab = "\t"
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        inline = all(isinstance(k, int) for k in obj)
        parts = []
        for k, v in obj.items():
            key = str(k) if isinstance(k, int) else _encode(k)
            item = f"{key}:{dump_fastjson(v, indent + 1)}"
            parts.append(item if inline else f"\n{tab * (indent + 1)}{item}")
        return "{" + ",".join(parts) + f"\n{tab * indent}}}"
    if isinstance(obj, list):
        return "[" + ",".join(dump_fastjson(v, indent + 1) for v in obj) + "]"
    return _encode(obj)


def read_config(path: Path) -> Any | None:
    """Read a config file, falling back to ``<path>.bak`` when the main file is unreadable.

    Returns None when neither exists; raises ConfigFileError when what exists cannot be parsed.
    Falling back from an unreadable main file warns with a ConfigFallbackWarning.
    """
    path = Path(path)
    errors = []
    for p in (path, path.with_name(path.name + ".bak")):
        if not p.exists():
            continue
        try:
            text = p.read_text(encoding="utf-8")
            if not text.strip():
                raise ValueError("file is empty")
            data = parse_fastjson(text)
        except (ValueError, OSError) as e:  # UnicodeDecodeError is a ValueError
            errors.append(f"{p.name}: {e}")
            continue
        if errors:
            warnings.warn(ConfigFallbackWarning(f"{path}: unreadable ({errors[0]}); using "
                                                f"{p.name}"), stacklevel=2)
        return data
    if errors:
        raise ConfigFileError(f"{path}: unreadable ({'; '.join(errors)})")
    return None


def write_config(path: Path, obj: Any) -> None:
    """Write as RocketMQ's MixAll.string2File does (the new content to ``<name>.tmp``, the old
    file's to ``<name>.bak``, then rename), with ``safe_files.replace_files``: the new backup is
    written whole to ``<name>.bak.tmp`` before it replaces the old one, so any failure (a full
    disk: StoreFullError naming the path) leaves the file and its backup as they were and no
    ``.tmp`` behind. A link at any of these names is refused (LinkedFileError)."""
    path = Path(path)
    new = dump_fastjson(obj).encode("utf-8")
    try:
        old = read_file(path)
    except FileNotFoundError:
        replace_files(path.parent, [(path.name, new)])
        return
    replace_files(path.parent, [(path.name + ".bak", old), (path.name, new)])


def read_consumer_offsets(root: Path) -> dict[tuple[str, str], dict[int, int]]:
    """`config/consumerOffset.json` -> {(topic, group): {queue_id: offset}}; from the RocksDB
    database `config/consumerOffsets/` instead where a 5.x broker keeps one (``rocksdb_store``)."""
    in_rocksdb = rocksdb_config(root, "consumerOffsets")
    if in_rocksdb is not None:
        path, entries = in_rocksdb
        if not all(isinstance(v, dict) for v in entries.values()):
            raise ConfigFileError(f"{path}: an entry is not a RocksDBOffsetSerializeWrapper object")
        table: Any = {k: v.get("offsetTable") for k, v in entries.items()}
    else:
        path = Path(root) / CONSUMER_OFFSETS
        data = read_config(path) or {}
        table = data.get("offsetTable", {}) if isinstance(data, dict) else None
    if not isinstance(table, dict):
        raise ConfigFileError(f"{path}: no offsetTable object")
    out: dict[tuple[str, str], dict[int, int]] = {}
    for name, queues in table.items():
        topic, sep, group = str(name).rpartition("@")
        if not sep or not isinstance(queues, dict):
            raise ConfigFileError(f"{path}: bad entry {name!r} (expected topic@group: {{queueId: offset}})")
        out[(topic, group)] = {_non_negative_int(q, path, f"{name}: queue id {q!r}"):
                               _non_negative_int(o, path, f"{name}: offset {o!r} of queue {q}")
                               for q, o in queues.items()}
    return out


def read_subscription_groups(root: Path) -> dict[str, dict[str, Any]]:
    """`config/subscriptionGroup.json`'s subscriptionGroupTable: {group: its
    SubscriptionGroupConfig as stored}; {} when there is no file. ConfigFileError naming the file
    when it (or its ``.bak``) cannot be read or is not a group table."""
    path = Path(root) / "config" / "subscriptionGroup.json"
    data = read_config(path) or {}
    table = data.get("subscriptionGroupTable", {}) if isinstance(data, dict) else None
    if not isinstance(table, dict) or not all(isinstance(g, dict) for g in table.values()):
        raise ConfigFileError(f"{path}: not a subscription group config (no subscriptionGroupTable "
                              f"of SubscriptionGroupConfig objects)")
    return {str(g): c for g, c in table.items()}


def _non_negative_int(v: Any, path: Path, what: str) -> int:
    """``v`` as an int >= 0 (an int, or a string of digits as a quoted map key); else
    ConfigFileError naming the file and ``what``."""
    if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
        return v
    if isinstance(v, str) and v.isdecimal() and v.isascii():
        return int(v)
    raise ConfigFileError(f"{path}: {what} is not a non-negative integer")


def write_consumer_offsets(root: Path, table: dict[tuple[str, str], dict[int, int]]) -> None:
    """Write {(topic, group): {queue_id: offset}} as `config/consumerOffset.json`."""
    obj = {"offsetTable": {f"{t}@{g}": dict(sorted(q.items())) for (t, g), q in table.items()}}
    write_config(Path(root) / CONSUMER_OFFSETS, obj)
