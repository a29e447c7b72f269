"""Spark transforms over RocketMQ stores; ``RocketMQDataSource`` is the ``rocketmq`` format."""
from rocketlake.transforms.rocketmq_source import RocketMQDataSource, register

__all__ = ["RocketMQDataSource", "register"]
