"""HTML pages of the service: Jinja2 templates with autoescape on, so every value is escaped."""

from __future__ import annotations

from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

TEMPLATES = Path(__file__).with_name("templates")

_env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(default=True),
                   undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def render(name: str, **context) -> str:
    return _env.get_template(name).render(**context)
