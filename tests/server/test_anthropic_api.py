"""The Anthropic Messages API of `m2cpp serve` through the official
`anthropic` SDK, on the tiny random chat model: whole and streamed
messages with the exact event sequence, system prompts, sampling fields,
count_tokens, Anthropic-shaped errors, and pings while a stream waits."""
import threading
import time

import anthropic
import httpx
import pytest

from live_server import MODEL_NAME, ServerProcess, wait_for

USER = [{"role": "user", "content": "Say something."}]


def test_message_non_streaming(anthropic_client):
    # Recent SDKs no longer declare temperature/top_p/top_k; older ones and Claude Code still send them.
    m = anthropic_client.messages.create(model=MODEL_NAME, max_tokens=8, messages=USER, system="You are terse.",
                                         extra_body={"temperature": 0.7, "top_p": 0.9, "top_k": 20})
    assert m.type == "message" and m.role == "assistant" and m.id.startswith("msg_")
    assert m.model == MODEL_NAME
    assert m.stop_reason in ("end_turn", "max_tokens")
    assert m.usage.output_tokens <= 8
    assert m.usage.input_tokens > 5
    # The random model rarely closes its reasoning: a thinking block comes first.
    assert all(b.type in ("thinking", "text") for b in m.content)


def test_message_streaming_event_sequence(anthropic_client):
    with anthropic_client.messages.stream(model=MODEL_NAME, max_tokens=10, messages=USER,
                                          system=[{"type": "text", "text": "Block one."},
                                                  {"type": "text", "text": "Block two."}]) as stream:
        events = [e for e in stream]
        final = stream.get_final_message()
    types = [e.type for e in events]
    wire = [t for t in types if t in ("message_start", "content_block_start", "content_block_delta",
                                      "content_block_stop", "message_delta", "message_stop")]
    assert wire[0] == "message_start"
    assert wire[-2:] == ["message_delta", "message_stop"]
    assert wire.count("content_block_start") == wire.count("content_block_stop") >= 1
    assert final.stop_reason == "max_tokens"
    assert final.usage.output_tokens == 10


def test_raw_stream_has_ping_and_event_names(server):
    body = {"model": MODEL_NAME, "max_tokens": 4, "stream": True, "messages": USER}
    with httpx.stream("POST", server.url + "/v1/messages", json=body, timeout=30) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        names = [line[len("event: "):] for line in r.iter_lines() if line.startswith("event: ")]
    assert names[:2] == ["message_start", "ping"]
    assert names[-2:] == ["message_delta", "message_stop"]


def test_seeded_greedy_is_deterministic(anthropic_client):
    a = anthropic_client.messages.create(model=MODEL_NAME, max_tokens=12, messages=USER, extra_body={"temperature": 0})
    b = anthropic_client.messages.create(model=MODEL_NAME, max_tokens=12, messages=USER, extra_body={"temperature": 0})
    assert [x.model_dump() for x in a.content] == [x.model_dump() for x in b.content]


def test_count_tokens(anthropic_client):
    r = anthropic_client.messages.count_tokens(model=MODEL_NAME, messages=USER)
    longer = anthropic_client.messages.count_tokens(model=MODEL_NAME, messages=USER, system="A long system prompt.",
                                                    tools=[{"name": "t", "description": "d",
                                                            "input_schema": {"type": "object"}}])
    assert 5 < r.input_tokens < longer.input_tokens


def test_errors_are_anthropic_shaped(anthropic_client, server):
    with pytest.raises(anthropic.BadRequestError) as e:
        anthropic_client.messages.create(model=MODEL_NAME, max_tokens=5, messages=[{"role": "robot", "content": "x"}])
    assert e.value.body["type"] == "error" and e.value.body["error"]["type"] == "invalid_request_error"
    with pytest.raises(anthropic.NotFoundError) as e:
        anthropic_client.messages.create(model="claude-nonexistent", max_tokens=5, messages=USER)
    assert e.value.body["error"]["type"] == "not_found_error"
    # max_tokens is required (raw request: the SDK checks it itself)
    r = httpx.post(server.url + "/v1/messages", json={"model": MODEL_NAME, "messages": USER})
    assert r.status_code == 400 and "max_tokens" in r.json()["error"]["message"]
    r = httpx.post(server.url + "/v1/messages", json={"model": MODEL_NAME, "max_tokens": 5, "messages": [
        {"role": "user", "content": [{"type": "image", "source": {"type": "base64", "data": ""}}]}]})
    assert r.status_code == 400 and r.json()["type"] == "error"
    r = httpx.post(server.url + "/v1/messages", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"


def test_long_max_tokens_is_clamped_to_the_context(anthropic_client):
    # Claude Code asks for 32000 output tokens; a 2048-token context gives what it has left.
    m = anthropic_client.messages.create(model=MODEL_NAME, max_tokens=32000, messages=USER, stop_sequences=["e"],
                                         extra_body={"temperature": 0})
    assert m.stop_reason in ("end_turn", "stop_sequence", "max_tokens")


def test_pings_while_a_stream_waits():
    # One running sequence: the streamed message waits behind a ~5 s generation,
    # and must show it is alive meanwhile (message_start, then pings).
    s = ServerProcess("--max-num-seqs", "1", "--step-delay-ms", "20")
    try:
        blocker = threading.Thread(target=lambda: httpx.post(
            s.url + "/v1/completions", json={"model": MODEL_NAME, "prompt": "x", "max_tokens": 250,
                                              "ignore_eos": True}, timeout=60))
        blocker.start()
        assert wait_for(lambda: s.metric("m2cpp:num_requests_running") == 1)
        body = {"model": MODEL_NAME, "max_tokens": 2, "stream": True, "messages": USER}
        events = []  # (seconds since the request, event name)
        start = time.monotonic()
        with httpx.stream("POST", s.url + "/v1/messages", json=body, timeout=60) as r:
            for line in r.iter_lines():
                if line.startswith("event: "):
                    events.append((time.monotonic() - start, line[len("event: "):]))
        blocker.join()
    finally:
        assert s.stop() == 0
    names = [n for _, n in events]
    assert names[:2] == ["message_start", "ping"] and events[0][0] < 1.0
    first_block = names.index("content_block_start")
    waited = events[first_block][0]
    assert waited > 3.0, "the message waited behind the other request"
    assert names[:first_block].count("ping") >= 2
    times = [t for t, _ in events[:first_block + 1]]
    assert max(b - a for a, b in zip(times, times[1:])) < 3.5, f"a gap without events: {events}"
    assert names[-2:] == ["message_delta", "message_stop"]
