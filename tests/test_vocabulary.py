"""The Python vocabulary against the table both vocabularies share (tests/vocabulary.json).

Each case of the table is one test, named by its function and arguments; the TypeScript
twin runs the same cases, so a form changed here and not there fails one of the two.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from hub_ext import vocabulary

TABLE = json.loads((Path(__file__).with_name("vocabulary.json")).read_text())
FUNCTIONS = {"resourceName": vocabulary.resource_name, "amount": vocabulary.amount,
             "quantity": vocabulary.quantity, "duration": vocabulary.duration,
             "countdown": vocabulary.countdown, "timeOfDay": vocabulary.time_of_day, "when": vocabulary.when,
             "stateWord": vocabulary.state_word, "sentence": vocabulary.sentence, "barText": vocabulary.bar_text,
             "datasetState": vocabulary.dataset_state}
CASES = [pytest.param(name, args, expected, id=f"{name}{json.dumps(args, ensure_ascii=False)}")
         for name, cases in TABLE.items() if not name.startswith("_") for args, expected in cases]


@pytest.fixture
def utc():
    """Times of day as the table has them: in UTC, whatever the machine's zone."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    yield
    if before is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = before
    time.tzset()


def test_every_part_of_the_table_has_a_function():
    assert {name for name in TABLE if not name.startswith("_")} == set(FUNCTIONS)


@pytest.mark.parametrize("name, args, expected", CASES)
def test_the_table(utc, name, args, expected):
    assert FUNCTIONS[name](*args) == expected
