"""Messages for the job's destinations.

Nothing is sent during the run: `send` stages the message, the host stores
it with the report when the run commits and delivers it afterwards, with
the idempotency key `<window key>#<sequence number>`.
"""

from __future__ import annotations

from typing import Union

from . import _host
from .errors import SendFailed

__all__ = ["send"]

Body = Union[bytes, bytearray, memoryview, str]


def send(destination: str, body: Body, content_type: str) -> int:
    """Stages `body` (bytes, or text sent as UTF-8) for `destination` with
    the MIME type `content_type`; returns its sequence number in the run,
    from 1. Raises `SendFailed` (whose `case` is the WIT `send-error`
    case) when the host refuses it."""
    if isinstance(body, str):
        data = body.encode("utf-8")
    elif type(body) is bytes:
        data = body
    else:
        data = bytes(body)
    try:
        return _host.current().send(destination, data, content_type)
    except _host.ERR as e:
        raise SendFailed.from_wit(e.value) from None
