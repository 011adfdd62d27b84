"""Tool calls and reasoning end to end through both SDKs. A random model
never writes them, so the server runs with `--replay`: the engine emits the
tokens of fixed raw M2 outputs (chosen by a marker in the prompt) through
the real detokenizer, parsers and API layers."""
import json

import anthropic
import httpx
import openai
import pytest

from live_server import REPLAY_PARALLEL_CALLS, REPLAY_WEATHER_CALL, MODEL_NAME, replay_server

WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Get weather",
    "parameters": {"type": "object", "properties": {"location": {"type": "string"}, "days": {"type": "integer"}},
                   "required": ["location"]}}}
WRITE_TOOL = {"type": "function", "function": {
    "name": "write_file", "description": "Write a file",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}}}
ANTHROPIC_TOOLS = [{"name": t["function"]["name"], "description": t["function"]["description"],
                    "input_schema": t["function"]["parameters"]} for t in (WEATHER_TOOL, WRITE_TOOL)]

EDIT_VALUE = "  <x>1</parameter> y\n  indented"
OUTPUTS = [
    # First: found only if the assistant's earlier reasoning was rendered into the prompt.
    {"match": "SECRET_THOUGHT_123", "output": "The tool answered.</think>\n\nIt is sunny in Paris.[e~["},
    REPLAY_WEATHER_CALL,
    REPLAY_PARALLEL_CALLS,
    {"match": "TOOLTEST_EDIT", "output":
        "Writing the file.</think>\n\n<minimax:tool_call>\n<invoke name=\"write_file\">\n"
        "<parameter name=\"path\">a.xml</parameter>\n<parameter name=\"content\">" + EDIT_VALUE + "</parameter>\n"
        "</invoke>\n</minimax:tool_call>[e~["},
    {"match": "REASONTEST", "output": "Thinking about it.\nStep two.</think>\n\nThe answer is 42.[e~["},
    # tool_choice: the server forces the opening after </think>; the replay goes on from there.
    {"match": "FORCE_NAMED", "output":
        "I must use the tool.</think>\n<parameter name=\"location\">Rome</parameter>\n</invoke>\n"
        "</minimax:tool_call>[e~["},
    {"match": "FORCE_REQUIRED", "output":
        "A tool is required.</think><invoke name=\"get_weather\">\n<parameter name=\"location\">Oslo</parameter>\n"
        "</invoke>\n</minimax:tool_call>[e~["},
    {"match": "STOPTEST", "output": "Plan.</think>\n\nalpha beta STOPHERE gamma[e~["},
    # A signed thinking block to send back: its reasoning is the marker of the first entry.
    {"match": "GIVE_SECRET", "output":
        "SECRET_THOUGHT_123</think>\n\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n"
        "<parameter name=\"location\">Paris</parameter>\n</invoke>\n</minimax:tool_call>[e~["},
    # Prefills: the replay is what the model writes after the continued text.
    {"match": "PREFILL_ANSWER", "output": " 42.[e~["},
    {"match": "PREFILL_THINKING", "output": " then two.</think>\n\nDone.[e~["},
]


@pytest.fixture(scope="module")
def server():
    s = replay_server(OUTPUTS)
    yield s
    assert s.stop() == 0


@pytest.fixture(scope="module")
def append_think_server():
    s = replay_server(OUTPUTS, "--reasoning", "append-think")
    yield s
    assert s.stop() == 0


def user(text):
    return [{"role": "user", "content": text}]


def collect_openai_stream(stream):
    reasoning, content, finish = "", "", None
    calls = {}
    for chunk in stream:
        for ch in chunk.choices:
            d = ch.delta
            reasoning += (d.model_extra or {}).get("reasoning_content") or ""
            content += d.content or ""
            for tc in d.tool_calls or []:
                entry = calls.setdefault(tc.index, {"id": None, "name": None, "arguments": ""})
                if tc.id:
                    entry["id"] = tc.id
                if tc.function and tc.function.name:
                    entry["name"] = tc.function.name
                if tc.function and tc.function.arguments:
                    entry["arguments"] += tc.function.arguments
            finish = ch.finish_reason or finish
    return reasoning, content, [calls[i] for i in sorted(calls)], finish


# ---- OpenAI ------------------------------------------------------------------------------------------------

def test_openai_tool_call(openai_client):
    r = openai_client.chat.completions.create(model=MODEL_NAME, messages=user("TOOLTEST_WEATHER in Paris?"),
                                              tools=[WEATHER_TOOL, WRITE_TOOL], max_tokens=200)
    c = r.choices[0]
    assert c.finish_reason == "tool_calls"
    assert c.message.model_extra["reasoning_content"] == "The user wants the weather. I will call the tool."
    assert c.message.content is None
    (call,) = c.message.tool_calls
    assert call.id.startswith("call_") and call.type == "function"
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"location": "Paris", "days": 2}


def test_openai_tool_call_streaming(openai_client):
    stream = openai_client.chat.completions.create(model=MODEL_NAME, messages=user("TOOLTEST_WEATHER in Paris?"),
                                                   tools=[WEATHER_TOOL], max_tokens=200, stream=True)
    reasoning, content, calls, finish = collect_openai_stream(stream)
    assert finish == "tool_calls"
    assert reasoning == "The user wants the weather. I will call the tool."
    assert content == ""
    assert len(calls) == 1 and calls[0]["name"] == "get_weather" and calls[0]["id"].startswith("call_")
    assert json.loads(calls[0]["arguments"]) == {"location": "Paris", "days": 2}


def test_openai_parallel_calls_both_modes(openai_client):
    kw = dict(model=MODEL_NAME, messages=user("TOOLTEST_PARALLEL"), tools=[WEATHER_TOOL], max_tokens=300)
    whole = openai_client.chat.completions.create(**kw).choices[0]
    assert whole.message.content == "Checking both cities."
    args = [json.loads(t.function.arguments) for t in whole.message.tool_calls]
    assert args == [{"location": "Paris"}, {"location": "Tokyo", "days": 3}]
    reasoning, content, calls, finish = collect_openai_stream(openai_client.chat.completions.create(**kw, stream=True))
    assert finish == "tool_calls" and content == "Checking both cities."
    assert [json.loads(c["arguments"]) for c in calls] == args
    assert len({c["id"] for c in calls}) == 2


def test_openai_parameter_close_tag_inside_value(openai_client):
    kw = dict(model=MODEL_NAME, messages=user("TOOLTEST_EDIT"), tools=[WRITE_TOOL], max_tokens=300)
    whole = openai_client.chat.completions.create(**kw).choices[0]
    assert json.loads(whole.message.tool_calls[0].function.arguments) == {"path": "a.xml", "content": EDIT_VALUE}
    _, _, calls, _ = collect_openai_stream(openai_client.chat.completions.create(**kw, stream=True))
    assert json.loads(calls[0]["arguments"]) == {"path": "a.xml", "content": EDIT_VALUE}


def test_openai_tool_choice_none_drops_a_call_written_anyway(openai_client):
    kw = dict(model=MODEL_NAME, messages=user("TOOLTEST_PARALLEL"), tools=[WEATHER_TOOL], tool_choice="none",
              max_tokens=300)
    c = openai_client.chat.completions.create(**kw).choices[0]
    assert c.finish_reason == "stop" and not c.message.tool_calls
    assert c.message.content == "Checking both cities."
    _, content, calls, finish = collect_openai_stream(openai_client.chat.completions.create(**kw, stream=True))
    assert finish == "stop" and calls == [] and content == "Checking both cities."


def test_openai_tool_choice_none_renders_no_tools(openai_client):
    plain = openai_client.chat.completions.create(model=MODEL_NAME, messages=user("hello"), max_tokens=1)
    none = openai_client.chat.completions.create(model=MODEL_NAME, messages=user("hello"), tools=[WEATHER_TOOL],
                                                 tool_choice="none", max_tokens=1)
    auto = openai_client.chat.completions.create(model=MODEL_NAME, messages=user("hello"), tools=[WEATHER_TOOL],
                                                 max_tokens=1)
    assert none.usage.prompt_tokens == plain.usage.prompt_tokens < auto.usage.prompt_tokens


def test_openai_parallel_tool_calls_false_stops_after_the_first_call(openai_client):
    kw = dict(model=MODEL_NAME, messages=user("TOOLTEST_PARALLEL"), tools=[WEATHER_TOOL], max_tokens=300)
    both = openai_client.chat.completions.create(**kw)
    one = openai_client.chat.completions.create(**kw, parallel_tool_calls=False)
    c = one.choices[0]
    assert c.finish_reason == "tool_calls"
    assert [json.loads(t.function.arguments) for t in c.message.tool_calls] == [{"location": "Paris"}]
    assert c.message.content == "Checking both cities."
    # Generation ended at the first `</invoke>`: fewer tokens, not a truncated reply.
    assert one.usage.completion_tokens < both.usage.completion_tokens - 10
    _, content, calls, finish = collect_openai_stream(
        openai_client.chat.completions.create(**kw, parallel_tool_calls=False, stream=True))
    assert finish == "tool_calls" and content == "Checking both cities."
    assert [json.loads(x["arguments"]) for x in calls] == [{"location": "Paris"}]


def test_openai_allowed_tools_render_and_call_only_those(openai_client):
    choice = {"type": "allowed_tools",
              "allowed_tools": {"mode": "auto", "tools": [{"type": "function", "function": {"name": "write_file"}}]}}
    only = openai_client.chat.completions.create(model=MODEL_NAME, messages=user("hello"), tools=[WRITE_TOOL],
                                                 max_tokens=1)
    r = openai_client.chat.completions.create(model=MODEL_NAME, messages=user("TOOLTEST_PARALLEL"),
                                              tools=[WEATHER_TOOL, WRITE_TOOL], tool_choice=choice, max_tokens=300)
    c = r.choices[0]
    assert not c.message.tool_calls and c.finish_reason == "stop"  # the replay calls get_weather: dropped
    assert c.message.content == "Checking both cities."
    sized = openai_client.chat.completions.create(model=MODEL_NAME, messages=user("hello"),
                                                  tools=[WEATHER_TOOL, WRITE_TOOL], tool_choice=choice, max_tokens=1)
    assert sized.usage.prompt_tokens == only.usage.prompt_tokens
    choice["allowed_tools"]["mode"] = "required"
    choice["allowed_tools"]["tools"] = [{"type": "function", "function": {"name": "get_weather"}}]
    r = openai_client.chat.completions.create(model=MODEL_NAME, messages=user("FORCE_REQUIRED"),
                                              tools=[WEATHER_TOOL, WRITE_TOOL], tool_choice=choice, max_tokens=200)
    assert json.loads(r.choices[0].message.tool_calls[0].function.arguments) == {"location": "Oslo"}


def test_openai_legacy_functions(openai_client):
    fn = WEATHER_TOOL["function"]
    r = openai_client.chat.completions.create(model=MODEL_NAME, messages=user("TOOLTEST_PARALLEL"), functions=[fn],
                                              max_tokens=300)
    c = r.choices[0]
    assert c.finish_reason == "function_call" and not c.message.tool_calls
    assert c.message.function_call.name == "get_weather"
    assert json.loads(c.message.function_call.arguments) == {"location": "Paris"}  # one call: the legacy API
    stream = openai_client.chat.completions.create(model=MODEL_NAME, messages=user("TOOLTEST_WEATHER"),
                                                   functions=[fn], function_call={"name": "get_weather"},
                                                   max_tokens=300, stream=True)
    name, args, finish = None, "", None
    for chunk in stream:
        for ch in chunk.choices:
            assert not ch.delta.tool_calls
            if ch.delta.function_call:
                name = ch.delta.function_call.name or name
                args += ch.delta.function_call.arguments or ""
            finish = ch.finish_reason or finish
    assert name == "get_weather" and finish == "function_call"
    assert json.loads(args)["location"] == "Paris"
    # The legacy history (function_call, role "function") renders as a tool turn.
    messages = [{"role": "user", "content": "TOOLTEST_WEATHER"},
                {"role": "assistant", "content": None, "reasoning_content": "SECRET_THOUGHT_123",
                 "function_call": {"name": "get_weather", "arguments": "{\"location\": \"Paris\"}"}},
                {"role": "function", "name": "get_weather", "content": "sunny"}]
    r = openai_client.chat.completions.create(model=MODEL_NAME, messages=messages, functions=[fn], max_tokens=100)
    assert r.choices[0].message.content == "It is sunny in Paris."
    with pytest.raises(openai.BadRequestError) as e:
        openai_client.chat.completions.create(model=MODEL_NAME, messages=user("x"), functions=[fn],
                                              tools=[WEATHER_TOOL], max_tokens=5)
    assert "functions" in e.value.message


def test_openai_tool_choice_named_forces_the_call(openai_client):
    r = openai_client.chat.completions.create(
        model=MODEL_NAME, messages=user("FORCE_NAMED"), tools=[WEATHER_TOOL, WRITE_TOOL], max_tokens=200,
        tool_choice={"type": "function", "function": {"name": "get_weather"}})
    c = r.choices[0]
    assert c.finish_reason == "tool_calls"
    assert c.message.tool_calls[0].function.name == "get_weather"
    assert json.loads(c.message.tool_calls[0].function.arguments) == {"location": "Rome"}


def test_openai_tool_choice_required_forces_the_block(openai_client):
    stream = openai_client.chat.completions.create(model=MODEL_NAME, messages=user("FORCE_REQUIRED"),
                                                   tools=[WEATHER_TOOL], tool_choice="required", max_tokens=200,
                                                   stream=True)
    reasoning, _, calls, finish = collect_openai_stream(stream)
    assert reasoning == "A tool is required."
    assert finish == "tool_calls"
    assert json.loads(calls[0]["arguments"]) == {"location": "Oslo"}


def test_openai_reasoning_round_trip(openai_client):
    # The reasoning of the current tool loop goes back into the prompt (interleaved thinking).
    messages = [{"role": "user", "content": "TOOLTEST_WEATHER"},
                {"role": "assistant", "content": None, "reasoning_content": "SECRET_THOUGHT_123",
                 "tool_calls": [{"id": "call_1", "type": "function",
                                 "function": {"name": "get_weather", "arguments": "{\"location\": \"Paris\"}"}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]
    r = openai_client.chat.completions.create(model=MODEL_NAME, messages=messages, tools=[WEATHER_TOOL],
                                              max_tokens=100)
    assert r.choices[0].message.content == "It is sunny in Paris."


def test_openai_stop_sequence_on_replay(openai_client):
    r = openai_client.chat.completions.create(model=MODEL_NAME, messages=user("STOPTEST"), stop=["STOPHERE"],
                                              max_tokens=100)
    assert r.choices[0].message.content == "alpha beta "
    assert r.choices[0].finish_reason == "stop"


def test_openai_append_think_mode(append_think_server):
    import openai
    client = openai.OpenAI(base_url=append_think_server.url + "/v1", api_key="x", max_retries=0)
    r = client.chat.completions.create(model=MODEL_NAME, messages=user("REASONTEST"), max_tokens=100)
    m = r.choices[0].message
    assert m.content == "<think>Thinking about it.\nStep two.</think>\n\nThe answer is 42."
    assert "reasoning_content" not in (m.model_extra or {}) or m.model_extra["reasoning_content"] is None
    _, content, _, _ = collect_openai_stream(client.chat.completions.create(
        model=MODEL_NAME, messages=user("REASONTEST"), max_tokens=100, stream=True))
    assert content == m.content
    # Sending the content back re-extracts the reasoning in the template (interleaved thinking).
    msgs = [{"role": "user", "content": "TOOLTEST_WEATHER"},
            {"role": "assistant", "content": "<think>SECRET_THOUGHT_123</think>\n\nCalling.",
             "tool_calls": [{"id": "c", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c", "content": "sunny"}]
    r2 = client.chat.completions.create(model=MODEL_NAME, messages=msgs, tools=[WEATHER_TOOL], max_tokens=50)
    assert r2.choices[0].message.content.endswith("It is sunny in Paris.")


def test_openai_continue_final_message(server, openai_client):
    messages = [{"role": "user", "content": "PREFILL_ANSWER"}, {"role": "assistant", "content": "The answer is"}]
    prompt = httpx.post(server.url + "/tokenize", json={"messages": messages, "continue_final_message": True}).json()
    text = httpx.post(server.url + "/detokenize", json={"tokens": prompt["tokens"]}).json()["prompt"]
    assert text.endswith("]~b]ai\nThe answer is"), "the turn is left open, not closed"
    r = openai_client.chat.completions.create(model=MODEL_NAME, messages=messages, max_tokens=20,
                                              extra_body={"continue_final_message": True})
    m = r.choices[0].message
    assert m.content == " 42." and m.model_extra["reasoning_content"] is None
    assert r.usage.prompt_tokens == prompt["count"]
    # Continuing the reasoning: what follows is reasoning until `</think>`.
    messages = [{"role": "user", "content": "PREFILL_THINKING"},
                {"role": "assistant", "content": "", "reasoning_content": "First, one"}]
    _, content, _, _ = collect_openai_stream(openai_client.chat.completions.create(
        model=MODEL_NAME, messages=messages, max_tokens=20, stream=True, extra_body={"continue_final_message": True}))
    r = openai_client.chat.completions.create(model=MODEL_NAME, messages=messages, max_tokens=20,
                                              extra_body={"continue_final_message": True})
    assert r.choices[0].message.model_extra["reasoning_content"] == " then two."
    assert r.choices[0].message.content == content == "Done."
    with pytest.raises(openai.BadRequestError) as e:
        openai_client.chat.completions.create(model=MODEL_NAME, messages=messages, max_tokens=5,
                                              extra_body={"continue_final_message": True, "add_generation_prompt": True})
    assert "cannot both be true" in e.value.message


def test_openai_add_generation_prompt_false(server, openai_client):
    messages = user("hello")
    prompt = httpx.post(server.url + "/tokenize", json={"messages": messages, "add_generation_prompt": False}).json()
    text = httpx.post(server.url + "/detokenize", json={"tokens": prompt["tokens"]}).json()["prompt"]
    assert text.endswith("]~b]user\nhello[e~[\n")
    r = openai_client.chat.completions.create(model=MODEL_NAME, messages=messages, max_tokens=3,
                                              extra_body={"add_generation_prompt": False})
    assert r.usage.prompt_tokens == prompt["count"]
    assert r.choices[0].message.model_extra["reasoning_content"] is None  # no open <think>: all is content


# ---- Anthropic ---------------------------------------------------------------------------------------------

def test_anthropic_tool_use(anthropic_client):
    m = anthropic_client.messages.create(model=MODEL_NAME, max_tokens=300, tools=ANTHROPIC_TOOLS,
                                         messages=user("TOOLTEST_WEATHER"))
    assert m.stop_reason == "tool_use"
    assert [b.type for b in m.content] == ["thinking", "tool_use"]
    assert m.content[0].thinking == "The user wants the weather. I will call the tool."
    tu = m.content[1]
    assert tu.id.startswith("toolu_") and tu.name == "get_weather" and tu.input == {"location": "Paris", "days": 2}


def test_anthropic_tool_use_streaming_events(anthropic_client):
    events = []
    with anthropic_client.messages.stream(model=MODEL_NAME, max_tokens=300, tools=ANTHROPIC_TOOLS,
                                          messages=user("TOOLTEST_PARALLEL")) as stream:
        for ev in stream:
            events.append(ev)
        final = stream.get_final_message()
    raw = [e.type for e in events if e.type in ("message_start", "content_block_start", "content_block_delta",
                                                 "content_block_stop", "message_delta", "message_stop")]
    assert raw[0] == "message_start" and raw[-2:] == ["message_delta", "message_stop"]
    starts = [e.content_block.type for e in events if e.type == "content_block_start"]
    assert starts == ["thinking", "text", "tool_use", "tool_use"]
    kinds = {e.delta.type for e in events if e.type == "content_block_delta"}
    assert kinds == {"thinking_delta", "signature_delta", "text_delta", "input_json_delta"}
    # every block is closed before the next opens
    depth = 0
    for t in raw:
        depth += t == "content_block_start"
        depth -= t == "content_block_stop"
        assert depth in (0, 1)
    assert final.stop_reason == "tool_use"
    assert [b.input for b in final.content if b.type == "tool_use"] == [{"location": "Paris"},
                                                                         {"location": "Tokyo", "days": 3}]
    assert final.content[1].text == "Checking both cities."


def test_anthropic_parameter_close_tag_inside_value(anthropic_client):
    with anthropic_client.messages.stream(model=MODEL_NAME, max_tokens=300, tools=ANTHROPIC_TOOLS,
                                          messages=user("TOOLTEST_EDIT")) as stream:
        final = stream.get_final_message()
    assert final.content[-1].input == {"path": "a.xml", "content": EDIT_VALUE}


def test_anthropic_thinking_then_text(anthropic_client):
    with anthropic_client.messages.stream(model=MODEL_NAME, max_tokens=100, messages=user("REASONTEST")) as stream:
        final = stream.get_final_message()
    assert [b.type for b in final.content] == ["thinking", "text"]
    assert final.content[0].thinking == "Thinking about it.\nStep two."
    assert final.content[1].text == "The answer is 42."
    assert final.stop_reason == "end_turn"


def test_anthropic_interleaved_thinking_round_trip(anthropic_client):
    first = anthropic_client.messages.create(model=MODEL_NAME, max_tokens=100, tools=ANTHROPIC_TOOLS,
                                             messages=user("GIVE_SECRET"))
    thinking, tool_use = first.content
    assert thinking.thinking == "SECRET_THOUGHT_123" and thinking.signature
    messages = [
        {"role": "user", "content": "GIVE_SECRET"},
        {"role": "assistant", "content": [thinking.model_dump(), tool_use.model_dump()]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_use.id, "content": "sunny"}]},
    ]
    m = anthropic_client.messages.create(model=MODEL_NAME, max_tokens=100, tools=ANTHROPIC_TOOLS, messages=messages)
    assert m.content[-1].text == "It is sunny in Paris."  # the signed reasoning went back into the prompt
    # tool_result as blocks, with is_error
    messages[2]["content"][0] = {"type": "tool_result", "tool_use_id": tool_use.id, "is_error": True,
                                 "content": [{"type": "text", "text": "timeout"}]}
    m = anthropic_client.messages.create(model=MODEL_NAME, max_tokens=100, tools=ANTHROPIC_TOOLS, messages=messages)
    assert m.content[-1].text == "It is sunny in Paris."


def test_anthropic_thinking_signatures(anthropic_client):
    whole = anthropic_client.messages.create(model=MODEL_NAME, max_tokens=100, messages=user("REASONTEST"))
    with anthropic_client.messages.stream(model=MODEL_NAME, max_tokens=100, messages=user("REASONTEST")) as stream:
        events = list(stream)
        final = stream.get_final_message()
    deltas = [e.delta for e in events if e.type == "content_block_delta"]
    sigs = [d for d in deltas if d.type == "signature_delta"]
    assert len(sigs) == 1 and deltas.index(sigs[0]) == [d.type for d in deltas].index("text_delta") - 1, \
        "the thinking block's last delta is its signature"
    assert final.content[0].signature == sigs[0].signature == whole.content[0].signature
    assert len(whole.content[0].signature) == 44  # base64 of an HMAC-SHA256
    block = whole.content[0].model_dump()
    history = [{"role": "user", "content": "REASONTEST"}, {"role": "assistant", "content": [block]},
               {"role": "user", "content": "Again."}]
    assert anthropic_client.messages.create(model=MODEL_NAME, max_tokens=3, messages=history).content
    for change in ({"thinking": block["thinking"] + " (edited)"}, {"signature": "A" * 44}, {"signature": ""}):
        history[1]["content"] = [{**block, **change}]
        with pytest.raises(anthropic.BadRequestError) as e:
            anthropic_client.messages.create(model=MODEL_NAME, max_tokens=3, messages=history)
        assert "messages[1].content[0].signature" in e.value.message


def test_anthropic_tool_choice_tool_and_any(anthropic_client):
    m = anthropic_client.messages.create(model=MODEL_NAME, max_tokens=200, tools=ANTHROPIC_TOOLS,
                                         tool_choice={"type": "tool", "name": "get_weather"},
                                         messages=user("FORCE_NAMED"))
    assert m.stop_reason == "tool_use" and m.content[-1].input == {"location": "Rome"}
    m = anthropic_client.messages.create(model=MODEL_NAME, max_tokens=200, tools=ANTHROPIC_TOOLS,
                                         tool_choice={"type": "any"}, messages=user("FORCE_REQUIRED"))
    assert m.stop_reason == "tool_use" and m.content[-1].input == {"location": "Oslo"}


def test_anthropic_disable_parallel_tool_use_and_none(anthropic_client):
    m = anthropic_client.messages.create(model=MODEL_NAME, max_tokens=300, tools=ANTHROPIC_TOOLS,
                                         tool_choice={"type": "auto", "disable_parallel_tool_use": True},
                                         messages=user("TOOLTEST_PARALLEL"))
    assert m.stop_reason == "tool_use"
    assert [b.input for b in m.content if b.type == "tool_use"] == [{"location": "Paris"}]
    with anthropic_client.messages.stream(model=MODEL_NAME, max_tokens=300, tools=ANTHROPIC_TOOLS,
                                          tool_choice={"type": "any", "disable_parallel_tool_use": True},
                                          messages=user("TOOLTEST_PARALLEL")) as stream:
        final = stream.get_final_message()
    assert [b.input for b in final.content if b.type == "tool_use"] == [{"location": "Paris"}]
    both = anthropic_client.messages.create(model=MODEL_NAME, max_tokens=300, tools=ANTHROPIC_TOOLS,
                                            messages=user("TOOLTEST_PARALLEL"))
    assert m.usage.output_tokens < both.usage.output_tokens - 10  # it stopped at the first `</invoke>`
    none = anthropic_client.messages.create(model=MODEL_NAME, max_tokens=300, tools=ANTHROPIC_TOOLS,
                                            tool_choice={"type": "none"}, messages=user("TOOLTEST_PARALLEL"))
    assert none.stop_reason == "end_turn"
    assert [b.type for b in none.content] == ["thinking", "text"]
    assert none.content[1].text == "Checking both cities."
    assert anthropic_client.messages.count_tokens(model=MODEL_NAME, messages=user("x"), tools=ANTHROPIC_TOOLS,
                                                  tool_choice={"type": "none"}).input_tokens == \
        anthropic_client.messages.count_tokens(model=MODEL_NAME, messages=user("x")).input_tokens


def test_anthropic_assistant_prefill_is_continued(anthropic_client):
    messages = [{"role": "user", "content": "PREFILL_ANSWER"},
                {"role": "assistant", "content": [{"type": "text", "text": "The answer is"}]}]
    m = anthropic_client.messages.create(model=MODEL_NAME, max_tokens=20, messages=messages)
    assert [b.type for b in m.content] == ["text"] and m.content[0].text == " 42."
    assert m.stop_reason == "end_turn"
    with anthropic_client.messages.stream(model=MODEL_NAME, max_tokens=20, messages=messages) as stream:
        assert stream.get_final_message().content[0].text == " 42."
    # The prompt ends with the prefill: one header, no end-of-turn after it.
    closed = anthropic_client.messages.count_tokens(
        model=MODEL_NAME, messages=messages[:1] + [{"role": "assistant", "content": "The answer is"},
                                                   {"role": "user", "content": "x"}])
    assert anthropic_client.messages.count_tokens(model=MODEL_NAME, messages=messages).input_tokens < \
        closed.input_tokens
    with pytest.raises(anthropic.BadRequestError) as e:
        anthropic_client.messages.create(model=MODEL_NAME, max_tokens=5, messages=[
            {"role": "user", "content": "x"}, {"role": "assistant", "content": "trailing "}])
    assert "trailing whitespace" in e.value.message


def test_anthropic_stop_sequence(anthropic_client):
    m = anthropic_client.messages.create(model=MODEL_NAME, max_tokens=100, stop_sequences=["STOPHERE"],
                                         messages=user("STOPTEST"))
    assert m.stop_reason == "stop_sequence" and m.stop_sequence == "STOPHERE"
    assert m.content[-1].text == "alpha beta "


def test_anthropic_max_tokens_cut(anthropic_client):
    m = anthropic_client.messages.create(model=MODEL_NAME, max_tokens=3, messages=user("REASONTEST"))
    assert m.stop_reason == "max_tokens"
    assert m.usage.output_tokens == 3


def test_thinking_key_file_survives_a_restart(tmp_path):
    # --thinking-key-file: created on first use (mode 0600), the same key after a restart, so a
    # block the first process signed is accepted by the second; a process with its own random
    # key refuses it; a key file too short is refused at start, naming the flag.
    key = tmp_path / "thinking.key"

    def client(s):
        return anthropic.Anthropic(base_url=s.url, api_key="unused", max_retries=0, timeout=60)

    first = replay_server(OUTPUTS, "--thinking-key-file", str(key))
    try:
        block = client(first).messages.create(model=MODEL_NAME, max_tokens=100, messages=user("REASONTEST")).content[0]
    finally:
        assert first.stop() == 0
    assert block.type == "thinking" and block.signature
    assert key.stat().st_size == 32 and (key.stat().st_mode & 0o777) == 0o600
    history = [{"role": "user", "content": "REASONTEST"}, {"role": "assistant", "content": [block.model_dump()]},
               {"role": "user", "content": "Again."}]
    second = replay_server(OUTPUTS, "--thinking-key-file", str(key))
    try:
        assert client(second).messages.create(model=MODEL_NAME, max_tokens=3, messages=history).content
    finally:
        assert second.stop() == 0
    other = replay_server(OUTPUTS)
    try:
        with pytest.raises(anthropic.BadRequestError) as e:
            client(other).messages.create(model=MODEL_NAME, max_tokens=3, messages=history)
        assert "messages[1].content[0].signature" in e.value.message
    finally:
        assert other.stop() == 0
    short = tmp_path / "short.key"
    short.write_bytes(b"too short")
    import subprocess
    from live_server import BINARY, MODEL
    r = subprocess.run([BINARY, "serve", "-m", MODEL, "--port", "0", "--thinking-key-file", str(short)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "--thinking-key-file" in r.stderr and "at least 32" in r.stderr, r.stderr
