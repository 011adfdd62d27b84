#!/usr/bin/env python3
"""Reference for `m2cpp parse`: the OpenAI assistant message for a raw
MiniMax-M2 output, written independently of the C++ code.

Value typing follows vLLM's MinimaxM2ToolParser._convert_param_value_with_types
(spec §6.2) and uses Python's own int(), float(), str.strip(), str.lower(),
json.loads and json.dumps(ensure_ascii=False), which are what vLLM runs; the
places where m2cpp deliberately differs from vLLM are marked DEVIATION and
listed in src/text/tool_schema.h and src/text/tool_call_parser.h. The block
structure (which `</parameter>` closes a value, what is content) follows
m2cpp's rules, expressed here with regular expressions.

Usage: m2_parse_reference.py REQUEST.json RAW.txt [split|append-think]
prints the message as JSON (tool-call ids are "call_" + 24 hex, random).
"""

import json
import math
import re
import sys
import uuid

BLOCK_OPEN = "<minimax:tool_call>"
BLOCK_CLOSE = "</minimax:tool_call>"
INVOKE_OPEN = "<invoke name="
INVOKE_CLOSE = "</invoke>"
PARAM_OPEN = "<parameter name="
PARAM_CLOSE = "</parameter>"
TAG_SPACE = " \t\n\r"

# A name runs to the first '>' within 256 characters, without '\n' or '<'.
NAME_RE = re.compile(r"([^<>\n]{0,256})>")
NAME_UNFINISHED_RE = re.compile(r"[^<>\n]{0,256}\Z")
# A value ends at the first `</parameter>` followed (after at most 64 spaces)
# by another parameter or the end of the invoke.
VALUE_RE = re.compile(r"(.*?)</parameter>(?=[ \t\n\r]{0,64}(?:<parameter name=|</invoke>))", re.DOTALL)

INT_RE = re.compile(r"[+-]?[0-9](?:_?[0-9])*")  # DEVIATION: ASCII digits only
FLOAT_RE = re.compile(r"[+-]?(?:[0-9](?:_?[0-9])*(?:\.(?:[0-9](?:_?[0-9])*)?)?|\.[0-9](?:_?[0-9])*)"
                      r"(?:[eE][+-]?[0-9](?:_?[0-9])*)?")
MAX_JSON_DEPTH = 256
MAX_SCHEMA_DEPTH = 64


def schema_types(schema, depth=0):
    """vLLM's _extract_types_from_schema (with a recursion bound)."""
    if not isinstance(schema, dict) or depth > MAX_SCHEMA_DEPTH:
        return ["string"]
    types = set()
    t = schema.get("type")
    if isinstance(t, str):
        types.add(t)
    elif isinstance(t, list):
        types.update(x for x in t if isinstance(x, str))
    enum = schema.get("enum")
    if isinstance(enum, list):
        for v in enum:
            if v is None:
                types.add("null")
            elif isinstance(v, bool):
                types.add("boolean")
            elif isinstance(v, int):
                types.add("integer")
            elif isinstance(v, float):
                types.add("number")
            elif isinstance(v, str):
                types.add("string")
            elif isinstance(v, list):
                types.add("array")
            elif isinstance(v, dict):
                types.add("object")
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(schema.get(key), list):
            for choice in schema[key]:
                types.update(schema_types(choice, depth + 1))
    return list(types) if types else ["string"]


def tool_param_types(tools):
    """{tool name: {param: [types]}}, the first tool of a name winning."""
    out = {}
    for tool in tools or []:
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or fn["name"] in out:
            continue
        props = {}
        params = fn.get("parameters")
        if isinstance(params, dict) and isinstance(params.get("properties"), dict):
            props = {k: schema_types(v) for k, v in params["properties"].items()}
        out[fn["name"]] = props
    return out


def json_depth(text):
    depth = best = 0
    in_string = escaped = False
    for c in text:
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "[{":
            depth += 1
            best = max(best, depth)
        elif c in "]}":
            depth -= 1
    return best


def json_loads_limited(text):
    """json.loads, minus what m2cpp does not accept (DEVIATION): NaN and
    Infinity, floats that overflow, nesting deeper than 256; integers beyond
    64 bits become floats."""
    def parse_constant(name):
        raise ValueError(name)

    def parse_float(s):
        v = float(s)
        if math.isinf(v):
            raise ValueError(s)
        return v

    def parse_int(s):
        v = int(s)
        return v if -2**63 <= v < 2**64 else parse_float(s)

    if json_depth(text) > MAX_JSON_DEPTH:
        raise ValueError("too deep")
    return json.loads(text, parse_constant=parse_constant, parse_float=parse_float, parse_int=parse_int)


def convert(value, types):
    t = value.strip()
    if t.lower() in ("null", "none", "nil"):
        return None
    types = [x.lower() for x in types]
    for kind in ["integer", "int", "number", "float", "boolean", "bool", "object", "array", "string", "str", "text"]:
        if kind not in types:
            continue
        if kind in ("string", "str", "text"):
            return value  # DEVIATION: the exact text, not strip()ped
        if kind in ("integer", "int"):
            if INT_RE.fullmatch(t):
                v = int(t)
                if -2**63 <= v < 2**64:  # DEVIATION: 64-bit integers
                    return v
        elif kind in ("number", "float"):
            if FLOAT_RE.fullmatch(t):  # DEVIATION: no inf/nan
                v = float(t)
                if not math.isinf(v):
                    # DEVIATION: an integral float beyond int64 stays a float.
                    return int(v) if v == int(v) and abs(v) < 2**63 else v
        elif kind in ("boolean", "bool"):
            if t.lower() in ("true", "1", "yes", "on"):
                return True
            if t.lower() in ("false", "0", "no", "off"):
                return False
        else:
            try:
                return json_loads_limited(t)
            except ValueError:
                pass
    try:
        return json_loads_limited(t)
    except ValueError:
        return value


def parse_name(text, pos):
    """('ok', name, end) | ('truncated',) | ('malformed',) for text[pos:]."""
    m = NAME_RE.match(text, pos)
    if not m:
        return ("truncated",) if NAME_UNFINISHED_RE.match(text, pos) else ("malformed",)
    name = m.group(1).strip()
    if len(name) >= 2 and name[0] == name[-1] and name[0] in "\"'":
        name = name[1:-1]
    return ("ok", name, m.end()) if name else ("malformed",)


def parse_invoke(text, pos, types):
    """('complete', name, args, end) | ('truncated', [name]) | ('malformed',); a truncated invoke
    carries its name once the name is complete."""
    r = parse_name(text, pos + len(INVOKE_OPEN))
    if r[0] != "ok":
        return r
    name, body = r[1], r[2]
    args = {}
    while True:
        p, c = text.find(PARAM_OPEN, body), text.find(INVOKE_CLOSE, body)
        if c != -1 and (p == -1 or c < p):
            return ("complete", name, args, c + len(INVOKE_CLOSE))
        if p == -1:
            return ("truncated", name)
        r = parse_name(text, p + len(PARAM_OPEN))
        if r[0] == "truncated":
            return ("truncated", name)
        if r[0] == "malformed":
            body = p + len(PARAM_OPEN)
            continue
        m = VALUE_RE.match(text, r[2])
        if not m:
            return ("truncated", name)
        value = m.group(1)
        if value.startswith("\n"):
            value = value[1:]
        if value.endswith("\n"):
            value = value[:-1]
        args[r[1]] = convert(value, types.get(name, {}).get(r[1], ["string"]))
        body = m.end()


def parse_tool_calls(text, types, allowed=None):
    """(content, [(name, arguments JSON text)]). With `allowed` (a set of names), an invoke of
    another name is dropped: not a call, not content (its block is still a tool-call block), and
    one cut off by the end of the text drops everything after it."""
    content, calls, pos, after_block = [], [], 0, False
    while pos < len(text):
        start = text.find(BLOCK_OPEN, pos)
        if start == -1:
            tail = text[pos:]
            if not (after_block and tail.strip(TAG_SPACE) == ""):
                content.append(tail)
            break
        before, k, found, how = text[pos:start], start + len(BLOCK_OPEN), [], "junk"
        while True:
            while k < len(text) and text[k] in TAG_SPACE:
                k += 1
            if text.startswith(INVOKE_OPEN, k):
                r = parse_invoke(text, k, types)
                if r[0] == "complete":
                    found.append((r[1], json.dumps(r[2], ensure_ascii=False)))
                    k = r[3]
                    continue
                if r[0] == "truncated" and len(r) > 1 and allowed is not None and r[1] not in allowed:
                    found.append((r[1], None))
                    k, how = len(text), "dropped"
                    break
                how = r[0]
            elif text.startswith(BLOCK_CLOSE, k):
                k, how = k + len(BLOCK_CLOSE), "closed"
            break
        if not found:  # the block is text
            content.append(before)
            if how == "truncated":
                content.append(text[start:])
                break
            end = k if how == "closed" else start + len(BLOCK_OPEN)
            content.append(text[start:end])
            pos, after_block = end, False
            continue
        content.append(before.rstrip(TAG_SPACE))
        calls.extend(c for c in found if allowed is None or c[0] in allowed)
        if how == "truncated":
            content.append(text[k:])
            break
        pos, after_block = k, how == "closed"
    return "".join(content), calls


def parse(raw_bytes, request, mode="split", starts_in_reasoning=True):
    text = raw_bytes.decode("utf-8", errors="replace")
    tools = request.get("tools")
    parse_tools = bool(tools)
    allowed = set() if request.get("tool_choice") == "none" else None  # none: every call dropped
    reasoning, visible, rest = None, "", text
    if starts_in_reasoning:
        if text.startswith("<think>"):
            text = text[len("<think>"):]
        thought, closed, after = text.partition("</think>")
        rest = after if closed else ""
        if mode == "split":
            reasoning = thought.strip("\n") or None
            rest = rest.lstrip("\n")
        else:
            visible = "<think>" + thought + closed
    calls = []
    if parse_tools:
        rest, calls = parse_tool_calls(rest, tool_param_types(tools), allowed)
    message = {"role": "assistant", "content": (visible + rest) or None}
    if mode == "split":
        message["reasoning_content"] = reasoning
    if calls:
        message["tool_calls"] = [
            {"id": "call_" + uuid.uuid4().hex[:24], "type": "function", "function": {"name": n, "arguments": a}}
            for n, a in calls]
    return message


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        request = json.load(f)
    with open(sys.argv[2], "rb") as f:
        raw = f.read()
    mode = sys.argv[3] if len(sys.argv) > 3 else "split"
    print(json.dumps(parse(raw, request, mode), ensure_ascii=False, indent=2))


if __name__ == "__main__":
    main()
