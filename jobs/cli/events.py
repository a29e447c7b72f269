"""The event format: one JSON object per message, as `rocketlake ingest` reads it (``topic``,
``body`` text or ``body_b64`` binary, ``keys``, ``tags``, ``properties``, ...)."""
from __future__ import annotations

import base64
from typing import Any

from rocketlake.store import Message


class InputError(ValueError):
    """A line of input that is not a valid event."""


#: the fields an event may have
EVENT_FIELDS = {"topic", "body", "body_b64", "queue_id", "tags", "keys", "properties",
                "delay_level", "flag", "born_timestamp", "born_host", "sys_flag", "store_host",
                "store_timestamp", "reconsume_times", "prepared_transaction_offset"}
#: the fields whose values are integers
INT_EVENT_FIELDS = ("queue_id", "delay_level", "flag", "sys_flag", "born_timestamp",
                    "store_timestamp", "reconsume_times", "prepared_transaction_offset")


def event_to_message(ev: Any) -> Message:
    """One JSON event -> Message. ``body`` is text (UTF-8), ``body_b64`` binary."""
    if not isinstance(ev, dict):
        raise InputError("event must be a JSON object")
    unknown = set(ev) - EVENT_FIELDS
    if unknown:
        raise InputError(f"unknown field(s) {', '.join(sorted(unknown))}")
    if "topic" not in ev:
        raise InputError("missing field 'topic'")
    if ("body" in ev) == ("body_b64" in ev):
        raise InputError("give exactly one of 'body' (text) or 'body_b64'")
    if "body" in ev:
        if not isinstance(ev["body"], str):
            raise InputError("'body' must be a string (use body_b64 for binary)")
        body = ev["body"].encode()
    else:
        try:
            body = base64.b64decode(ev["body_b64"], validate=True)
        except (ValueError, TypeError):
            raise InputError("'body_b64' is not valid base64") from None
    kw = {k: ev[k] for k in EVENT_FIELDS - {"body", "body_b64"} if k in ev}
    for k in INT_EVENT_FIELDS:
        if k in kw and type(kw[k]) is not int:
            raise InputError(f"'{k}' must be an integer, got {kw[k]!r}")
    if "properties" in kw and not (isinstance(kw["properties"], dict)
                                   and all(isinstance(v, str) for v in kw["properties"].values())):
        raise InputError("'properties' must be an object of string values")
    return Message(body=body, **kw)
