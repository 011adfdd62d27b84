"""The Responses API (POST /v1/responses and its stored responses) through
the official `openai` SDK's `responses` client against a live server. The
test model is random, so reasoning and tool calls come from `--replay`
(fixed raw M2 outputs chosen by a marker in the prompt): a marker that only
an earlier turn's output or reasoning puts into the prompt proves that
previous_response_id continued that conversation."""
import json
import time

import httpx
import jsonschema
import openai
import pytest

from live_server import REPLAY_PARALLEL_CALLS, REPLAY_WEATHER_CALL, MODEL_NAME, ServerProcess, replay_server

WEATHER = {"type": "function", "name": "get_weather", "description": "Get weather",
           "parameters": {"type": "object", "properties": {"location": {"type": "string"},
                                                          "days": {"type": "integer"}},
                          "required": ["location"]}}

OUTPUTS = [
    # Found only when the earlier turn's reasoning (a signed-free reasoning item) reached the prompt.
    {"match": "SECRET_THOUGHT_123", "output": "The tool answered.</think>\n\nIt is sunny in Paris.[e~["},
    # Found only when the earlier turn's answer reached the prompt (previous_response_id).
    {"match": "REMEMBERED_TOKEN_55", "output": "I recall it.</think>\n\nCHAIN_OK[e~["},
    {"match": "CHAIN_START", "output": "Noted.</think>\n\nI will remember REMEMBERED_TOKEN_55.[e~["},
    {"match": "GIVE_SECRET", "output":
        "SECRET_THOUGHT_123</think>\n\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n"
        "<parameter name=\"location\">Paris</parameter>\n</invoke>\n</minimax:tool_call>[e~["},
    REPLAY_WEATHER_CALL,
    REPLAY_PARALLEL_CALLS,
    {"match": "FORCE_REQUIRED", "output":
        "A tool is required.</think><invoke name=\"get_weather\">\n<parameter name=\"location\">Oslo</parameter>\n"
        "</invoke>\n</minimax:tool_call>[e~["},
    {"match": "REASONTEST", "output": "Thinking about it.\nStep two.</think>\n\nThe answer is 42.[e~["},
]
REASONING = "Thinking about it.\nStep two."


@pytest.fixture(scope="module")
def server():
    s = replay_server(OUTPUTS)
    yield s
    assert s.stop() == 0, s.log_text()[-4000:]


def create(client, **kw):
    return client.responses.create(model=MODEL_NAME, **kw)


def items_of(response, kind):
    return [o for o in response.output if o.type == kind]


def collect(stream):
    """Every event of a stream, checked for the numbering and framing every stream must have."""
    events = list(stream)
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[0].type == "response.created" and events[1].type == "response.in_progress"
    assert events[0].response.status == "in_progress" and events[0].response.output == []
    ids = {e.response.id for e in events if hasattr(e, "response")}
    assert len(ids) == 1
    return events


def joined(events, kind):
    return "".join(e.delta for e in events if e.type == kind)


def test_text_and_reasoning_whole(openai_client):
    r = create(openai_client, input="REASONTEST please", max_output_tokens=100)
    assert r.object == "response" and r.id.startswith("resp_") and r.status == "completed"
    assert r.model == MODEL_NAME
    (reasoning,) = items_of(r, "reasoning")
    assert reasoning.content[0].type == "reasoning_text" and reasoning.content[0].text == REASONING
    assert reasoning.summary == []  # no summary asked for
    (message,) = items_of(r, "message")
    assert message.role == "assistant" and message.status == "completed"
    assert r.output_text == "The answer is 42."
    assert [o.type for o in r.output] == ["reasoning", "message"]
    u = r.usage
    assert u.output_tokens_details.reasoning_tokens > 0
    assert u.output_tokens > u.output_tokens_details.reasoning_tokens
    assert u.total_tokens == u.input_tokens + u.output_tokens and u.input_tokens > 0


def test_instructions_reach_the_prompt(openai_client):
    # (M2's template has a default system prompt that instructions replace: compare two instructions.)
    short = create(openai_client, input="hello", instructions="Be brief.", max_output_tokens=1, store=False)
    told = create(openai_client, input="hello", instructions="Be brief. " * 20, max_output_tokens=1, store=False)
    assert told.usage.input_tokens >= short.usage.input_tokens + 40
    assert short.instructions == "Be brief."


def test_stream_events(openai_client):
    t0 = time.time()
    stream = create(openai_client, input="REASONTEST please", max_output_tokens=100, stream=True,
                    reasoning={"summary": "auto"})
    first_text_at = None
    events = []
    for e in stream:
        if e.type == "response.output_text.delta" and first_text_at is None:
            first_text_at = time.time() - t0
        events.append(e)
    assert first_text_at is not None and first_text_at < 5  # NemoClaw's probe
    events = collect(iter(events))
    types = [e.type for e in events]
    assert types[-1] == "response.completed"
    assert joined(events, "response.reasoning_text.delta") == REASONING
    assert joined(events, "response.reasoning_summary_text.delta") == REASONING
    assert joined(events, "response.output_text.delta") == "The answer is 42."
    # Each item opens, fills and closes before the next one starts.
    added = [e for e in events if e.type == "response.output_item.added"]
    done = [e for e in events if e.type == "response.output_item.done"]
    assert [a.item.type for a in added] == ["reasoning", "message"] == [d.item.type for d in done]
    assert types.index("response.content_part.added") < types.index("response.output_text.delta")
    assert types.index("response.output_text.done") < types.index("response.completed")
    text_done = next(e for e in events if e.type == "response.output_text.done")
    assert text_done.text == "The answer is 42." and text_done.item_id == added[1].item.id
    final = events[-1].response
    assert final.status == "completed" and final.output_text == "The answer is 42."
    assert final.output[0].summary[0].text == REASONING
    assert final.usage.output_tokens_details.reasoning_tokens > 0
    stored = openai_client.responses.retrieve(final.id)
    assert stored.output_text == final.output_text and stored.output[0].id == final.output[0].id


def test_stream_helper_final_response(openai_client):
    with openai_client.responses.stream(model=MODEL_NAME, input="REASONTEST again", max_output_tokens=100) as s:
        deltas = "".join(e.delta for e in s if e.type == "response.output_text.delta")
        final = s.get_final_response()
    assert deltas == final.output_text == "The answer is 42."


def test_function_call_whole_and_streamed(openai_client):
    r = create(openai_client, input="TOOLTEST_WEATHER in Paris?", tools=[WEATHER], max_output_tokens=200)
    assert [o.type for o in r.output] == ["reasoning", "function_call"]  # no empty message between
    (call,) = items_of(r, "function_call")
    assert call.name == "get_weather" and call.call_id.startswith("call_") and call.status == "completed"
    assert json.loads(call.arguments) == {"location": "Paris", "days": 2}
    events = collect(create(openai_client, input="TOOLTEST_WEATHER in Paris?", tools=[WEATHER],
                            max_output_tokens=200, stream=True))
    args = joined(events, "response.function_call_arguments.delta")
    assert json.loads(args) == {"location": "Paris", "days": 2}
    done = next(e for e in events if e.type == "response.function_call_arguments.done")
    assert done.arguments == args
    final = events[-1].response
    assert items_of(final, "function_call")[0].arguments == args


def test_tool_round_trip_with_previous_response_id(openai_client):
    first = create(openai_client, input="GIVE_SECRET weather?", tools=[WEATHER], max_output_tokens=200)
    (call,) = items_of(first, "function_call")
    assert items_of(first, "reasoning")[0].content[0].text == "SECRET_THOUGHT_123"
    second = create(openai_client, previous_response_id=first.id, tools=[WEATHER], max_output_tokens=200,
                    input=[{"type": "function_call_output", "call_id": call.call_id, "output": "sunny, 24 C"}])
    # The stored reasoning reached the prompt: the replay keyed on it answered.
    assert second.output_text == "It is sunny in Paris."
    assert second.previous_response_id == first.id


def test_tool_round_trip_with_items_sent_back(openai_client):
    """Without the store (store=false, as Codex runs): the client sends the output items back itself."""
    first = create(openai_client, input="GIVE_SECRET weather?", tools=[WEATHER], max_output_tokens=200, store=False)
    call = items_of(first, "function_call")[0]
    history = [{"role": "user", "content": "GIVE_SECRET weather?"}]
    history += [o.model_dump(exclude_none=True) for o in first.output]
    history.append({"type": "function_call_output", "call_id": call.call_id, "output": "sunny"})
    second = create(openai_client, input=history, tools=[WEATHER], max_output_tokens=200, store=False)
    assert second.output_text == "It is sunny in Paris."
    with pytest.raises(openai.NotFoundError):
        openai_client.responses.retrieve(first.id)  # store=false: not kept


def test_encrypted_reasoning_round_trip(openai_client):
    """Codex's way: store=false, include reasoning.encrypted_content, reasoning sent back only sealed."""
    first = create(openai_client, input="GIVE_SECRET weather?", tools=[WEATHER], max_output_tokens=200,
                   store=False, include=["reasoning.encrypted_content"])
    reasoning = items_of(first, "reasoning")[0]
    assert reasoning.encrypted_content and "SECRET_THOUGHT_123" not in reasoning.encrypted_content
    call = items_of(first, "function_call")[0]
    sealed = {"type": "reasoning", "id": reasoning.id, "summary": [], "encrypted_content": reasoning.encrypted_content}
    history = [{"role": "user", "content": "GIVE_SECRET weather?"}, sealed, call.model_dump(exclude_none=True),
               {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}]
    second = create(openai_client, input=history, tools=[WEATHER], max_output_tokens=200, store=False)
    assert second.output_text == "It is sunny in Paris."  # the sealed reasoning reached the prompt
    sealed["encrypted_content"] = "x" + sealed["encrypted_content"][1:]
    with pytest.raises(openai.BadRequestError) as e:
        create(openai_client, input=history, tools=[WEATHER], max_output_tokens=200, store=False)
    assert "input[1].encrypted_content" in e.value.message


def test_previous_response_chain(openai_client):
    r1 = create(openai_client, input="CHAIN_START remember this", max_output_tokens=100)
    assert "REMEMBERED_TOKEN_55" in r1.output_text
    r2 = create(openai_client, input="what did you say?", previous_response_id=r1.id, max_output_tokens=100)
    assert r2.output_text == "CHAIN_OK"
    r3 = create(openai_client, input="and again?", previous_response_id=r2.id, max_output_tokens=100)
    assert r3.output_text == "CHAIN_OK"  # r3's prompt holds all three turns
    assert r3.usage.input_tokens > r2.usage.input_tokens > r1.usage.input_tokens
    # Without the chain the marker is absent and the random model answers.
    alone = create(openai_client, input="what did you say?", max_output_tokens=5)
    assert alone.output_text != "CHAIN_OK"


def test_retrieve_input_items_delete_cancel(openai_client):
    r = create(openai_client, input="REASONTEST", max_output_tokens=100, metadata={"k": "v"})
    got = openai_client.responses.retrieve(r.id)
    assert got.id == r.id and got.output_text == r.output_text and got.metadata == {"k": "v"}
    items = openai_client.responses.input_items.list(r.id)
    assert len(items.data) == 1 and items.data[0].content[0].text == "REASONTEST"
    many = create(openai_client, max_output_tokens=1, input=[
        {"role": "user", "content": f"turn {i}"} for i in range(5)])
    page = openai_client.responses.input_items.list(many.id, limit=2, order="asc")
    assert [i.content[0].text for i in page.data] == ["turn 0", "turn 1"] and page.has_more
    rest = openai_client.responses.input_items.list(many.id, after=page.last_id, order="asc")
    assert [i.content[0].text for i in rest.data] == ["turn 2", "turn 3", "turn 4"] and not rest.has_more
    newest = openai_client.responses.input_items.list(many.id, limit=1)
    assert newest.data[0].content[0].text == "turn 4"  # desc by default, as OpenAI
    with pytest.raises(openai.BadRequestError):
        openai_client.responses.input_items.list(many.id, limit=0)
    with pytest.raises(openai.BadRequestError) as e:
        openai_client.responses.cancel(r.id)
    assert "background" in e.value.message
    openai_client.responses.delete(r.id)
    with pytest.raises(openai.NotFoundError):
        openai_client.responses.retrieve(r.id)
    with pytest.raises(openai.NotFoundError):
        openai_client.responses.delete(r.id)
    with pytest.raises(openai.NotFoundError):
        openai_client.responses.cancel("resp_unknown")


def test_unknown_previous_response_is_404_naming_the_field(openai_client):
    with pytest.raises(openai.NotFoundError) as e:
        create(openai_client, input="x", previous_response_id="resp_nope")
    assert e.value.body["param"] == "previous_response_id"


def test_refused_fields_are_400_naming_them(openai_client):
    cases = [({"background": True}, "background"),
             ({"tools": [{"type": "web_search"}]}, "tools[0].type"),
             ({"truncation": "auto"}, "truncation"),
             ({"max_output_tokens": 0}, "max_output_tokens"),
             ({"tool_choice": {"type": "file_search"}}, "tool_choice")]
    for extra, field in cases:
        with pytest.raises(openai.BadRequestError) as e:
            create(openai_client, input="x", **extra)
        assert field in e.value.message, (extra, e.value.message)
    with pytest.raises(openai.BadRequestError) as e:
        create(openai_client, input=[{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}])
    assert "input[0].content[0].type" in e.value.message


def test_text_format_json_schema_is_held_to_the_schema(openai_client):
    # text.format goes to the chat path's response_format: constrained decoding (the random
    # model writes whatever the grammar allows; an enum-only object is short enough to finish).
    schema = {"type": "object", "properties": {"mode": {"enum": ["walk", "bike"]}}, "required": ["mode"],
              "additionalProperties": False}
    fmt = {"format": {"type": "json_schema", "name": "plan", "schema": schema, "strict": True}}
    for stream in (False, True):
        if stream:
            events = collect(create(openai_client, input="a plan", text=fmt, reasoning={"effort": "none"},
                                    max_output_tokens=100, stream=True))
            r = events[-1].response
        else:
            r = create(openai_client, input="a plan", text=fmt, reasoning={"effort": "none"}, max_output_tokens=100)
        assert r.status == "completed", r.status
        jsonschema.validate(json.loads(r.output_text), schema)


def test_max_output_tokens_gives_incomplete(openai_client):
    r = create(openai_client, input="REASONTEST", max_output_tokens=3)
    assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
    assert r.usage.output_tokens == 3
    events = collect(create(openai_client, input="REASONTEST", max_output_tokens=3, stream=True))
    assert events[-1].type == "response.incomplete"
    assert events[-1].response.incomplete_details.reason == "max_output_tokens"


def test_tool_choice_required_and_parallel_calls(openai_client):
    r = create(openai_client, input="FORCE_REQUIRED", tools=[WEATHER], tool_choice="required", max_output_tokens=200)
    (call,) = items_of(r, "function_call")
    assert json.loads(call.arguments) == {"location": "Oslo"}
    both = create(openai_client, input="TOOLTEST_PARALLEL", tools=[WEATHER], max_output_tokens=300)
    assert [json.loads(c.arguments) for c in items_of(both, "function_call")] == [
        {"location": "Paris"}, {"location": "Tokyo", "days": 3}]
    assert both.output_text == "Checking both cities."
    one = create(openai_client, input="TOOLTEST_PARALLEL", tools=[WEATHER], parallel_tool_calls=False,
                 max_output_tokens=300)
    assert [json.loads(c.arguments) for c in items_of(one, "function_call")] == [{"location": "Paris"}]
    assert one.parallel_tool_calls is False
    none = create(openai_client, input="TOOLTEST_PARALLEL", tools=[WEATHER], tool_choice="none",
                  max_output_tokens=300)
    assert items_of(none, "function_call") == [] and none.output_text == "Checking both cities."


def test_reasoning_effort_none_closes_the_reasoning(openai_client):
    r = create(openai_client, input="hello", reasoning={"effort": "none"}, max_output_tokens=5, store=False)
    assert items_of(r, "reasoning") == []
    assert r.usage.output_tokens_details.reasoning_tokens == 0


def test_routes_and_methods(server):
    assert httpx.get(server.url + "/v1/responses").status_code == 405
    r = httpx.put(server.url + "/v1/responses/resp_x", content=b"{}")
    assert r.status_code == 405 and "GET" in r.headers["allow"]
    assert httpx.get(server.url + "/v1/responses/resp_x/other").status_code == 404
    assert server.metric("m2cpp:http_requests_total", {"route": "/v1/responses", "status": "200"}) >= 1


def test_store_is_bounded_by_bytes():
    s = replay_server(OUTPUTS, "--responses-store-bytes", "20000")
    try:
        client = openai.OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0, timeout=60)
        ids = [create(client, input="REASONTEST " + "pad " * 300, max_output_tokens=100).id for _ in range(12)]
        client.responses.retrieve(ids[-1])
        with pytest.raises(openai.NotFoundError):
            client.responses.retrieve(ids[0])  # the least recently used went first
    finally:
        assert s.stop() == 0


def test_disconnect_cancels_and_frees_kv():
    s = replay_server(OUTPUTS, "--step-delay-ms", "20")
    try:
        client = openai.OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0, timeout=60)
        stream = create(client, input="hello", max_output_tokens=2000, stream=True,
                        extra_body={"ignore_eos": True, "seed": 1})
        for e in stream:
            if e.type == "response.output_text.delta" or e.type == "response.reasoning_text.delta":
                break
        assert s.metric("m2cpp:kv_cache_blocks_used") > 0
        stream.close()
        from live_server import wait_for
        assert wait_for(lambda: s.metric("m2cpp:kv_cache_blocks_used") == 0, timeout=10)
        assert wait_for(lambda: s.metric("vllm:request_success_total",
                                         {"model_name": MODEL_NAME, "finished_reason": "abort"}) == 1, timeout=10)
    finally:
        assert s.stop() == 0


def test_engine_failure_after_the_stream_began_is_response_failed():
    """Shutdown past its grace period cancels running requests: the stream ends with response.failed."""
    import signal
    s = replay_server(OUTPUTS, "--step-delay-ms", "5", "--shutdown-timeout", "0.2")
    client = openai.OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0, timeout=60)
    stream = create(client, input="hello", max_output_tokens=2000, stream=True, store=True,
                    extra_body={"ignore_eos": True, "seed": 1})
    events = []
    for e in stream:
        events.append(e)
        if len(events) == 4:
            s.proc.send_signal(signal.SIGTERM)
    assert events[-1].type == "response.failed"
    failed = events[-1].response
    assert failed.status == "failed" and "shutting down" in failed.error.message
    assert [e.sequence_number for e in events] == list(range(len(events)))
    # The open item was closed before the failure (a client can keep what came).
    assert sum(e.type == "response.output_item.added" for e in events) == sum(
        e.type == "response.output_item.done" for e in events)
    assert s.proc.wait(timeout=30) == 0


def test_quiet_streams_get_keep_alive_comments():
    """Seven silent seconds between two tokens: an SSE comment keeps the stream alive, and the SDK skips it."""
    s = ServerProcess("--step-delay-ms", "7000")
    try:
        body = {"model": MODEL_NAME, "input": "hello", "max_output_tokens": 2, "stream": True, "store": False}
        with httpx.stream("POST", s.url + "/v1/responses", json=body, timeout=60) as r:
            lines = list(r.iter_lines())
        assert ": keep-alive" in lines
        events = [json.loads(line[6:]) for line in lines if line.startswith("data: ")]
        assert events[-1]["type"] in ("response.completed", "response.incomplete")
        assert [e["sequence_number"] for e in events] == list(range(len(events)))
    finally:
        assert s.stop() == 0
