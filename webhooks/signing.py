"""Signatures of the Standard Webhooks scheme (extensions.md, "Webhooks"): `webhook-signature`
is `v1,` + base64 HMAC-SHA256 of `{webhook-id}.{webhook-timestamp}.{body}`, keyed with the
secret's decoded bytes; one such signature per secret in use, space-separated.

Written by hand (a few lines of hmac) rather than with the `standardwebhooks` package, which the
tests use to verify: the check is then independent of the code it checks.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets as random
from collections.abc import Iterable

PREFIX = "whsec_"


def secret_new() -> str:
    """`whsec_` + base64 of 32 random bytes."""
    return PREFIX + base64.b64encode(random.token_bytes(32)).decode("ascii")


def signature(secret: str, *, message_id: str, timestamp: int, body: bytes) -> str:
    key = base64.b64decode(secret.removeprefix(PREFIX))
    signed = f"{message_id}.{timestamp}.".encode() + body
    digest = hmac.new(key, signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def signature_header(
    secrets: Iterable[str], *, message_id: str, timestamp: int, body: bytes
) -> str:
    """The `webhook-signature` header: a signature per secret, space-separated."""
    return " ".join(
        signature(secret, message_id=message_id, timestamp=timestamp, body=body)
        for secret in secrets
    )
