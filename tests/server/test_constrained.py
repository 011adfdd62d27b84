"""Constrained decoding through the official SDKs against a live server with the
random tiny model: whatever the model samples, the output must follow the
request's grammar, checked by independent references (`jsonschema` for JSON
Schema, `re.fullmatch` for regexes and grammars with a regex twin).

Schemas keep every value bounded (enums, integer ranges, short strings) so
that a random model ends its document well within max_tokens; the reasoning
is turned off (reasoning_effort none / thinking disabled) except where the
test is about the constraint starting after it."""
import json
import re

import anthropic
import httpx
import jsonschema
import openai
import pytest

from live_server import MODEL_NAME

SEEDS = range(6)
NO_THINKING = {"reasoning_effort": "none"}

PLAN = {
    "type": "object",
    "properties": {
        "mode": {"enum": ["walk", "bike", "train"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 9},
        "rain": {"type": "boolean"},
        "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
    },
    "required": ["mode", "days", "rain", "code"],
    "additionalProperties": False,
}

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 6}, "days": {"type": "integer", "minimum": 1,
                                                                              "maximum": 7},
                           "units": {"enum": ["metric", "imperial"]}},
            "required": ["city", "days", "units"],
        },
    },
}
ALARM = {
    "type": "function",
    "function": {
        "name": "set_alarm",
        "parameters": {"type": "object", "properties": {"hour": {"type": "integer", "minimum": 0, "maximum": 23},
                                                        "loud": {"type": "boolean"}},
                       "required": ["hour", "loud"]},
    },
}
SCHEMAS = {"get_weather": WEATHER["function"]["parameters"], "set_alarm": ALARM["function"]["parameters"]}


def user(text):
    return [{"role": "user", "content": text}]


def chat(client, **kw):
    body = dict(model=MODEL_NAME, messages=user("Plan a trip"), max_tokens=300, temperature=1.0)
    body.update(kw)
    return client.chat.completions.create(**body)


# ---- JSON Schema ---------------------------------------------------------------------------------------------

def test_response_format_json_schema_validates(openai_client):
    rf = {"type": "json_schema", "json_schema": {"name": "plan", "schema": PLAN, "strict": True}}
    for seed in SEEDS:
        r = chat(openai_client, response_format=rf, seed=seed, extra_body=NO_THINKING)
        c = r.choices[0]
        assert c.finish_reason == "stop", (seed, c.message.content)
        jsonschema.validate(json.loads(c.message.content), PLAN)


def test_response_format_json_schema_streamed(openai_client):
    rf = {"type": "json_schema", "json_schema": {"name": "plan", "schema": PLAN}}
    stream = chat(openai_client, response_format=rf, seed=11, stream=True, extra_body=NO_THINKING)
    text = "".join(ch.choices[0].delta.content or "" for ch in stream if ch.choices)
    jsonschema.validate(json.loads(text), PLAN)


def test_sdk_parse_with_pydantic(openai_client):
    from typing import Literal

    from pydantic import BaseModel, conint

    class Plan(BaseModel):
        mode: Literal["walk", "bike"]
        days: conint(ge=1, le=5)
        rain: bool

    for seed in range(3):
        r = openai_client.chat.completions.parse(model=MODEL_NAME, messages=user("Plan"), response_format=Plan,
                                                 max_tokens=200, seed=seed, extra_body=NO_THINKING)
        plan = r.choices[0].message.parsed
        assert isinstance(plan, Plan) and 1 <= plan.days <= 5


def test_json_object_gives_an_object(openai_client):
    # Any object: the random model's strings may run long, so only finished documents are checked; most seeds finish.
    finished = 0
    for seed in SEEDS:
        r = chat(openai_client, response_format={"type": "json_object"}, seed=seed, max_tokens=400,
                 extra_body=NO_THINKING)
        c = r.choices[0]
        if c.finish_reason == "stop":
            assert isinstance(json.loads(c.message.content), dict)
            finished += 1
        else:
            assert c.message.content.lstrip().startswith("{")
    assert finished >= 1


def test_constraint_starts_after_the_reasoning(openai_client):
    # The budget closes the reasoning after 6 free tokens; the answer after it is the JSON.
    rf = {"type": "json_schema", "json_schema": {"name": "plan", "schema": PLAN}}
    for seed in range(3):
        r = chat(openai_client, response_format=rf, seed=seed, extra_body={"thinking_token_budget": 6})
        m = r.choices[0].message
        assert r.usage.completion_tokens_details.reasoning_tokens == 6
        jsonschema.validate(json.loads(m.content), PLAN)


def test_vllm_guided_json_on_completions(openai_client):
    for field in ({"guided_json": PLAN}, {"structured_outputs": {"json": PLAN}}):
        r = openai_client.completions.create(model=MODEL_NAME, prompt="Plan:", max_tokens=200, seed=5,
                                             temperature=1.0, extra_body=field)
        jsonschema.validate(json.loads(r.choices[0].text), PLAN)


# ---- regex, choice, grammar ----------------------------------------------------------------------------------

def test_regex_outputs_fullmatch(openai_client):
    pattern = r"[a-c]{2,5}-[0-9]{2}( ok)?"
    for seed in SEEDS:
        r = chat(openai_client, seed=seed, extra_body={"structured_outputs": {"regex": pattern}, **NO_THINKING})
        assert re.fullmatch(pattern, r.choices[0].message.content), r.choices[0].message.content
        r = openai_client.completions.create(model=MODEL_NAME, prompt="x", max_tokens=50, seed=seed,
                                             extra_body={"guided_regex": pattern})
        assert re.fullmatch(pattern, r.choices[0].text), r.choices[0].text


def test_choice(openai_client):
    options = ["alpha", "beta gamma", 'say "hi"']
    seen = set()
    for seed in SEEDS:
        r = chat(openai_client, seed=seed, extra_body={"guided_choice": options, **NO_THINKING})
        assert r.choices[0].message.content in options
        seen.add(r.choices[0].message.content)
    assert len(seen) >= 2


def test_gbnf_grammar(openai_client):
    # llama.cpp's `grammar` (GBNF) and vLLM's structured_outputs.grammar; the regex is the same language.
    gbnf = 'root ::= item ("," item){0,3}\nitem ::= [0-9] | "x" [a-z]'
    twin = r"([0-9]|x[a-z])(,([0-9]|x[a-z])){0,3}"
    for seed in SEEDS:
        body = {"grammar": gbnf} if seed % 2 else {"structured_outputs": {"grammar": gbnf}}
        r = chat(openai_client, seed=seed, extra_body={**body, **NO_THINKING})
        assert re.fullmatch(twin, r.choices[0].message.content), r.choices[0].message.content


# ---- tool calls ------------------------------------------------------------------------------------------------

def check_call(call):
    args = json.loads(call.function.arguments)
    jsonschema.validate(args, SCHEMAS[call.function.name])
    return args


def test_forced_named_call_arguments_validate(openai_client):
    for seed in SEEDS:
        r = chat(openai_client, tools=[WEATHER, ALARM], seed=seed,
                 tool_choice={"type": "function", "function": {"name": "set_alarm"}}, extra_body=NO_THINKING)
        calls = r.choices[0].message.tool_calls
        assert calls and all(c.function.name == "set_alarm" for c in calls)
        for c in calls:
            check_call(c)


def test_forced_required_call_after_reasoning(openai_client):
    names = set()
    for seed in SEEDS:
        r = chat(openai_client, tools=[WEATHER, ALARM], tool_choice="required", seed=seed,
                 parallel_tool_calls=False, extra_body={"thinking_token_budget": 4})
        calls = r.choices[0].message.tool_calls
        assert calls and len(calls) == 1, r.choices[0].message
        check_call(calls[0])
        names.add(calls[0].function.name)
    assert names == {"get_weather", "set_alarm"}


def test_forced_call_streamed(openai_client):
    stream = chat(openai_client, tools=[WEATHER], tool_choice="required", seed=3, stream=True, extra_body=NO_THINKING)
    args = {}
    for ch in stream:
        for d in (ch.choices[0].delta.tool_calls or []) if ch.choices else []:
            args[d.index] = args.get(d.index, "") + (d.function.arguments or "")
    assert args
    for a in args.values():
        jsonschema.validate(json.loads(a), SCHEMAS["get_weather"])


def test_strict_tool_enforced_under_auto(server, openai_client):
    # logit_bias makes the random model open a tool-call block at once; the strict tool's
    # arguments must then follow its schema.
    call_open = httpx.post(server.url + "/tokenize", json={"prompt": "<minimax:tool_call>",
                                                           "add_special_tokens": False}).json()["tokens"]
    assert len(call_open) == 1
    strict = {"type": "function", "function": {**ALARM["function"], "strict": True}}
    for seed in SEEDS:
        r = chat(openai_client, tools=[strict], tool_choice="auto", seed=seed, parallel_tool_calls=False,
                 logit_bias={str(call_open[0]): 100}, extra_body=NO_THINKING)
        calls = r.choices[0].message.tool_calls
        assert calls, r.choices[0].message
        check_call(calls[0])


def test_anthropic_forced_tool_input_validates(anthropic_client):
    tools = [{"name": f["function"]["name"], "input_schema": f["function"]["parameters"]} for f in (WEATHER, ALARM)]
    for seed, choice in enumerate([{"type": "tool", "name": "get_weather"}, {"type": "any"}] * 2):
        m = anthropic_client.messages.create(model=MODEL_NAME, max_tokens=300, messages=user("weather?"),
                                             tools=tools, tool_choice=choice, thinking={"type": "disabled"},
                                             extra_body={"seed": seed})
        uses = [b for b in m.content if b.type == "tool_use"]
        assert uses and m.stop_reason == "tool_use"
        for u in uses:
            jsonschema.validate(u.input, SCHEMAS[u.name])
            if choice["type"] == "tool":
                assert u.name == "get_weather"


def test_anthropic_output_format_validates(anthropic_client):
    for seed in range(3):
        m = anthropic_client.messages.create(model=MODEL_NAME, max_tokens=300, messages=user("plan"),
                                             thinking={"type": "disabled"},
                                             extra_body={"seed": seed, "temperature": 1.0,
                                                         "output_config": {"format": {"type": "json_schema",
                                                                                      "schema": PLAN}}})
        text = "".join(b.text for b in m.content if b.type == "text")
        assert m.stop_reason == "end_turn"
        jsonschema.validate(json.loads(text), PLAN)


# ---- refusals ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("extra,field", [
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": 5}}}},
     "response_format.json_schema.schema"),
    ({"response_format": {"type": "yaml"}}, "response_format.type"),
    ({"guided_regex": "(ab"}, "guided_regex"),
    ({"grammar": "root ::= undefined_rule"}, "grammar"),
    ({"guided_choice": []}, "guided_choice"),
    ({"guided_json": PLAN, "guided_regex": "a"}, "guided_regex"),
    ({"structured_outputs": {"regex": "a", "choice": ["b"]}}, "structured_outputs"),
    ({"structured_outputs": {"whitespace_pattern": " "}}, "structured_outputs.whitespace_pattern"),
    ({"response_format": {"type": "json_object"}, "tools": [WEATHER], "tool_choice": "required"}, "response_format"),
    ({"tools": [{"type": "function", "function": {**ALARM["function"], "strict": "yes"}}]},
     "tools[0].function.strict"),
])
def test_bad_constraints_are_400_naming_the_field(openai_client, extra, field):
    with pytest.raises(openai.BadRequestError) as e:
        chat(openai_client, extra_body=extra)
    assert field in str(e.value)


def test_anthropic_strict_must_be_boolean(anthropic_client):
    with pytest.raises(anthropic.BadRequestError) as e:
        anthropic_client.messages.create(model=MODEL_NAME, max_tokens=10, messages=user("x"),
                                         tools=[{"name": "t", "input_schema": {"type": "object"}, "strict": 1}])
    assert "tools[0].strict" in str(e.value)
