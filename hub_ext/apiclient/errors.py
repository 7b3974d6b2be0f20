"""What a failed call raises: one family, whichever client made the call."""

from __future__ import annotations

import json


class TenancyError(RuntimeError):
    """The service said no, or could not be reached.

    ``str()`` is the line the command line and a notebook show (``... (HTTP 403)``);
    ``sentence`` is the service's own, from its JSON ``error`` ("" when it gave none), for
    callers that word the rest themselves; ``status`` is the HTTP status, None when
    nothing answered.
    """

    def __init__(self, message: str, status: int | None = None, sentence: str = ""):
        super().__init__(message)
        self.status = status
        self.sentence = sentence


class ServiceRefused(TenancyError):
    """A 4xx: the service understood the call and said no."""


class ServiceDown(TenancyError):
    """Nothing answered, or the service failed (a 5xx): there is no one to say why."""


class NotConfigured(ServiceDown):
    """No service to ask: no URL or no token (a server started outside a hub with the scheduler)."""


def refusal(status: int, payload: bytes | None, reason: str) -> TenancyError:
    """The exception for an answer with an error ``status``: the service's sentence, else its text, else the reason."""
    text = (payload or b"").decode("utf-8", "replace")
    try:
        sentence = json.loads(text).get("error") or ""
    except (ValueError, AttributeError):
        sentence = ""
    kind = ServiceRefused if 400 <= status < 500 else ServiceDown
    return kind(f"{sentence or text or reason} (HTTP {status})", status, sentence)


def unreachable(url: str, reason) -> ServiceDown:
    return ServiceDown(f"the tenancy service at {url} is unreachable: {reason}")
