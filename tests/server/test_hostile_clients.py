"""`m2cpp serve` under hostile clients (issue 23), on a live server: request
smuggling through Transfer-Encoding, junk-path floods against /metrics, no
server paths in what clients see, tokens of disconnected requests counted.
Raw sockets where an HTTP client library would refuse to send the bytes."""
import json
import socket
import time

import httpx

from live_server import MODEL, MODEL_NAME, ServerProcess, wait_for


def raw(server, data, timeout=10):
    """Sends bytes on a fresh connection; returns everything until the server closes it."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=timeout) as s:
        s.sendall(data)
        out = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return out
            out += chunk


def test_transfer_encoding_smuggling_is_refused(server):
    inner = b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"
    for te, status in ((b"gzip", b"400"), (b"identity", b"400"), (b"chunked, gzip", b"400"),
                       (b"gzip, chunked", b"501")):
        body = b"2\r\n{}\r\n0\r\n\r\n" if te.endswith(b"chunked") else b""
        out = raw(server, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                          b"Transfer-Encoding: " + te + b"\r\n\r\n" + body + inner)
        assert out.startswith(b"HTTP/1.1 " + status), (te, out[:200])
        assert out.count(b"HTTP/1.1 ") == 1, (te, out)  # the inner request was not served
        assert b"Connection: close" in out
    # Both lengths: refused, whichever comes first.
    out = raw(server, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n"
                      b"Transfer-Encoding: gzip\r\n\r\n{}\r\n" + inner)
    assert out.startswith(b"HTTP/1.1 400") and out.count(b"HTTP/1.1 ") == 1, out
    # HTTP/1.1 without Host, and HTTP/1.0 clients get no chunked stream.
    assert raw(server, b"GET /health HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 400")
    body = json.dumps({"model": MODEL_NAME, "prompt": "Hi", "max_tokens": 3, "stream": True}).encode()
    out = raw(server, b"POST /v1/completions HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: "
                      + str(len(body)).encode() + b"\r\n\r\n" + body)
    head, _, rest = out.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and b"Transfer-Encoding" not in head, head
    assert rest.startswith(b"data: ") and rest.endswith(b"data: [DONE]\n\n"), rest[-200:]
    assert httpx.get(server.url + "/health").status_code == 200


def test_junk_paths_do_not_grow_metrics(server):
    before = len(httpx.get(server.url + "/metrics").text)
    with httpx.Client(base_url=server.url) as c:
        for i in range(2000):
            assert c.get(f"/junk/{i}/{'x' * 50}").status_code == 404
    text = httpx.get(server.url + "/metrics").text
    assert len(text) < before + 200, (before, len(text))
    assert "junk" not in text
    assert server.metric("m2cpp:http_requests_total", {"route": "other", "status": "404"}) >= 2000


def test_no_server_paths_reach_clients(server):
    card = httpx.get(server.url + "/v1/models").json()["data"][0]
    assert card["root"] == "m2-tiny-chat", card
    # A chat template error (a tool message with no tool call before it) names the template, not the path.
    r = httpx.post(server.url + "/v1/chat/completions", json={"model": MODEL_NAME, "messages": [
        {"role": "tool", "tool_call_id": "x", "content": "y"}]})
    assert r.status_code == 400, r.text
    assert MODEL not in r.text and "tokenizer_config.json" in r.text, r.text


def test_tokens_of_disconnected_requests_are_counted():
    s = ServerProcess("--step-delay-ms", "5")
    try:
        before = s.metric("m2cpp:generation_tokens_total") or 0
        prompt_before = s.metric("m2cpp:prompt_tokens_total") or 0
        body = {"model": MODEL_NAME, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2000,
                "ignore_eos": True, "stream": True}
        with httpx.Client(timeout=60) as client:
            with client.stream("POST", s.url + "/v1/chat/completions", json=body) as resp:
                n = 0
                for line in resp.iter_lines():
                    n += line.startswith("data: ")
                    if n == 12:
                        break
        rec = wait_for(lambda: [r for r in s.access_records() if r["status"] == 499])
        assert rec, s.log_text()[-2000:]
        assert rec[0]["completion_tokens"] >= 10 and rec[0]["prompt_tokens"] > 0, rec
        assert wait_for(lambda: s.metric("m2cpp:kv_cache_blocks_used") == 0)
        assert s.metric("m2cpp:generation_tokens_total") - before >= rec[0]["completion_tokens"]
        assert s.metric("m2cpp:prompt_tokens_total") - prompt_before == rec[0]["prompt_tokens"]
    finally:
        assert s.stop() == 0
