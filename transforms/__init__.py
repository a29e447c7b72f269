"""Spark transforms over RocketMQ stores; ``RocketMQDataSource`` is the ``rocketmq`` format.

The data source is imported on first use of these names, not with the package: the rebuild's
tasks import only their own modules (the source pulls in pyspark.sql and pandas, seconds on a
busy worker)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rocketlake.transforms.rocketmq_source import RocketMQDataSource, register

__all__ = ["RocketMQDataSource", "register"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from rocketlake.transforms import rocketmq_source

        return getattr(rocketmq_source, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
