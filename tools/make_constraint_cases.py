#!/usr/bin/env python3
"""Ground truth for the constrained-decoding matcher (tests/engine/constraint_test.cpp).

Each case is a grammar source (a JSON Schema, a regex or an EBNF choice) and
candidate outputs; each candidate's verdict comes from an independent
reference: Python's `jsonschema` (Draft 2020-12) for schemas, `re.fullmatch`
for regexes, list membership for choices. The C++ test feeds each candidate's
tokens through the matcher and requires: accepted to the end and complete
(a stop token allowed) exactly when the reference says valid.

JSON candidates keep the schema's property order and at most 16 blank
characters in a row: the grammar generates properties in schema order
(xgrammar's any_order off) and bounds whitespace runs, so a document in
another order is valid for jsonschema but is never generated; such
documents are not candidates. With `additionalProperties` unset the grammar
still generates no unnamed property (strict mode), so schemas that allow
extra properties have no candidates with them.

Usage: python3 tools/make_constraint_cases.py > tests/data/constraint/cases.json
"""
import importlib.metadata
import json
import re
import sys

import jsonschema

SCHEMAS = [
    (
        {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
         "required": ["name", "age"], "additionalProperties": False},
        ['{"name": "Ann", "age": 31}', '{"name":"Bo","age":0}', '{"name": "A\\"b", "age": 7}',
         '{"name": "Ann"}', '{"name": "Ann", "age": -1}', '{"name": "Ann", "age": 3.5}', '{"name": 5, "age": 1}',
         '{"name": "Ann", "age": 31, "x": 1}', '[1]', '{"name": "Ann", "age": 31} x',
         '{\n  "name": "Ann",\n  "age": 31\n}'],
    ),
    (
        {"type": "object", "properties": {"kind": {"enum": ["a", "b"]}, "ok": {"type": "boolean"},
                                          "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2}},
         "required": ["kind"], "additionalProperties": False},
        ['{"kind": "a"}', '{"kind": "b", "ok": true}', '{"kind": "a", "tags": ["x", "y"]}',
         '{"kind": "c"}', '{"kind": "a", "tags": ["x", "y", "z"]}', '{"ok": true}', '{"kind": "a", "ok": 1}',
         '{"kind": "b", "ok": false, "tags": []}'],
    ),
    (
        {"type": "array", "items": {"type": "number"}, "minItems": 1},
        ['[1]', '[1.5, -2e3, 0]', '[]', '["1"]', '[1,]', '[01]'],
    ),
    (
        {"type": "string", "pattern": "^[a-z]{2,4}$"},
        ['"ab"', '"abcd"', '"a"', '"abcde"', '"aB"', 'ab'],
    ),
]

REGEXES = [
    (r"[0-9]{3}-[0-9]{4}", ["555-1234", "000-0000", "55-1234", "555-12345", "abc-defg", ""]),
    (r"(yes|no)( please)?", ["yes", "no please", "yes please please", "maybe", "no "]),
    (r"[A-Z][a-z]+ [A-Z][a-z]+", ["Ada Lovelace", "ada Lovelace", "Ada", "Émile Zola", "Ada  Lovelace"]),
]

CHOICES = [
    (["red", "green", "dark \"blue\""], ["red", "green", 'dark "blue"', "blue", "re", "redgreen"]),
]


def ebnf_literal(s: str) -> str:
    # The same escaping as server/structured_output.cpp's ebnf_literal.
    out = '"'
    for ch in s:
        if ch in '"\\':
            out += "\\" + ch
        elif ch == "\n":
            out += "\\n"
        else:
            out += ch
    return out + '"'


def main() -> None:
    cases = []
    for schema, candidates in SCHEMAS:
        validator = jsonschema.Draft202012Validator(schema)
        items = []
        for c in candidates:
            try:
                valid = validator.is_valid(json.loads(c))
            except json.JSONDecodeError:
                valid = False
            items.append({"text": c, "valid": valid})
        cases.append({"kind": "json_schema", "source": json.dumps(schema), "candidates": items})
    for pattern, candidates in REGEXES:
        items = [{"text": c, "valid": re.fullmatch(pattern, c) is not None} for c in candidates]
        cases.append({"kind": "regex", "source": pattern, "candidates": items})
    for choices, candidates in CHOICES:
        grammar = "root ::= " + " | ".join(ebnf_literal(c) for c in choices)
        items = [{"text": c, "valid": c in choices} for c in candidates]
        cases.append({"kind": "grammar", "source": grammar, "candidates": items})
    version = importlib.metadata.version("jsonschema")
    json.dump({"generator": "tools/make_constraint_cases.py", "jsonschema": version, "cases": cases}, sys.stdout,
              indent=1, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
