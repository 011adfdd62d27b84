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


def stalled_stream(server, body):
    """A streaming request on a socket whose client never reads (a small receive window)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", server.port))
    data = json.dumps(body).encode()
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data)
    return s


# Every token's chunk carries 20 alternatives: kilobytes a token, so a
# client that does not read fills the socket's buffers within a few tokens.
BIG_STREAM = {"model": MODEL_NAME, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2000,
              "ignore_eos": True, "stream": True, "logprobs": True, "top_logprobs": 20}


def test_a_client_that_stops_reading_pauses_its_stream_then_loses_it():
    s = ServerProcess("--max-stream-buffer-bytes", "16384", "--stream-stall-timeout", "3")
    try:
        socks = [stalled_stream(s, BIG_STREAM) for _ in range(20)]
        rss0 = s.rss_bytes()
        assert wait_for(lambda: s.metric("m2cpp:num_requests_paused") == 20, timeout=30), s.log_text()[-2000:]
        tokens = s.metric("m2cpp:generation_tokens_total")
        time.sleep(0.5)
        assert s.metric("m2cpp:generation_tokens_total") == tokens  # nothing generated while paused
        assert tokens < 20 * 2000
        start = time.time()
        assert httpx.get(s.url + "/health").status_code == 200
        assert time.time() - start < 0.5
        # Bounded: 20 x 16 KiB of buffers (plus what was in flight), not the whole streams.
        assert s.rss_bytes() - rss0 < 32 << 20, (rss0, s.rss_bytes())
        # Past the stall timeout the connections close and the KV blocks return.
        assert wait_for(lambda: s.metric("m2cpp:kv_cache_blocks_used") == 0, timeout=30)
        assert s.metric("m2cpp:num_requests_paused") == 0 and s.metric("m2cpp:num_requests_running") == 0
        assert "took more than 3000 ms to read" in s.log_text()
        assert len([r for r in s.access_records() if r["status"] == 499]) == 20
        for sock in socks:
            sock.close()
    finally:
        assert s.stop() == 0


def test_a_paused_stream_resumes_when_its_client_reads():
    s = ServerProcess("--max-stream-buffer-bytes", "16384", "--stream-stall-timeout", "30")
    try:
        sock = stalled_stream(s, {**BIG_STREAM, "max_tokens": 1800})
        assert wait_for(lambda: s.metric("m2cpp:num_requests_paused") == 1, timeout=30)
        sock.settimeout(30)
        out = b""
        while not out.endswith(b"data: [DONE]\n\n\r\n0\r\n\r\n"):
            chunk = sock.recv(1 << 20)
            assert chunk, out[-300:]
            out += chunk
        sock.close()
        assert out.count(b'"finish_reason":"length"') == 1
        assert wait_for(lambda: s.metric("m2cpp:kv_cache_blocks_used") == 0)
        rec = wait_for(lambda: [r for r in s.access_records() if r["path"] == "/v1/chat/completions"])
        assert rec[0]["status"] == 200 and rec[0]["completion_tokens"] == 1800, rec
    finally:
        assert s.stop() == 0


def limit_fds(soft, hard):
    import resource
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_the_fd_limit_is_raised_and_caps_the_connections():
    import resource
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard > 256:
        s = ServerProcess(preexec_fn=limit_fds(256, hard))
        try:
            assert "file descriptor limit raised from 256 to" in s.log_text()
        finally:
            assert s.stop() == 0
    # A hard limit of 200: 150 connections (50 kept for the model's files and logs).
    s = ServerProcess(preexec_fn=limit_fds(200, 200))
    try:
        assert "--max-connections 1024 does not fit the file descriptor limit 200 (hard limit 200): at most 150" \
            in s.log_text()
        held = [socket.create_connection(("127.0.0.1", s.port)) for _ in range(150)]
        time.sleep(0.5)
        cpu = s.cpu_seconds()
        start = time.time()
        r = httpx.get(s.url + "/health", timeout=5)
        assert r.status_code == 503 and r.headers["retry-after"] == "1", r.text
        assert time.time() - start < 0.5
        time.sleep(0.5)
        assert s.cpu_seconds() - cpu < 0.2  # full, and idle: no loop spinning over the listening socket
        assert "connection limit reached (150 open, --max-connections 150)" in s.log_text()
        for sock in held:
            sock.close()
        assert wait_for(lambda: httpx.get(s.url + "/health").status_code == 200)
    finally:
        assert s.stop() == 0


def test_huge_prompts_do_not_stall_other_routes(server):
    """Parsing, templating and tokenizing run on the request threads: three
    31 MB prompts take seconds of CPU there while /health answers at once."""
    import concurrent.futures
    big = json.dumps({"model": MODEL_NAME, "max_tokens": 1,
                      "messages": [{"role": "user", "content": "lorem ipsum dolor " * (31 * 2 ** 20 // 18)}]})
    assert 30 << 20 < len(big) < 32 << 20

    def post():
        start = time.time()
        r = httpx.post(server.url + "/v1/chat/completions", content=big,
                       headers={"content-type": "application/json"}, timeout=120)
        return r.status_code, r.text, time.time() - start

    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        futures = [pool.submit(post) for _ in range(3)]
        latencies = []
        with httpx.Client(base_url=server.url, timeout=10) as c:
            while not all(f.done() for f in futures):
                start = time.time()
                assert c.get("/health").status_code == 200
                latencies.append(time.time() - start)
                time.sleep(0.02)
        results = [f.result() for f in futures]
    for status, text, _ in results:
        assert status == 400 and "maximum context length" in text, (status, text[:300])
    slowest = max(t for _, _, t in results)
    assert len(latencies) >= 5 and slowest > 0.5, (latencies, slowest)  # the load lasted
    # On the I/O threads (before) it was 2 s; a loaded 2-core CI machine stays well under this.
    assert max(latencies) < 0.5, (max(latencies), slowest)


def test_a_full_request_queue_answers_503():
    import concurrent.futures
    s = ServerProcess("--request-threads", "1", "--request-queue", "1")
    try:
        big = json.dumps({"model": MODEL_NAME, "max_tokens": 1,
                          "messages": [{"role": "user", "content": "lorem ipsum " * (1 << 20)}]})

        def post():
            return httpx.post(s.url + "/v1/chat/completions", content=big,
                              headers={"content-type": "application/json"}, timeout=120)

        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            responses = list(pool.map(lambda _: post(), range(6)))
        busy = [r for r in responses if r.status_code == 503]
        assert busy and all(r.status_code in (400, 503) for r in responses), [r.status_code for r in responses]
        assert "busy" in busy[0].json()["error"]["message"] and busy[0].headers["retry-after"] == "1"
        assert httpx.get(s.url + "/health").status_code == 200
    finally:
        assert s.stop() == 0


def test_the_idle_timeout_and_the_head_limit_are_flags():
    s = ServerProcess("--idle-timeout", "1", "--max-header-bytes", "4096")
    try:
        # A head over 4096 bytes: 431 naming the limit; one under it is served.
        big = b"GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 5000 + b"\r\n\r\n"
        out = raw(s, big)
        assert out.startswith(b"HTTP/1.1 431") and b"4096 bytes" in out, out[:300]
        ok = raw(s, b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Pad: " + b"a" * 3000 + b"\r\n\r\n")
        assert ok.startswith(b"HTTP/1.1 200"), ok[:300]
        # An idle connection is closed after about a second, not 75.
        start = time.time()
        with socket.create_connection(("127.0.0.1", s.port), timeout=10) as c:
            assert c.recv(1) == b""
        assert 0.5 < time.time() - start < 5
    finally:
        assert s.stop() == 0


def test_paused_then_dropped_streams_leave_rss_flat():
    """Rounds of streams paused by backpressure and dropped at the stall
    timeout: RSS stays flat. (It used to creep up ~0.85 MiB a stream: not a
    leak, the KV pool's pages touched for the first time by each new
    sequence's blocks; the CPU backend now touches its memory when it
    allocates it.)"""
    s = ServerProcess("--max-stream-buffer-bytes", "16384", "--stream-stall-timeout", "1")
    try:
        rss = []
        for _ in range(4):
            socks = [stalled_stream(s, BIG_STREAM) for _ in range(10)]
            assert wait_for(lambda: s.metric("m2cpp:kv_cache_blocks_used") == 0
                            and s.metric("m2cpp:num_requests_running") == 0
                            and s.metric("m2cpp:num_requests_paused") == 0, timeout=60), s.log_text()[-2000:]
            for k in socks:
                k.close()
            time.sleep(0.3)
            rss.append(s.rss_bytes())
        # Before the fix: +8.5 MiB a round of 10, no plateau within the 256 MiB pool.
        assert rss[-1] - rss[1] < 3 << 20, [r >> 10 for r in rss]
    finally:
        assert s.stop() == 0
