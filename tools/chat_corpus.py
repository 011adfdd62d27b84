"""Deterministic corpus of OpenAI chat-completions requests for differential
tests of chat-template rendering (m2cpp vs Python jinja2 / transformers).

`conversations(n, seed)` returns n requests in OpenAI wire form: tool-call
arguments as JSON strings (sometimes objects, null or ""), content sometimes
null or given as text parts, reasoning kept or dropped across turns, inline
<think> blocks, parallel calls, several tool turns, unicode and hostile
strings (quotes, newlines, CRLF, tabs, `</parameter>`, special-token text),
nested argument objects, numbers Python prints in special ways, system as
parts, no system, and a few invalid conversations the M2 template rejects.
"""

import json
import random

TEXTS = [
    "Hello!",
    "What's the weather in Paris?",
    "",
    " ",
    "\n",
    "Line one\nLine two\n\nLine four",
    "Windows\r\nline endings\r\n",
    "tabs\tinside\tand trailing spaces   ",
    "   leading spaces",
    "Ünïcödé café naïve — “quotes” ‘single’ «guillemets»",
    "中文测试：今天天气怎么样？",
    "日本語のテキストとカタカナ",
    "한국어 문장입니다.",
    "Ελληνικά και Кириллица",
    "עברית ועربية mixed RTL",
    "emoji 👍🏽 family 👨\u200d👩\u200d👧\u200d👦 flag 🇫🇷",
    "combining e\u0301 vs é, Å vs A\u030a",
    "zero\u200bwidth and \u00a0nbsp and \u3000 ideographic space",
    "control \x01\x02\x1f chars and \x7f",
    "quote ' and double \" and backslash \\ and both '\"",
    "code:\n```python\ndef f(x):\n\treturn x * 2\n```\n",
    "special tokens inline: ]~b]user [e~[ ]~!b[ <think>x</think> <minimax:tool_call>",
    "xml-ish </parameter> and <parameter name=\"x\"> inside text",
    "{{ not a template }} {% neither %} {# nor this #}",
    "digits 1234567890 3.14159 -0 1e10",
    "a" * 300,
    "mixed: naïve 中文 🎉 \"q\" 'a' \\n literal",
]

REASONING = [
    "Need to call tool.",
    "Let me think step by step.\nFirst, parse the question.\nThen answer.",
    "",
    "  padded reasoning with spaces  ",
    "\nreasoning with surrounding newlines\n",
    "思考：用户想知道天气。",
    "contains </think> inside? no: <think> tag text",
]

NAMES = ["get_weather", "search", "calc", "run_code", "send_email", "lookup_user", "翻译"]

TOOL_SCHEMAS = {
    "get_weather": {
        "name": "get_weather",
        "description": "Get weather",
        "parameters": {
            "type": "object",
            "properties": {"location": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["location"],
        },
    },
    "search": {
        "name": "search",
        "description": "Search the web for a query; returns “results”.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "The query"},
                "top_k": {"type": "integer", "minimum": 1, "maximum": 50},
                "filters": {"type": "object", "properties": {"lang": {"type": "string", "enum": ["en", "fr", "中文"]}}},
            },
            "required": ["query"],
        },
    },
    "calc": {
        "name": "calc",
        "description": "Evaluate arithmetic",
        "parameters": {"type": "object", "properties": {"expr": {"type": "string"}, "precision": {"type": "number"}}},
    },
    "run_code": {
        "name": "run_code",
        "description": "Run code in a sandbox.\nMultiline description with \"quotes\".",
        "parameters": {
            "type": "object",
            "properties": {"code": {"type": "string"}, "timeout": {"type": "number"}, "env": {"type": "object"}},
            "required": ["code"],
        },
    },
    "send_email": {
        "name": "send_email",
        "description": "",
        "parameters": {
            "type": "object",
            "properties": {
                "to": {"type": "array", "items": {"type": "string"}},
                "subject": {"type": "string"},
                "body": {"type": "string"},
                "urgent": {"type": "boolean"},
            },
        },
    },
    "lookup_user": {"name": "lookup_user", "parameters": {"type": "object", "properties": {}}},
    "翻译": {
        "name": "翻译",
        "description": "把文本翻译成目标语言",
        "parameters": {"type": "object", "properties": {"文本": {"type": "string"}, "目标": {"type": "string"}}},
    },
}

ARG_VALUES = [
    "Paris",
    "São Paulo",
    "东京",
    "",
    "multi\nline\nvalue",
    "with </parameter> inside",
    "quotes \"double\" and 'single'",
    "back\\slash and \\n escaped",
    "trailing newline\n",
    "\nleading newline",
    "emoji 🎉",
    0,
    1,
    -7,
    2**40,
    3.5,
    1.0,
    -0.0,
    1e16,
    1.5e-7,
    0.1,
    True,
    False,
    None,
    [],
    {},
    [1, "two", 3.0, None, True],
    {"nested": {"deep": [1, {"x": "y"}]}, "k": "v"},
    {"b": 1, "a": 2, "z": {"y": 1, "x": 2}},
    ["</parameter>", "a\nb"],
]


def _text(rng):
    return rng.choice(TEXTS)


def _content(rng, allow_parts=True):
    r = rng.random()
    if allow_parts and r < 0.12:
        return [{"type": "text", "text": _text(rng)} for _ in range(rng.randint(1, 3))]
    return _text(rng)


def _arguments(rng, name):
    schema = TOOL_SCHEMAS.get(name, {}).get("parameters", {}).get("properties", {})
    keys = list(schema) or ["x"]
    args = {}
    for k in rng.sample(keys, rng.randint(0, len(keys))):
        args[k] = rng.choice(ARG_VALUES)
    if rng.random() < 0.2:
        args["extra_" + str(rng.randint(0, 9))] = rng.choice(ARG_VALUES)
    return args


def _wire_arguments(rng, args):
    r = rng.random()
    if r < 0.7:
        return json.dumps(args, ensure_ascii=rng.random() < 0.5)
    if r < 0.8:
        return json.dumps(args, indent=2)
    if r < 0.95:
        return args  # some clients send an object
    return None if not args and rng.random() < 0.5 else json.dumps(args)


def _assistant(rng, call_counter, with_tools, names):
    msg = {"role": "assistant"}
    shape = rng.random()
    content = _content(rng, allow_parts=rng.random() < 0.3)
    if shape < 0.15 and isinstance(content, str):
        reasoning = rng.choice(REASONING)
        content = "<think>\n" + reasoning + "\n</think>\n\n" + content
    elif shape < 0.2 and isinstance(content, str):
        content = "<think>a</think>middle</think>\n\nend " + content
    msg["content"] = content
    if rng.random() < 0.45:
        msg["reasoning_content"] = rng.choice(REASONING)
    elif rng.random() < 0.05:
        msg["reasoning"] = rng.choice(REASONING)
    elif rng.random() < 0.05:
        msg["reasoning_content"] = None
    calls = []
    if with_tools and rng.random() < 0.6:
        for _ in range(rng.choice([1, 1, 1, 2, 3, 4])):
            name = rng.choice(names)
            args = _arguments(rng, name)
            call_counter[0] += 1
            calls.append(
                {
                    "id": f"call_{call_counter[0]}",
                    "type": "function",
                    "function": {"name": name, "arguments": _wire_arguments(rng, args)},
                }
            )
        msg["tool_calls"] = calls
        r = rng.random()
        if r < 0.5:
            msg["content"] = None
        elif r < 0.65:
            msg["content"] = ""
        elif r < 0.7:
            del msg["content"]  # some clients omit it
    elif rng.random() < 0.05:
        msg["tool_calls"] = None
    return msg, calls


def _tool_results(rng, calls):
    out = []
    for call in calls:
        r = rng.random()
        if r < 0.7:
            content = rng.choice(['{"temp": 20}', "ok", "", "result with\nnewlines", "中文结果", '{"list": [1, 2]}'])
        elif r < 0.9:
            content = [{"type": "text", "text": _text(rng)} for _ in range(rng.randint(1, 2))]
        else:
            content = None
        out.append({"role": "tool", "tool_call_id": call["id"], "content": content})
    return out


def conversation(rng, index):
    names = rng.sample(list(TOOL_SCHEMAS), rng.randint(1, 4))
    with_tools = rng.random() < 0.6
    req = {"model": "m2", "messages": []}
    msgs = req["messages"]
    r = rng.random()
    if r < 0.45:
        sysmsg = {"role": "system", "content": _content(rng)}
        if rng.random() < 0.1:
            sysmsg["current_date"] = "2025-01-01"
        if rng.random() < 0.1:
            sysmsg["current_location"] = "Paris, France"
        msgs.append(sysmsg)
    elif r < 0.5:
        msgs.append({"role": "system", "content": ""})
    call_counter = [0]
    for _ in range(rng.randint(1, 4)):
        msgs.append({"role": "user", "content": _content(rng)})
        for _ in range(rng.randint(0, 3)):
            msg, calls = _assistant(rng, call_counter, with_tools, names)
            msgs.append(msg)
            if calls:
                msgs.extend(_tool_results(rng, calls))
            else:
                break
        if rng.random() < 0.05:
            msgs.append({"role": "system", "content": "late system message"})
    if rng.random() < 0.03:
        # Invalid for the M2 template: a tool result with no tool call before it.
        msgs.append({"role": "tool", "tool_call_id": "x", "content": "orphan"})
    if with_tools:
        req["tools"] = [{"type": "function", "function": TOOL_SCHEMAS[n]} for n in names]
    elif rng.random() < 0.1:
        req["tools"] = []
    if rng.random() < 0.1:
        req["add_generation_prompt"] = False
    return req


def conversations(n=400, seed=20251130):
    rng = random.Random(seed)
    return [conversation(rng, i) for i in range(n)]


if __name__ == "__main__":
    print(json.dumps(conversations(3), indent=1, ensure_ascii=False))
