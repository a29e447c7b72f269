"""What a topic's name says: the one rule for system topics (listed apart from user topics) and a
consumer group's retry and dead-letter topics (``MixAll.getRetryTopic`` / ``getDLQTopic``); and
what a group's name says: the broker's own groups (``MixAll.isSysConsumerGroup``).

System topics are the broker's own: SCHEDULE_TOPIC_XXXX (delayed copies), ``RMQ_SYS_*``
(transaction half and op topics, trace, ...), 5.x's ``rmq_sys_*`` (timer wheel, pop revive),
and every group's ``%RETRY%<group>`` and ``%DLQ%<group>``. Everything else is a user topic.

System groups are named ``CID_RMQ_SYS_*``: a broker commits the transaction check's progress
through RMQ_SYS_TRANS_HALF_TOPIC and RMQ_SYS_TRANS_OP_HALF_TOPIC as ``CID_RMQ_SYS_TRANS``
(RocketMQ 4.9 and 5.x ``TransactionalMessageBridge.updateConsumeOffset``). No client consumes as
one, and ``mqadmin consumerProgress`` lists no such group unless ``-g`` names it (it lists the
groups of the ``%RETRY%`` topics).
"""
from __future__ import annotations

from rocketlake.store import codec

RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
#: ``MixAll.CID_RMQ_SYS_PREFIX``
SYSTEM_GROUP_PREFIX = "CID_RMQ_SYS_"
#: prefixes of the broker's own topics (``TopicValidator``), the group topics' included
SYSTEM_PREFIXES = ("RMQ_SYS_", codec.SYSTEM_TOPIC_PREFIX, RETRY_PREFIX, DLQ_PREFIX)


def is_system_topic(topic: str) -> bool:
    """Whether ``topic`` is one of the broker's own (module docstring)."""
    return topic == codec.SCHEDULE_TOPIC or topic.startswith(SYSTEM_PREFIXES)


def is_system_group(group: str) -> bool:
    """Whether ``group`` is one of the broker's own consumer groups (module docstring)."""
    return group.startswith(SYSTEM_GROUP_PREFIX)


def retry_topic(group: str) -> str:
    """``%RETRY%<group>``: where a consumer group's messages to consume again go."""
    return RETRY_PREFIX + group


def dlq_topic(group: str) -> str:
    """``%DLQ%<group>``: where a consumer group's messages go after its last retry."""
    return DLQ_PREFIX + group



def group_topic_rank(topic: str, group: str) -> int:
    """Where ``topic`` sits among ``group``'s rows: the group's own topics (0), then its retry
    (1) and dead-letter (2) topic, beside and after them."""
    return 1 if topic == retry_topic(group) else 2 if topic == dlq_topic(group) else 0
