"""Differential test of `m2cpp parse` against tools/m2_parse_reference.py, an
independent Python implementation whose value typing runs Python's own
int/float/json (as vLLM does): thousands of (schema, value) conversions and
hundreds of random outputs (reasoning, blocks, malformed and cut-off text,
invalid UTF-8), whole and streamed through the CLI. Seeded: deterministic."""

import json
import os
import random
import re
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

SOURCE_DIR = Path(os.environ.get("M2CPP_SOURCE_DIR", Path(__file__).resolve().parents[2]))
BINARY = os.environ.get("M2CPP_BINARY", "")
sys.path.insert(0, str(SOURCE_DIR / "tools"))
import m2_parse_reference as ref  # noqa: E402

pytestmark = pytest.mark.skipif(not os.path.exists(BINARY), reason="M2CPP_BINARY (the built m2cpp) is not set")

ID_RE = re.compile(r"call_[0-9a-f]{24}")

SCHEMAS = [
    {"type": "integer"}, {"type": "number"}, {"type": "boolean"}, {"type": "object"}, {"type": "array"},
    {"type": "string"}, {"type": "int"}, {"type": "float"}, {"type": "bool"}, {"type": "str"}, {"type": "text"},
    {"type": "INTEGER"}, {"type": "null"}, {"type": "foo"}, {}, {"description": "untyped"},
    {"type": ["integer", "null"]}, {"type": ["number", "string"]}, {"type": ["boolean", "integer"]},
    {"type": ["object", "array"]}, {"type": ["string", "null"]},
    {"anyOf": [{"type": "integer"}, {"type": "null"}]}, {"anyOf": [{"type": "number"}, {"type": "boolean"}]},
    {"oneOf": [{"type": "object"}, {"type": "string"}]}, {"allOf": [{"type": "integer"}]},
    {"anyOf": [{"type": "integer"}, {"description": "no type"}]}, {"anyOf": [{"anyOf": [{"type": "array"}]}]},
    {"enum": [1, 2, 3]}, {"enum": ["a", "b"]}, {"enum": [1.5, "x", None]}, {"enum": [True, False]},
    {"enum": [[1], {"k": 1}]}, {"type": "string", "enum": ["c", "f"]}, {"enum": []},
]

FIXED_VALUES = [
    "", " ", "0", "-0", "+0", "007", "3", "-42", " 17 ", "\t5\n", "1_000", "1__000", "_1", "1_", "+1_000_000",
    "9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
    "18446744073709551615", "18446744073709551616", "123456789012345678901234567890",
    "3.0", "3.5", "-2.25", ".5", "5.", ".", "1e3", "1E-7", "1e+400", "1e-400", "2.5e-3", "1_0.5", "1e1_0",
    "0.1", "0.30000000000000004", "1e16", "1.5e16", "123456789.125", "9.999999999999999e22", "-0.0",
    "inf", "-Infinity", "nan", "NaN", "0x10", "1,000", "١٢٣",
    "true", "false", "True", "FALSE", "yes", "No", "on", "OFF", "1", "maybe",
    "null", "None", "NIL", " null ", "\u3000null\u00a0", "nul", "nulls", "none of it", "\u200bnull",
    "{}", "[]", '{"a": 1}', '{"a": [1, 2.50, {"b": null}], "c": "é"}', "[1, \"x\", true, null, 1.0]",
    '{"a": 1, "a": 2}', "{a: 1}", "[1, 2", '{"x": NaN}', '[1e400]', '{"big": 123456789012345678901234567890}',
    "\ufeff{}", '"just a string"', "12 34", "[" * 300 + "]" * 300, '{"k": "\\u00e9\\n"}',
    "    indented code\n\ttab  ", "line1\nline2", "\nwrapped\n", "\n\nA\n\n", "東京 🇯🇵", "a\"b\\c",
    "\x01\x1f\x7f",
    "<div>x</div>", "</invoke> inside", "<parameter name=\"z\">",
]


def random_value(rng):
    kind = rng.randrange(9)
    if kind == 0:
        n = rng.choice([rng.randrange(-1000, 1000), rng.randrange(-2**70, 2**70), rng.randrange(2**62, 2**65)])
        s = str(n)
        if rng.random() < 0.2 and len(s) > 2:
            s = s[:2] + "_" + s[2:]
        return s
    if kind == 1:
        x = rng.choice([rng.uniform(-1e6, 1e6), rng.uniform(-1, 1) * 10 ** rng.randrange(-30, 30),
                        float(rng.randrange(-10**6, 10**6)), rng.random() * 1e-5])
        return rng.choice([repr(x), "%.3f" % x, "%e" % x, "%g" % x, "%.17g" % x])
    if kind == 2:
        return json.dumps(random_json(rng, 3), ensure_ascii=rng.random() < 0.5,
                          indent=rng.choice([None, 1]), separators=rng.choice([None, (",", ":")]))
    if kind == 3:
        word = rng.choice(["true", "false", "yes", "no", "on", "off", "null", "none", "nil"])
        word = "".join(c.upper() if rng.random() < 0.5 else c for c in word)
        return rng.choice(["", " ", "\n", "\u2003"]) + word + rng.choice(["", " ", "\n", "\u00a0"])
    if kind == 4:
        return "".join(rng.choice("ab \n\t\"\\<>/é😀中\x00\x1b") for _ in range(rng.randrange(12)))
    return rng.choice(FIXED_VALUES)


def random_json(rng, depth):
    kind = rng.randrange(7 if depth else 4)
    if kind == 0:
        return rng.choice([None, True, False])
    if kind == 1:
        return rng.choice([rng.randrange(-10**6, 10**6), rng.randrange(-2**63, 2**64)])
    if kind == 2:
        return rng.choice([rng.uniform(-1e3, 1e3), 1e-7, 1e22, 0.5, -0.0])
    if kind == 3:
        return "".join(rng.choice("xyzé😀\"\\\n\t ") for _ in range(rng.randrange(6)))
    if kind in (4, 5):
        return [random_json(rng, depth - 1) for _ in range(rng.randrange(4))]
    return {"k%d" % rng.randrange(5): random_json(rng, depth - 1) for _ in range(rng.randrange(4))}


def run_m2cpp(request, raw, *extra):
    with tempfile.TemporaryDirectory() as tmp:
        req_path, raw_path = Path(tmp) / "req.json", Path(tmp) / "raw.txt"
        req_path.write_text(json.dumps(request), encoding="utf-8")
        raw_path.write_bytes(raw)
        p = subprocess.run([BINARY, "parse", "--request", str(req_path), "--text", str(raw_path), *extra],
                           capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr.decode()
    return p.stdout.decode("utf-8"), p.stderr.decode("utf-8")


def strip_ids(message):
    calls = message.get("tool_calls", [])
    ids = [c.pop("id") for c in calls]
    assert all(ID_RE.fullmatch(i) for i in ids), ids
    assert len(set(ids)) == len(ids)
    return message


def check_whole(request, raw, mode):
    got = strip_ids(json.loads(run_m2cpp(request, raw, "--reasoning", mode)[0]))
    want = strip_ids(ref.parse(raw, request, mode))
    assert got == want, "raw=%r" % raw


def tool(name, schema):
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object",
                                                                            "properties": {"v": schema}}}}


def test_value_conversions_match_python():
    rng = random.Random(1)
    request = {"tools": [tool("t%d" % i, s) for i, s in enumerate(SCHEMAS)]}
    pairs = [(i, v) for i in range(len(SCHEMAS)) for v in FIXED_VALUES]
    pairs += [(rng.randrange(len(SCHEMAS)), random_value(rng)) for _ in range(4000)]
    checked = 0
    for start in range(0, len(pairs), 80):
        invokes = "".join('<invoke name="t%d">\n<parameter name="v">%s</parameter>\n</invoke>\n' % (i, v)
                          for i, v in pairs[start:start + 80])
        raw = ("ok\n</think>\n\n<minimax:tool_call>\n" + invokes + "</minimax:tool_call>").encode()
        got = strip_ids(json.loads(run_m2cpp(request, raw)[0]))
        want = strip_ids(ref.parse(raw, request))
        assert len(want["tool_calls"]) == len(pairs[start:start + 80])
        for (i, v), g, w in zip(pairs[start:start + 80], got["tool_calls"], want["tool_calls"]):
            assert g == w, "schema %r value %r" % (SCHEMAS[i], v)
            checked += 1
        assert got == want
    assert checked >= 6000


def test_float_repr_matches_python():
    """JSON arrays of random doubles (every bit pattern) come back as json.dumps writes them."""
    rng = random.Random(4)
    values = []
    while len(values) < 6000:
        d = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
        if d == d and abs(d) != float("inf"):
            values.append(d)
    request = {"tools": [tool("a", {"type": "array"}), tool("n", {"type": "number"})]}
    invokes = "".join('<invoke name="a"><parameter name="v">%s</parameter></invoke>' % json.dumps(values[i:i + 100])
                      for i in range(0, len(values), 100))
    invokes += "".join('<invoke name="n"><parameter name="v">%r</parameter></invoke>' % v for v in values[:1000])
    raw = ("</think><minimax:tool_call>" + invokes + "</minimax:tool_call>").encode()
    got = strip_ids(json.loads(run_m2cpp(request, raw)[0]))
    assert len(got["tool_calls"]) == 1060
    assert got == strip_ids(ref.parse(raw, request))


STRUCT_TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "location": {"type": "string"}, "days": {"type": "integer"}, "unit": {"enum": ["c", "f"]}}}}},
    {"type": "function", "function": {"name": "run", "parameters": {"type": "object", "properties": {
        "code": {"type": "string"}, "timeout": {"type": "number"}, "env": {"type": "object"},
        "flags": {"type": ["array", "null"]}, "note": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}}},
]
PIECES = ["Sure.", " ", "\n", "\n\n", "\t", "Done!", "<minimax:to", "</minimax:tool_call>", "<invoke name=\"x\">",
          "</think>", "<think>", "中文 ✓", "👩‍👩‍👧", "<", ">", "\r\n", "</parameter>", "a</parameter>b"]
VALUES = ["Paris", "3", "4.0", "null", "None", "yes", "", "\n", "{\"a\": [1, 2]}", "[1,", "  code\n\t x  ",
          "x</parameter>y", "v</parameter>\n<oops>", "</invoke>", "é\"\\", "\u3000nil", "1_5"]


def random_output(rng):
    def text(pool, n=4):
        return "".join(rng.choice(pool) for _ in range(rng.randrange(n)))

    def name(n):
        return rng.choice(['"%s"' % n, '"%s"' % n, "'%s'" % n, n, ' "%s" ' % n, '"a\nb"', '""', "x" * 300])

    def invoke():
        tool_name = rng.choice(["get_weather", "run", "unknown"])
        params = {"get_weather": ["location", "days", "unit", "other"],
                  "run": ["code", "timeout", "env", "flags", "note"], "unknown": ["q"]}[tool_name]
        out = "<invoke name=%s>%s" % (name(tool_name), rng.choice(["", "\n", " \n"]))
        for _ in range(rng.randrange(4)):
            v = rng.choice(VALUES)
            if rng.random() < 0.7:
                v = "\n" + v + "\n"
            out += "<parameter name=%s>%s</parameter>%s" % (name(rng.choice(params)), v, rng.choice(["\n", "", "  \n"]))
            if rng.random() < 0.05:
                out += "noise "
        return out + ("</invoke>" if rng.random() < 0.95 else "") + rng.choice(["\n", "", "\n\n"])

    def block():
        out = "<minimax:tool_call>" + rng.choice(["\n", "", " "])
        if rng.random() < 0.05:
            out += "junk"
        out += "".join(invoke() for _ in range(rng.randrange(0 if rng.random() < 0.05 else 1, 4)))
        return out + ("</minimax:tool_call>" if rng.random() < 0.9 else "")

    out = ("<think>" if rng.random() < 0.05 else "") + text(PIECES[:16])
    if rng.random() < 0.1:
        out += block()
    if rng.random() < 0.9:
        out += "</think>" + rng.choice(["", "\n", "\n\n"])
    for _ in range(rng.randrange(4)):
        out += text(PIECES)
        if rng.random() < 0.8:
            out += block()
    raw = out.encode()
    if rng.random() < 0.1:
        raw = raw.replace(b"\xe4\xb8\xad", b"\xe4\xb8")  # invalid UTF-8
    if rng.random() < 0.2:
        raw = raw[:rng.randrange(len(raw) + 1)]  # cut off
    return raw


def test_random_outputs_match_reference():
    rng = random.Random(2)
    for i in range(1000):
        raw = random_output(rng)
        request = {"messages": [], "tools": STRUCT_TOOLS}
        if i % 25 == 0:
            request["tool_choice"] = "none"
        if i % 40 == 0:
            request["tools"] = []
        check_whole(request, raw, "split" if i % 2 == 0 else "append-think")


def test_streamed_cli_matches_reference():
    rng = random.Random(3)
    for i in range(300):
        raw = random_output(rng)
        request = {"tools": STRUCT_TOOLS}
        mode = "split" if i % 2 == 0 else "append-think"
        out, err = run_m2cpp(request, raw, "--reasoning", mode, "--stream", str(rng.choice([1, 2, 3, 7, 50])))
        lines = [json.loads(line) for line in out.splitlines()]
        assert "finish_reason" in lines[-1]
        reasoning, content, calls = "", "", []
        for delta in lines[:-1]:
            reasoning += delta.get("reasoning_content", "")
            content += delta.get("content", "")
            for c in delta.get("tool_calls", []):
                if "id" in c:
                    assert c["index"] == len(calls) and ID_RE.fullmatch(c["id"])
                    calls.append({"name": c["function"]["name"], "arguments": ""})
                calls[c["index"]]["arguments"] += c["function"]["arguments"]
        want = ref.parse(raw, request, mode)
        want_calls = [c["function"] for c in want.get("tool_calls", [])]
        assert lines[-1]["finish_reason"] == ("tool_calls" if calls else "stop")
        assert reasoning == (want.get("reasoning_content") or ""), raw
        if "inside a tool call" in err:  # cut off after a call's name was sent: documented difference
            calls.pop()
            assert (want["content"] or "").startswith(content), raw
        else:
            assert content == (want["content"] or ""), raw
        assert len(calls) == len(want_calls), raw
        for got, exp in zip(calls, want_calls):
            assert got["name"] == exp["name"]
            assert json.loads(got["arguments"]) == json.loads(exp["arguments"]), raw


def test_cli_errors_name_the_problem():
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "raw.txt"
        raw.write_text("x")
        bad = Path(tmp) / "bad.json"
        bad.write_text('{"tools": [')
        for request, message in [(Path(tmp) / "missing.json", "missing.json: cannot open"),
                                 (bad, "bad.json: invalid JSON at byte")]:
            p = subprocess.run([BINARY, "parse", "--request", str(request), "--text", str(raw)], capture_output=True)
            assert p.returncode != 0 and message in p.stderr.decode(), p.stderr
        p = subprocess.run([BINARY, "parse", "--request", str(bad), "--text", str(raw), "--reasoning", "x"],
                           capture_output=True)
        assert p.returncode != 0 and b"--reasoning" in p.stderr
