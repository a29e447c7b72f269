"""The store a command works on when it is not given ``--store``: the one rule, flag >
``ROCKETLAKE_STORE`` > the ``store`` key of the config file (TOML: ``$ROCKETLAKE_CONFIG``, else
``$XDG_CONFIG_HOME/rocketlake/config.toml``, ``~/.config/rocketlake/config.toml`` without it).
A relative ``store`` in the file is taken from the file's directory; ``~`` is the home
directory in both."""
from __future__ import annotations

import os
import tomllib
from pathlib import Path

#: the variable naming the default store
STORE_ENV = "ROCKETLAKE_STORE"
#: the variable naming the config file
CONFIG_ENV = "ROCKETLAKE_CONFIG"


def config_path() -> Path:
    """The config file: ``$ROCKETLAKE_CONFIG``, else ``rocketlake/config.toml`` under
    ``$XDG_CONFIG_HOME`` (default ``~/.config``)."""
    named = os.environ.get(CONFIG_ENV)
    if named:
        return Path(named).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "rocketlake" / "config.toml"


def default_store() -> Path | None:
    """``$ROCKETLAKE_STORE``, else the config file's ``store``, else None. ValueError naming the
    file when ``$ROCKETLAKE_CONFIG`` names no file, or the file is not TOML or its ``store`` is
    not a string."""
    env = os.environ.get(STORE_ENV)
    if env:
        return Path(env).expanduser()
    path = config_path()
    if not path.is_file():
        if os.environ.get(CONFIG_ENV):
            raise ValueError(f"{path}: no such config file (${CONFIG_ENV} names it)")
        return None
    try:
        with open(path, "rb") as f:
            store = tomllib.load(f).get("store")
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: not a TOML file: {e}") from None
    if store is None:
        return None
    if not isinstance(store, str) or not store:
        raise ValueError(f"{path}: store must be a path (a non-empty string), got {store!r}")
    return path.parent / Path(store).expanduser()


def missing_store() -> str:
    """The error when no store is given: the three ways to give one."""
    return (f"no store given: pass --store DIR, set {STORE_ENV}=DIR, or write store = \"DIR\" in "
            f"{config_path()}")
