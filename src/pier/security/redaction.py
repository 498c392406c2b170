"""Presigned URLs carry their signature in the query string, and uvicorn's access log writes the whole
path: a signature in a log could be replayed until it expires. This filter blanks those parameters."""

from __future__ import annotations

import logging
import re

SIGNED_PARAMETERS = re.compile(r"((?:X-Amz-Signature|X-Amz-Credential|X-Amz-Security-Token)=)[^&\s\"]*",
                               re.IGNORECASE)
ACCESS_LOGGER = "uvicorn.access"


def redact(text: str) -> str:
    return SIGNED_PARAMETERS.sub(r"\1REDACTED", text)


class RedactSignatures(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(redact(arg) if isinstance(arg, str) else arg for arg in record.args)
        elif isinstance(record.msg, str):
            record.msg = redact(record.msg)
        return True


def redact_access_log() -> None:
    """Once per process, however many gateways it builds."""
    logger = logging.getLogger(ACCESS_LOGGER)
    if not any(isinstance(f, RedactSignatures) for f in logger.filters):
        logger.addFilter(RedactSignatures())
