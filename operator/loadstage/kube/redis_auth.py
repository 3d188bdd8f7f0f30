"""The generated password of a deployed Redis: derived from the operator's key (a Secret the chart generates)
and the experiment's uid, so that a restarted operator knows it again without reading any Secret."""

from __future__ import annotations

import hashlib
import hmac

from loadstage.api.schema import ValidationError

KEY_ENV = "LOADSTAGE_REDIS_KEY"
MIN_KEY_LENGTH = 32


def operator_key(text: str | None) -> bytes | None:
    """The key from $LOADSTAGE_REDIS_KEY; none (no generated passwords) where it is unset."""
    if not text:
        return None
    if len(text) < MIN_KEY_LENGTH:
        raise ValidationError([(KEY_ENV, f"the key has {len(text)} characters; at least {MIN_KEY_LENGTH} are "
                                          f"needed (the chart generates 48)")])
    return text.encode()


def derived_password(key: bytes, owner_uid: str) -> str:
    return hmac.new(key, f"loadstage redis password {owner_uid}".encode(), hashlib.sha256).hexdigest()
