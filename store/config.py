"""Store settings: RocketMQ's names and defaults from `conf/store.conf`, overridable per call."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import tzinfo
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import javaproperties

from rocketlake import default_file
from rocketlake.store.errors import SettingError

_UNITS_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


@dataclass(frozen=True)
class StoreConfig:
    """Typed view of the store settings; field names are RocketMQ's."""
    mappedFileSizeCommitLog: int
    mappedFileSizeConsumeQueue: int
    maxHashSlotNum: int
    maxIndexNum: int
    messageIndexEnable: bool
    flushDiskType: str
    flushIntervalCommitLog: int
    flushCommitLogLeastPages: int
    flushCommitLogThoroughInterval: int
    flushIntervalConsumeQueue: int
    flushConsumeQueueLeastPages: int
    flushConsumeQueueThoroughInterval: int
    syncFlushTimeout: int
    fileReservedTime: int
    deleteWhen: str
    diskMaxUsedSpaceRatio: int
    maxMessageSize: int
    checkCRCOnRecover: bool
    messageDelayLevel: str
    brokerIP1: str
    listenPort: int
    storeTimeZone: str
    storePathCommitLog: str
    readOnlyCommitLogStorePaths: str

    def __post_init__(self) -> None:
        if self.flushDiskType not in ("ASYNC_FLUSH", "SYNC_FLUSH"):
            raise SettingError(f"flushDiskType must be ASYNC_FLUSH or SYNC_FLUSH, got {self.flushDiskType!r}")
        if self.mappedFileSizeConsumeQueue % 20:
            # RocketMQ rounds up to whole units; so do we, but say so rather than surprise.
            object.__setattr__(self, "mappedFileSizeConsumeQueue",
                               -(-self.mappedFileSizeConsumeQueue // 20) * 20)
        for name in ("mappedFileSizeCommitLog", "mappedFileSizeConsumeQueue", "maxHashSlotNum",
                     "maxIndexNum", "maxMessageSize", "syncFlushTimeout"):
            if getattr(self, name) <= 0:
                raise SettingError(f"{name} must be positive, got {getattr(self, name)}")
        self.delay_levels_ms  # noqa: B018 -- reading it validates messageDelayLevel
        self.index_zone  # noqa: B018 -- reading it validates storeTimeZone

    @property
    def delay_levels_ms(self) -> tuple[int, ...]:
        """messageDelayLevel parsed to milliseconds, level 1 first."""
        out = []
        for tok in self.messageDelayLevel.split():
            unit = _UNITS_MS.get(tok[-1:])
            if unit is None or not tok[:-1].isdigit():
                raise SettingError(f"messageDelayLevel: bad level {tok!r} (expected e.g. 5s, 2m, 1h)")
            out.append(int(tok[:-1]) * unit)
        return tuple(out)

    def commitlog_dirs(self, root: Path) -> list[Path]:
        """The directories of the CommitLog of the store at ``root``: `<root>/commitlog`, or
        those ``storePathCommitLog`` and ``readOnlyCommitLogStorePaths`` name (``,`` between
        them, ``MixAll.MULTI_PATH_SPLITTER``), each once, in the order given."""
        named = [p.strip() for s in (self.storePathCommitLog, self.readOnlyCommitLogStorePaths)
                 for p in s.split(",") if p.strip()]
        if not self.storePathCommitLog.strip():
            named.insert(0, str(Path(root) / "commitlog"))
        return [Path(p) for p in dict.fromkeys(named)]

    @property
    def index_zone(self) -> tzinfo | None:
        """storeTimeZone as a zone (index files are named in it); None for the process's local
        zone (an empty setting)."""
        if not self.storeTimeZone:
            return None
        try:
            return ZoneInfo(self.storeTimeZone)
        except (ZoneInfoNotFoundError, ValueError):
            raise SettingError(f"storeTimeZone: unknown time zone {self.storeTimeZone!r} (expected an "
                               f"IANA name like UTC or Asia/Shanghai, or empty for the local zone)") from None

    @property
    def store_host(self) -> str:
        host = f"[{self.brokerIP1}]" if ":" in self.brokerIP1 else self.brokerIP1
        return f"{host}:{self.listenPort}"

    @property
    def sync_flush(self) -> bool:
        return self.flushDiskType == "SYNC_FLUSH"

    @property
    def delete_hours(self) -> frozenset[int]:
        """The hours of the day ``deleteWhen`` names (:func:`parse_delete_when`)."""
        return parse_delete_when(self.deleteWhen)

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def parse_delete_when(value: str) -> frozenset[int]:
    """``deleteWhen`` ("04", "03;04") -> the hours of the day it names; SettingError otherwise."""
    hours = set()
    for tok in value.split(";"):
        tok = tok.strip()
        if not tok.isdigit() or not 0 <= int(tok) <= 23:
            raise SettingError(f"deleteWhen: {tok!r} is not an hour of the day (expected e.g. 04 or "
                               f"03;04)")
        hours.add(int(tok))
    return frozenset(hours)


def read_properties(path: Path) -> dict[str, str]:
    """The settings of a Java ``.properties`` file (UTF-8), read as ``java.util.Properties.load``
    reads them (by ``javaproperties``): ``=``, ``:`` or blanks between name and value, ``#`` and
    ``!`` comments, backslash escapes and line continuations; a later name wins. Values keep
    their trailing blanks, as in Java. A file that cannot be decoded or has a bad ``\\u`` escape
    is a :class:`SettingError` naming ``path``."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise SettingError(f"{path}: not UTF-8 text ({e})") from None
    return parse_properties(text, str(path))


#: Where a broker keeps its own settings under its store root (RocketMQ's
#: BrokerPathConfigHelper: ``~/store/config/broker.properties``; the broker rewrites it when its
#: settings change, e.g. ``mqadmin updateBrokerConfig``).
BROKER_PROPERTIES = Path("config") / "broker.properties"


def broker_name(root: Path) -> str | None:
    """The ``brokerName`` of the store ``root``'s broker settings (:data:`BROKER_PROPERTIES`);
    None when the file is absent or names none."""
    path = Path(root) / BROKER_PROPERTIES
    if not path.is_file():
        return None
    return read_properties(path).get("brokerName", "").strip() or None


def parse_properties(text: str, source: str) -> dict[str, str]:
    """:func:`read_properties` of a file's text; ``source`` names the file in errors."""
    try:
        return javaproperties.loads(text)
    except ValueError as e:  # javaproperties.InvalidUEscapeError
        raise SettingError(f"{source}: {e}") from None


def _coerce(name: str, kind: type, value: Any) -> Any:
    if isinstance(value, str):
        if kind is bool:
            if value.lower() not in ("true", "false"):
                raise SettingError(f"{name} must be true or false, got {value!r}")
            return value.lower() == "true"
        if kind is int:
            try:
                return int(value)
            except ValueError:
                raise SettingError(f"{name} must be an integer, got {value!r}") from None
        return value
    if kind is int and isinstance(value, bool):
        raise SettingError(f"{name} must be an integer, got {value!r}")
    if not isinstance(value, kind):
        raise SettingError(f"{name} must be {kind.__name__}, got {value!r}")
    return value


def load_config(overrides: Mapping[str, Any] | None = None, conf_file: Path | None = None,
                base: StoreConfig | None = None) -> StoreConfig:
    """Settings from ``base`` (a config already built), else from ``conf_file`` (default: the
    `store.conf` shipped in the package), then ``overrides`` (RocketMQ names; unknown names are
    errors). ``load_config(overrides, base=cfg)`` is ``cfg`` with ``overrides`` applied."""
    kinds = {f.name: str(f.type) for f in fields(StoreConfig)}  # "int": annotations are strings
    if base is not None:
        if conf_file is not None:
            raise SettingError("give a base config or a conf file, not both")
        if not overrides:
            return base
        source, values = "the base config", base.as_dict()
    elif conf_file is None:
        source, values = "store.conf", _trimmed(parse_properties(default_file("store.conf"), "store.conf"))
    else:
        source, values = conf_file.name, _trimmed(read_properties(conf_file))
    for name, value in (overrides or {}).items():
        if name not in kinds:
            raise SettingError(f"unknown store setting {name!r}; known: {', '.join(sorted(kinds))}")
        values[name] = value
    missing = set(kinds) - set(values)
    if missing:
        raise SettingError(f"{source} lacks settings: {', '.join(sorted(missing))}")
    types = {"int": int, "bool": bool, "str": str}
    return StoreConfig(**{n: _coerce(n, types[kinds[n]], values[n]) for n in kinds})


def _trimmed(values: dict[str, str]) -> dict[str, Any]:
    """File values without their trailing blanks (Java keeps them; no store setting has any)."""
    return {name: value.rstrip() for name, value in values.items()}


def parse_set_options(items: list[str] | None) -> dict[str, str]:
    """`--set NAME=VALUE` strings -> overrides dict."""
    out: dict[str, str] = {}
    for item in items or ():
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise SettingError(f"--set expects NAME=VALUE, got {item!r}")
        out[name.strip()] = value.strip()
    return out
