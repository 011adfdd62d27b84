"""Operations, errors and limits of `m2cpp serve`: health, Prometheus
metrics, access logs, authentication, 400/404/413/429/503 errors, client
disconnects freeing their KV blocks, graceful shutdown, hostile input, and
many concurrent streams. Raw httpx only where the SDKs cannot express the
request (malformed JSON, oversized bodies, dropped connections, metrics).

The generation speed that some tests need is set by `--step-delay-ms`
(a test-only pause after each engine step), never by timing assertions."""
import concurrent.futures
import json
import signal
import socket
import threading
import time

import anthropic
import httpx
import openai
import pytest

from live_server import MODEL_NAME, ServerProcess, wait_for

MESSAGES = [{"role": "user", "content": "Hello"}]
LONG = {"max_tokens": 2000, "ignore_eos": True}


def chat_body(**kw):
    return {"model": MODEL_NAME, "messages": MESSAGES, **kw}


# ---- health, metrics, access log ------------------------------------------------------------------------

def test_health_and_version(server):
    assert httpx.get(server.url + "/health").status_code == 200
    assert httpx.get(server.url + "/version").json()["version"]


def test_metrics(server, openai_client):
    for _ in range(2):  # the same prompt twice: the second finds it in the prefix cache
        openai_client.chat.completions.create(model=MODEL_NAME, messages=[{"role": "user", "content": "x " * 100}],
                                              max_tokens=3)
    text = httpx.get(server.url + "/metrics").text
    for name in ("m2cpp:http_requests_total", "m2cpp:prompt_tokens_total", "m2cpp:generation_tokens_total",
                 "m2cpp:time_to_first_token_seconds_bucket", "m2cpp:time_per_output_token_seconds_count",
                 "m2cpp:e2e_request_latency_seconds_sum", "m2cpp:num_requests_running",
                 "m2cpp:num_requests_waiting", "m2cpp:kv_cache_blocks_used", "m2cpp:kv_cache_usage_perc",
                 "m2cpp:prefix_cache_queries_total", "m2cpp:prefix_cache_hits_total"):
        assert name in text, name
    assert server.metric("m2cpp:http_requests_total", {"route": "/v1/chat/completions", "status": "200"}) >= 2
    assert server.metric("m2cpp:prefix_cache_hits_total") > 0
    assert server.metric("m2cpp:generation_tokens_total") >= 6
    assert server.metric("m2cpp:e2e_request_latency_seconds_count") >= 2
    assert server.metric("m2cpp:kv_cache_blocks_used") == 0  # idle: every block released


def test_access_log_is_json(server, openai_client):
    openai_client.chat.completions.create(model=MODEL_NAME, messages=MESSAGES, max_tokens=2)
    records = wait_for(lambda: [r for r in server.access_records() if r["path"] == "/v1/chat/completions"])
    r = records[-1]
    assert r["status"] == 200 and r["method"] == "POST" and r["request_id"].startswith("chatcmpl-")
    assert r["prompt_tokens"] > 0 and r["completion_tokens"] <= 2 and "duration_ms" in r


# ---- errors --------------------------------------------------------------------------------------------

def test_malformed_requests_get_400(server):
    post = lambda path, content: httpx.post(server.url + path, content=content,
                                            headers={"content-type": "application/json"})
    r = post("/v1/chat/completions", b'{"model": "m2-tiny-chat", "messages": [')
    assert r.status_code == 400
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["type"] == "invalid_request_error"
    assert "invalid JSON" in err["message"]
    for body, needle in [
        (chat_body(messages="hi"), "messages"),
        (chat_body(messages=[{"role": "user", "content": 5}]), "content"),
        (chat_body(max_tokens="ten"), "max_tokens"),
        (chat_body(n=0), "'n'"),
        (chat_body(top_p=2), "top_p"),
        (chat_body(logit_bias={"abc": 1}), "logit_bias"),
        (chat_body(tools=[{"type": "function"}]), "tools[0]"),
        (chat_body(tool_choice="required"), "tool_choice"),
        (chat_body(tools=[{"type": "function", "function": {"name": "f"}}],
                   tool_choice={"type": "function", "function": {"name": "g"}}), "'g'"),
        ({"model": MODEL_NAME, "prompt": [1, "x"]}, "prompt"),
        ({"model": MODEL_NAME, "prompt": [99999]}, "vocabulary"),
    ]:
        path = "/v1/completions" if "prompt" in body else "/v1/chat/completions"
        r = httpx.post(server.url + path, json=body)
        assert r.status_code == 400, (body, r.text)
        assert needle in r.json()["error"]["message"], (needle, r.text)


def test_prompt_too_long(openai_client):
    with pytest.raises(openai.BadRequestError) as e:
        openai_client.chat.completions.create(model=MODEL_NAME, messages=[{"role": "user", "content": "a b " * 1500}])
    msg = e.value.message
    assert "maximum context length is 2048 tokens" in msg and "your prompt is" in msg
    with pytest.raises(openai.BadRequestError) as e:
        openai_client.chat.completions.create(model=MODEL_NAME, messages=MESSAGES, max_tokens=5000)
    assert "2048" in e.value.message and "5000" in e.value.message


def test_unknown_route_and_model(server, openai_client):
    r = httpx.get(server.url + "/v2/nothing")
    assert r.status_code == 404 and r.json()["error"]["type"] == "not_found_error"
    with pytest.raises(openai.NotFoundError) as e:
        openai_client.completions.create(model="gpt-5", prompt="x", max_tokens=1)
    assert e.value.body["code"] == "model_not_found"
    assert httpx.get(server.url + "/v1/models/other").status_code == 404


def test_hostile_input_never_crashes(server):
    bodies = [b"", b"null", b"[]", b"123", b'"str"', b"\xff\xfe\x00", b"[" * 100000 + b"]" * 100000,
              b'{"messages": [{"role": "user", "content": "\xc3"}]}',
              json.dumps(chat_body(messages=[{"role": "user", "content": [{"type": "text"}]}])).encode(),
              json.dumps(chat_body(messages=[{"role": "tool", "content": "x"}])).encode(),
              json.dumps(chat_body(messages=[{"role": "assistant", "tool_calls": [{"function": {
                  "name": "f", "arguments": "{not json"}}]}])).encode(),
              json.dumps(chat_body(stop=[""])).encode(), json.dumps(chat_body(seed=-1, max_tokens=1)).encode(),
              json.dumps(chat_body(seed=2 ** 70)).encode(), json.dumps(chat_body(temperature=1e308, max_tokens=2)).encode(),
              json.dumps({"model": MODEL_NAME, "max_tokens": 1, "messages": [{"role": "user", "content": [
                  {"type": "tool_result"}]}]}).encode()]
    for path in ("/v1/chat/completions", "/v1/completions", "/v1/messages", "/v1/messages/count_tokens",
                 "/tokenize", "/detokenize"):
        for b in bodies:
            r = httpx.post(server.url + path, content=b, timeout=30)
            assert 200 <= r.status_code < 500, (path, b[:80], r.status_code, r.text)
    # broken HTTP on a raw socket
    for raw in (b"GARBAGE\r\n\r\n", b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 99999999999999\r\n\r\n",
                b"GET / HTTP/1.1\r\n" + b"X: " + b"a" * 100000 + b"\r\n\r\n"):
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
            s.sendall(raw)
            s.recv(1024)
    assert httpx.get(server.url + "/health").status_code == 200


# ---- authentication ---------------------------------------------------------------------------------------

def test_api_key():
    s = ServerProcess("--api-key", "sekrit-key")
    try:
        bad = openai.OpenAI(base_url=s.url + "/v1", api_key="wrong", max_retries=0)
        with pytest.raises(openai.AuthenticationError) as e:
            bad.chat.completions.create(model=MODEL_NAME, messages=MESSAGES, max_tokens=1)
        assert e.value.body["type"] == "authentication_error"
        good = openai.OpenAI(base_url=s.url + "/v1", api_key="sekrit-key", max_retries=0)
        assert good.chat.completions.create(model=MODEL_NAME, messages=MESSAGES, max_tokens=1).usage
        # Anthropic clients send x-api-key
        with pytest.raises(anthropic.AuthenticationError) as e:
            anthropic.Anthropic(base_url=s.url, api_key="sekrit-kez", max_retries=0).messages.create(
                model=MODEL_NAME, max_tokens=1, messages=MESSAGES)
        assert e.value.body["error"]["type"] == "authentication_error"
        m = anthropic.Anthropic(base_url=s.url, api_key="sekrit-key", max_retries=0).messages.create(
            model=MODEL_NAME, max_tokens=1, messages=MESSAGES)
        assert m.usage.output_tokens == 1
        assert httpx.post(s.url + "/tokenize", json={"prompt": "x"}).status_code == 401
        assert httpx.get(s.url + "/health").status_code == 200  # probes need no key
        assert httpx.get(s.url + "/metrics").status_code == 200
    finally:
        assert s.stop() == 0


def test_oversized_body_gets_413():
    s = ServerProcess("--max-request-body-bytes", "4096")
    try:
        big = chat_body(messages=[{"role": "user", "content": "x" * 10000}])
        with pytest.raises(openai.APIStatusError) as e:
            openai.OpenAI(base_url=s.url + "/v1", api_key="x", max_retries=0).chat.completions.create(**big)
        assert e.value.status_code == 413
        r = httpx.post(s.url + "/v1/messages", json={**big, "max_tokens": 1})
        assert r.status_code == 413 and r.json()["error"]["type"] == "request_too_large"
        assert httpx.get(s.url + "/health").status_code == 200
    finally:
        assert s.stop() == 0


# ---- queueing, disconnects, shutdown ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def slow_server():
    # One running sequence, one waiting; ~2 ms per step.
    s = ServerProcess("--max-num-seqs", "1", "--max-waiting", "1", "--step-delay-ms", "2")
    yield s
    assert s.stop() == 0


def open_stream(url, body):
    """Starts a streaming request and returns (client, response) once its first event arrived."""
    client = httpx.Client(timeout=60)
    req = client.build_request("POST", url + "/v1/chat/completions", json={**body, "stream": True})
    resp = client.send(req, stream=True)
    lines = resp.iter_lines()
    first = next(line for line in lines if line.startswith("data: "))
    assert "chat.completion.chunk" in first
    return client, resp, lines


def test_queue_full_gets_429_with_retry_after(slow_server):
    s = slow_server
    # (the line iterators are kept: dropping one closes its connection)
    a_client, a_resp, a_lines = open_stream(s.url, chat_body(**LONG))  # running
    b_client, b_resp, b_lines = open_stream(s.url, chat_body(**LONG))  # waiting (its headers are sent at admission)
    assert wait_for(lambda: s.metric("m2cpp:num_requests_waiting") == 1)
    with pytest.raises(openai.RateLimitError) as e:
        openai.OpenAI(base_url=s.url + "/v1", api_key="x", max_retries=0).chat.completions.create(
            model=MODEL_NAME, messages=MESSAGES, max_tokens=1)
    assert e.value.response.headers["retry-after"] == "1"
    r = httpx.post(s.url + "/v1/messages", json={"model": MODEL_NAME, "max_tokens": 1, "messages": MESSAGES})
    assert r.status_code == 429 and r.json()["error"]["type"] == "rate_limit_error" and r.headers["retry-after"]
    for c, resp in ((a_client, a_resp), (b_client, b_resp)):
        resp.close()
        c.close()
    assert wait_for(lambda: s.metric("m2cpp:num_requests_running") == 0 and
                    s.metric("m2cpp:num_requests_waiting") == 0)


def test_disconnect_cancels_and_frees_kv(slow_server):
    s = slow_server
    before = s.metric("m2cpp:http_requests_total", {"route": "/v1/chat/completions", "status": "499"}) or 0
    client, resp, lines = open_stream(s.url, chat_body(**LONG))
    for _ in range(3):
        next(lines)
    assert s.metric("m2cpp:kv_cache_blocks_used") > 0
    resp.close()
    client.close()
    assert wait_for(lambda: s.metric("m2cpp:kv_cache_blocks_used") == 0)
    assert s.metric("m2cpp:num_requests_running") == 0
    assert wait_for(lambda: (s.metric("m2cpp:http_requests_total",
                                      {"route": "/v1/chat/completions", "status": "499"}) or 0) == before + 1)
    # Also a non-streaming request whose client gives up.
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(s.url + "/v1/completions", json={"model": MODEL_NAME, "prompt": "x", **LONG}, timeout=0.3)
    assert wait_for(lambda: s.metric("m2cpp:kv_cache_blocks_used") == 0 and
                    s.metric("m2cpp:num_requests_running") == 0)


def test_graceful_shutdown_finishes_running_streams():
    s = ServerProcess("--step-delay-ms", "2")
    keep = httpx.Client(timeout=30)  # a keep-alive connection opened before the signal
    assert keep.get(s.url + "/health").status_code == 200
    client, resp, lines = open_stream(s.url, chat_body(max_tokens=300, ignore_eos=True))
    s.proc.send_signal(signal.SIGTERM)
    # While the running stream finishes, new requests get 503 + Retry-After.
    assert wait_for(lambda: keep.get(s.url + "/health").status_code == 503)
    r = keep.post(s.url + "/v1/chat/completions", json=chat_body(max_tokens=1))
    assert r.status_code == 503 and r.headers["retry-after"] == "1"
    events = [line for line in lines if line.startswith("data: ")]
    assert events[-1] == "data: [DONE]"
    finish = [json.loads(e[6:])["choices"][0].get("finish_reason") for e in events[:-1]]
    assert "length" in finish
    resp.close()
    client.close()
    keep.close()
    assert s.proc.wait(timeout=30) == 0


def test_shutdown_cancels_past_the_grace_period():
    s = ServerProcess("--step-delay-ms", "5", "--shutdown-timeout", "0.2")
    client, resp, lines = open_stream(s.url, chat_body(**LONG))
    s.proc.send_signal(signal.SIGTERM)
    events = [line for line in lines if line.startswith("data: ")]
    assert events[-1] == "data: [DONE]"
    err = json.loads(events[-2][6:])
    assert "shutting down" in err["error"]["message"]
    resp.close()
    client.close()
    assert s.proc.wait(timeout=30) == 0


# ---- concurrency --------------------------------------------------------------------------------------------

def test_many_concurrent_streams(server):
    def one(i):
        body = {"model": MODEL_NAME, "messages": [{"role": "user", "content": f"req {i}"}], "max_tokens": 16,
                "ignore_eos": True, "stream": True, "seed": i}
        n = 0
        with httpx.stream("POST", server.url + "/v1/chat/completions", json=body, timeout=120) as r:
            assert r.status_code == 200
            for line in r.iter_lines():
                n += line.startswith("data: ")
        return n

    with concurrent.futures.ThreadPoolExecutor(max_workers=64) as pool:
        counts = list(pool.map(one, range(96)))
    assert all(c >= 3 for c in counts)
    assert wait_for(lambda: server.metric("m2cpp:kv_cache_blocks_used") == 0)
