"""``--since 7d``: a period back from now, in the words people use (30m, 24h, 7d, 2w)."""

from __future__ import annotations

import re

from ..quota.errors import ValidationError

_PERIOD = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)\s*$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
MAX_SECONDS = 10 * 365 * 86400


def parse_since(text: str, what: str = "--since") -> float:
    """Seconds in ``text`` (``7d``); a ValidationError naming ``what`` when it is not a period."""
    match = _PERIOD.match(text or "")
    if not match:
        raise ValidationError(f"{what}: {text!r} is not a period (write it as 30m, 24h, 7d or 2w)")
    seconds = float(match.group(1)) * _SECONDS[match.group(2)]
    if not 0 < seconds <= MAX_SECONDS:
        raise ValidationError(f"{what}: {text!r} must be more than nothing and at most ten years")
    return seconds
