"""Text the API keeps is valid UTF-8: a JSON body may spell a lone UTF-16 surrogate (``"\\ud800"``),
which Python decodes to a string that cannot be written out again (the store, a process's argv
or environment, a log line). Such a string is a 400 naming its field, before anything is stored."""

from __future__ import annotations

from ..quota.errors import ValidationError

_WHY = "is not valid UTF-8 text (it holds a lone UTF-16 surrogate, such as \\ud800 in JSON): send the text as UTF-8"


def _bad(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def check_text(value, where: str) -> None:
    """ValidationError naming a string in ``value`` (keys included, at any depth) that is not valid
    UTF-8, as ``where: env.NAME`` or ``where: command[2]``; ``where`` names ``value`` itself."""
    stack = [(value, "")]
    while stack:  # iterative: the depth of a body is bounded elsewhere, not here
        item, path = stack.pop()
        if isinstance(item, str):
            if _bad(item):
                raise ValidationError(f"{where}: {path} {_WHY}" if path else f"{where} {_WHY}")
        elif isinstance(item, dict):
            for key, sub in item.items():
                if isinstance(key, str) and _bad(key):
                    raise ValidationError(f"{where}: {path} has a field name that {_WHY}" if path
                                          else f"{where} has a field name that {_WHY}")
                stack.append((sub, f"{path}.{key}" if path else str(key)))
        elif isinstance(item, list):
            stack.extend((sub, f"{path}[{i}]") for i, sub in enumerate(item))
