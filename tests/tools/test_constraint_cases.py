"""The constrained-decoding ground truth (tests/data/constraint/cases.json, read by
tests/engine/constraint_test.cpp) is what tools/make_constraint_cases.py computes with the
installed `jsonschema` and `re`: regenerated here and compared verdict by verdict."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_checked_in_cases_match_the_references():
    out = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "make_constraint_cases.py")],
                         check=True, capture_output=True, text=True).stdout
    fresh = json.loads(out)["cases"]
    with open(os.path.join(ROOT, "tests", "data", "constraint", "cases.json"), encoding="utf-8") as f:
        stored = json.load(f)["cases"]
    assert fresh == stored
    verdicts = [c["valid"] for case in stored for c in case["candidates"]]
    assert len(verdicts) >= 50 and any(verdicts) and not all(verdicts)
