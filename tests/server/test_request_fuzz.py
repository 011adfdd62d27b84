"""Type fuzzing of every JSON route of `m2cpp serve`: from a rich valid body
per route, each value anywhere in the tree (and each object's missing keys'
worth of nulls) is replaced in turn by a value of every other JSON type, and
the server must answer every such request without a 5xx, naming a field in
its 400s, never with a library's exception text or a file path. Deterministic:
the same requests on every run (no random seeds)."""
import copy
import json

import httpx
import pytest

from live_server import MODEL, MODEL_NAME

TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                         "parameters": {"type": "object",
                                                        "properties": {"city": {"type": "string"},
                                                                       "days": {"type": "integer"}},
                                                        "required": ["city"]}}}
CHAT = {
    "model": MODEL_NAME, "max_tokens": 1, "temperature": 0.5, "top_p": 0.9, "top_k": 5, "min_p": 0.01,
    "seed": 3, "n": 1, "stop": ["\n\n"], "stop_token_ids": [5], "logprobs": True, "top_logprobs": 2,
    "logit_bias": {"7": 1.5}, "presence_penalty": 0.1, "frequency_penalty": 0.1, "repetition_penalty": 1.1,
    "response_format": {"type": "text"}, "stream_options": {"include_usage": True}, "user": "u",
    "tools": [TOOL], "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
        {"role": "assistant", "content": "", "reasoning_content": "look it up",
         "tool_calls": [{"id": "call_1", "type": "function",
                         "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        {"role": "user", "content": "thanks"},
    ],
}
COMPLETION = {"model": MODEL_NAME, "prompt": ["Hello", [1, 2, 3]], "max_tokens": 1, "echo": True, "logprobs": 2,
              "prompt_logprobs": 1, "stop": "x", "seed": 1, "n": 1, "best_of": 1, "suffix": "",
              "return_tokens_as_token_ids": False, "ignore_eos": False, "min_tokens": 0}
MESSAGES = {
    "model": MODEL_NAME, "max_tokens": 1, "temperature": 0.5, "top_p": 0.9, "top_k": 5,
    "stop_sequences": ["\n\n"], "system": [{"type": "text", "text": "Be brief."}],
    "tools": [{"name": "get_weather", "description": "Weather", "input_schema": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}],
    "tool_choice": {"type": "tool", "name": "get_weather"},
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
        # (No thinking block: one must carry this server's signature of its text, a per-server
        # random key; test_replay_tools.py checks them.)
        {"role": "assistant", "content": [
            {"type": "redacted_thinking", "data": "x"},
            {"type": "text", "text": "checking"},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": False,
             "content": [{"type": "text", "text": "sunny"}]},
            {"type": "text", "text": "thanks"}]},
    ],
}
COUNT = {k: v for k, v in MESSAGES.items() if k != "max_tokens"}
RESPONSES = {
    "model": MODEL_NAME, "max_output_tokens": 1, "temperature": 0.5, "top_p": 0.9, "instructions": "Be brief.",
    "store": False, "metadata": {"k": "v"}, "reasoning": {"effort": "low", "summary": "auto"},
    "text": {"format": {"type": "text"}}, "include": ["reasoning.encrypted_content"], "truncation": "disabled",
    "tools": [{"type": "function", "name": "get_weather", "description": "Weather", "strict": False,
               "parameters": TOOL["function"]["parameters"]}],
    "tool_choice": {"type": "function", "name": "get_weather"}, "parallel_tool_calls": True,
    "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "s"}],
         "content": [{"type": "reasoning_text", "text": "look it up"}]},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\": \"Paris\"}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
        {"type": "message", "role": "user", "content": "thanks"},
    ],
}
TOKENIZE_CHAT = {"model": MODEL_NAME, "messages": CHAT["messages"], "add_special_tokens": False,
                 "return_token_strs": True}
TOKENIZE_PROMPT = {"model": MODEL_NAME, "prompt": "Hello there", "add_special_tokens": True}
DETOKENIZE = {"model": MODEL_NAME, "tokens": [1, 2, 3]}

SEEDS = [("/v1/chat/completions", CHAT), ("/v1/completions", COMPLETION), ("/v1/messages", MESSAGES),
         ("/v1/messages/count_tokens", COUNT), ("/v1/responses", RESPONSES), ("/tokenize", TOKENIZE_CHAT), ("/tokenize", TOKENIZE_PROMPT),
         ("/detokenize", DETOKENIZE)]
# One value of every JSON type (two numbers: an integer and a fraction).
REPLACEMENTS = [7, -2.5, "s", True, None, [], {}, [{"type": 5}]]


def paths(value, prefix=()):
    """Every path to a value inside `value` (the root excluded)."""
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return
    for key, child in items:
        yield prefix + (key,)
        yield from paths(child, prefix + (key,))


def replaced(body, path, new):
    out = copy.deepcopy(body)
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = new
    return out


def mutations(body):
    for path in paths(body):
        if path == ("model",):
            continue  # a wrong model is a 404 by design
        for new in REPLACEMENTS:
            yield path, replaced(body, path, new)


def check(client, route, path, body):
    r = client.post(route, content=json.dumps(body))
    where = f"{route} {'.'.join(map(str, path))} = {json.dumps(body)[:300]}"
    assert r.status_code < 500, (where, r.status_code, r.text[:500])
    text = r.text
    for leak in ("json.exception", "[json.", "type_error", "out_of_range", MODEL):
        assert leak not in text, (where, leak, text[:500])
    return r


@pytest.mark.parametrize("route,seed", SEEDS, ids=[f"{r}:{i}" for i, (r, _) in enumerate(SEEDS)])
def test_typed_fields_never_give_500(server, route, seed):
    with httpx.Client(base_url=server.url, timeout=60, headers={"content-type": "application/json"}) as client:
        assert check(client, route, (), seed).status_code == 200, route
        statuses = {}
        for path, body in mutations(seed):
            r = check(client, route, path, body)
            statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
        assert statuses.get(400, 0) > 0, statuses  # the mutations do reach the validation
    assert httpx.get(server.url + "/health").status_code == 200


def test_streamed_mutations_never_give_500(server):
    """The same for the streamed routes, on a smaller set: an error after the stream began is an event."""
    with httpx.Client(base_url=server.url, timeout=60) as client:
        for route, seed in (("/v1/chat/completions", CHAT), ("/v1/messages", MESSAGES),
                            ("/v1/responses", RESPONSES)):
            seed = {**seed, "stream": True}
            for path, body in mutations(seed):
                if len(path) > 2:
                    continue
                check(client, route, path, body)
