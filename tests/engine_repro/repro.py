"""Replays a failing case hypothesis printed for tests/test_engine_properties.py: python tests/engine_repro/repro.py CASE.txt
(case1: fixed on this branch; case2: still fails, before and after the fix)."""
import sys
sys.path.insert(0, "tests")
from test_engine_properties import *  # noqa
import test_engine_properties as m
g = {k: getattr(m, k) for k in dir(m)}
src = open(sys.argv[1]).read().split("\n", 1)[1]
try:
    exec(src, g)
    print("PASS")
except AssertionError as e:
    print("FAIL", str(e)[:150])
