"""One abuse run against one live `m2cpp serve` (issue 23 point 4), with the
file-descriptor limit lowered to 256 (soft and hard, so the server cannot
raise it): smuggling variants, header floods, slow readers, fd exhaustion,
junk-path floods, request bodies past the in-flight budget and random
disconnects, overlapping, twice. Throughout, /health (polled from another
process on a connection opened before the run) answers 200 in under 100 ms;
after each round memory, descriptors and KV blocks return to idle, and the
second round does not grow the server's memory past the first (a leak per
request would). test_hostile_clients.py checks each behaviour alone; this
file checks that together they leave nothing behind. Also the per-client
rate limit (--rate-limit), which the run leaves off."""
import json
import multiprocessing
import os
import random
import re
import socket
import threading
import time

import httpx

from live_server import MODEL_NAME, ServerProcess, wait_for

FD_LIMIT = 256


# glibc keeps freed memory for reuse, and after a large block is freed it
# raises its mmap threshold so that later large blocks come from arenas it
# rarely returns: the RSS after 3 MiB bodies would stay high without a leak.
# Fixed thresholds make freed memory go back to the system, so that RSS
# tracks what the server holds.
MALLOC_RETURNS_MEMORY = {"MALLOC_MMAP_THRESHOLD_": "131072", "MALLOC_TRIM_THRESHOLD_": "131072",
                         "MALLOC_ARENA_MAX": "4"}


def limit_fds():
    import resource
    resource.setrlimit(resource.RLIMIT_NOFILE, (FD_LIMIT, FD_LIMIT))


def open_fds(server):
    return len(os.listdir(f"/proc/{server.proc.pid}/fd"))


def monitor_health(url, stop, worst, failures):
    """In its own process (no GIL shared with the flood): /health every 20 ms."""
    with httpx.Client(base_url=url, timeout=5) as c:
        while not stop.is_set():
            start = time.monotonic()
            try:
                ok = c.get("/health").status_code == 200
            except httpx.HTTPError:
                ok = False
            took = time.monotonic() - start
            with worst.get_lock():
                worst.value = max(worst.value, took)
            if not ok:
                with failures.get_lock():
                    failures.value += 1
            time.sleep(0.02)


def send(port, data, timeout=10, read=True):
    """Bytes on a fresh connection; everything until the server closes it."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        out = b""
        while read:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not chunk:
                break
            out += chunk
        return out


INNER = b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"
SMUGGLING = [
    b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n" + INNER,
    b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n" + INNER,
    b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"0\r\n\r\n" + INNER,
    b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"0\r\n\r\n" + INNER,
    b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nContent-Length: 40\r\n\r\n{}{}" + INNER,
    b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: +4\r\n\r\n{}{}" + INNER,
    b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length : 4\r\n\r\n{}{}" + INNER,
    b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"fffffffffffffffffff\r\n" + INNER,
    b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n , gzip\r\n\r\n0\r\n\r\n" + INNER,
    b"POST /v1/completions HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + INNER,
    b"GET /health HTTP/1.1\r\n\r\n" + INNER,
    b"GET /health HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n" + INNER,
]


def smuggling(port):
    for data in SMUGGLING:
        out = send(port, data)
        assert out.startswith(b"HTTP/1.1 4") or out.startswith(b"HTTP/1.1 5"), (data, out[:200])
        assert len(re.findall(rb"HTTP/1\.1 \d{3} ", out)) == 1, (data, out)  # the inner request was never served


def header_floods(port):
    big = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (70 << 10) + b"\r\n\r\n"
    many = b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: v\r\n" % i for i in range(12000)) + b"\r\n"
    for data in (big, many):
        assert send(port, data).startswith(b"HTTP/1.1 431")


def slow_readers(port, n=10):
    """Streams whose clients never read: paused, then closed by the stall timeout."""
    body = json.dumps({"model": MODEL_NAME, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2000,
                       "ignore_eos": True, "stream": True, "logprobs": True, "top_logprobs": 20}).encode()
    socks = []
    for _ in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", port))
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        socks.append(s)
    return socks


def exhaust_fds(port, n=FD_LIMIT + 40):
    """More connections than the server may hold, for a second: the ones past its cap get 503 and are closed."""
    held, refused = [], 0
    for _ in range(n):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError:
            refused += 1
            continue
        held.append(s)
    time.sleep(0.3)
    for s in held:
        s.setblocking(False)
        try:
            refused += s.recv(64).startswith(b"HTTP/1.1 503")
        except (BlockingIOError, ConnectionResetError):
            pass
    time.sleep(0.7)
    for s in held:
        s.close()
    assert refused > 0, "no connection was refused past the cap"


def junk_paths(url, n=1500):
    # 503: a (re)connection while exhaust_fds holds every slot; retried after 10 ms.
    statuses, deadline = [], time.time() + 60
    with httpx.Client(base_url=url, timeout=10) as c:
        while statuses.count(404) < n and time.time() < deadline:
            statuses.append(c.get(f"/junk/{len(statuses)}/{'x' * 40}").status_code)
            if statuses[-1] == 503:
                time.sleep(0.01)
    assert set(statuses) <= {404, 503} and statuses.count(404) == n, sorted(set(statuses))


def large_bodies(url, n=6):
    """Bodies of 3 MiB at once against a budget of 8 MiB in flight: some get 503 + Retry-After."""
    body = json.dumps({"model": MODEL_NAME, "max_tokens": 1,
                       "messages": [{"role": "user", "content": "lorem " * ((3 << 20) // 6)}]})
    statuses = []

    def post():
        try:
            r = httpx.post(url + "/v1/chat/completions", content=body, timeout=60,
                           headers={"content-type": "application/json"})
            statuses.append((r.status_code, r.headers.get("retry-after")))
        except httpx.HTTPError:
            statuses.append((0, None))  # refused mid-upload: the server closed the connection
    threads = [threading.Thread(target=post) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(s in (0, 400, 503) for s, _ in statuses), statuses
    assert all(ra == "1" for s, ra in statuses if s == 503), statuses
    return statuses


def random_disconnects(port, rng, n=30):
    body = json.dumps({"model": MODEL_NAME, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 500,
                       "ignore_eos": True, "stream": True}).encode()
    request = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        cut = rng.choice([rng.randrange(1, len(request)), len(request)])
        s.sendall(request[:cut])
        if cut == len(request):
            try:
                s.recv(rng.randrange(1, 4096))  # mid-stream
            except socket.timeout:
                pass
        if rng.random() < 0.5:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # reset
        s.close()


def abuse_round(server, rng):
    port, url = server.port, server.url
    errors = []

    def run(fn, *args):
        try:
            return fn(*args)
        except Exception as e:  # collected: a failure in a thread must fail the test
            errors.append(f"{fn.__name__}: {e!r}")

    stalled = slow_readers(port)
    assert wait_for(lambda: server.metric("m2cpp:num_requests_paused") == len(stalled), timeout=30), \
        server.log_text()[-2000:]
    stall_lines = server.log_text().count("took more than 2000 ms to read")
    # The junk-path flood overlaps the descriptor exhaustion (its requests
    # then get 503 until descriptors return); the rest follow it at once,
    # together, with the slow readers still paused.
    flood = threading.Thread(target=run, args=(junk_paths, url))
    flood.start()
    run(exhaust_fds, port)
    workers = [threading.Thread(target=run, args=a) for a in [
        (smuggling, port), (header_floods, port), (large_bodies, url), (random_disconnects, port, rng)]]
    for w in workers:
        w.start()
    for w in workers + [flood]:
        w.join()
    # The stall timeout (2 s) closes the slow readers' connections and frees their KV.
    assert wait_for(lambda: server.log_text().count("took more than 2000 ms to read") == stall_lines + len(stalled)
                    and server.metric("m2cpp:num_requests_paused") == 0, timeout=30), server.log_text()[-2000:]
    for s in stalled:
        s.close()
    assert not errors, errors


def settle(server, fds_idle):
    assert wait_for(lambda: server.metric("m2cpp:kv_cache_blocks_used") == 0, timeout=30)
    assert wait_for(lambda: server.metric("m2cpp:num_requests_running") == 0
                    and server.metric("m2cpp:num_requests_waiting") == 0, timeout=30)
    # Lingering closes end within 2 s; the monitor's connection stays open.
    assert wait_for(lambda: open_fds(server) <= fds_idle, timeout=15), (open_fds(server), fds_idle)


def test_abuse_leaves_nothing_behind():
    s = ServerProcess("--max-stream-buffer-bytes", "16384", "--stream-stall-timeout", "2",
                      "--max-request-body-bytes", str(4 << 20), "--max-inflight-body-bytes", str(8 << 20),
                      preexec_fn=limit_fds, env=MALLOC_RETURNS_MEMORY)
    ctx = multiprocessing.get_context("spawn")
    stop, worst, failures = ctx.Event(), ctx.Value("d", 0.0), ctx.Value("i", 0)
    monitor = ctx.Process(target=monitor_health, args=(s.url, stop, worst, failures))
    try:
        monitor.start()
        # Warm: one of each kind of request, so that allocator pools and thread stacks exist before the baseline.
        httpx.post(s.url + "/v1/chat/completions", timeout=60, json={
            "model": MODEL_NAME, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 5})
        assert wait_for(lambda: worst.value > 0, timeout=10)  # the monitor is connected
        fds_idle = open_fds(s)
        rss_idle = s.rss_bytes()
        rng = random.Random(23)
        abuse_round(s, rng)
        settle(s, fds_idle)
        rss_first = s.rss_bytes()
        abuse_round(s, rng)
        settle(s, fds_idle)
        rss_second = s.rss_bytes()
        print(f"abuse run: RSS idle {rss_idle >> 20} MiB, after round 1 {rss_first >> 20} MiB, "
              f"round 2 {rss_second >> 20} MiB; worst /health {worst.value * 1000:.1f} ms")
        stop.set()
        monitor.join(timeout=10)
        log = s.log_text()
        assert failures.value == 0, (failures.value, log[-3000:])
        assert worst.value < 0.1, worst.value
        # Bounded: buffers, caps and arenas, not what the clients sent (tens of MiB per round).
        assert rss_first - rss_idle < 96 << 20, (rss_idle, rss_first)
        assert rss_second - rss_first < 16 << 20, (rss_idle, rss_first, rss_second)
        assert "connection limit reached" in log, log[-3000:]
        assert all(r["status"] < 500 or r["status"] == 503 for r in s.access_records()), \
            [r for r in s.access_records() if r["status"] >= 500 and r["status"] != 503][:5]
        assert httpx.get(s.url + "/health").status_code == 200
    finally:
        stop.set()
        if monitor.is_alive():
            monitor.kill()
        assert s.stop() == 0


def test_rate_limit_per_client():
    s = ServerProcess("--rate-limit", "1", "--rate-limit-burst", "3")
    try:
        with httpx.Client(base_url=s.url, timeout=10) as c:
            statuses = [c.get("/v1/models").status_code for _ in range(5)]
            assert statuses[:3] == [200, 200, 200] and 429 in statuses[3:], statuses
            r = httpx.get(s.url + "/v1/models")
            assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1, (r.status_code, r.headers)
            assert all(c.get("/health").status_code == 200 for _ in range(20))  # monitors are never limited
            assert c.get("/metrics").status_code == 200
        time.sleep(1.1)
        assert httpx.get(s.url + "/v1/models").status_code == 200  # the bucket refills
        assert "over --rate-limit 1 requests/s" in s.log_text()
    finally:
        assert s.stop() == 0
