"""`m2cpp serve`'s flags as a careless operator gives them (issue 23): every
out-of-range value refused before anything loads, with the flag and the
allowed range in the message; a missing tokenizer found before the weights
load; --host names resolved; a warning for a server open to the network
without a key; a second Ctrl-C exits at once."""
import os
import signal
import subprocess
import time

import httpx
import pytest

from live_server import BINARY, MODEL, SOURCE_DIR, ServerProcess, wait_for


def serve(*args, timeout=30):
    return subprocess.run([BINARY, "serve", "-m", MODEL, "--port", "0", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize("flag,value,allowed", [
    ("--port", "99999", "[0, 65535]"),
    ("--port", "-1", "[0, 65535]"),
    ("--max-num-seqs", "0", "[1, "),
    ("--max-num-seqs", "-1", "[1, "),
    ("--max-num-batched-tokens", "0", "[1, "),
    ("--kv-cache-memory", "-5", "[1, "),
    ("--io-threads", "-3", "[1, 256]"),
    ("--threads", "0", "[1, 4096]"),
    ("--max-model-len", "-1", "[2, "),
    ("--shutdown-timeout", "-1", "[0, 86400]"),
    ("--shutdown-timeout", "nan", "[0, 86400]"),
    ("--max-waiting", "-1", "[0, "),
    ("--max-request-body-bytes", "0", "[1, "),
    ("--block-size", "0", "[1, 1024]"),
    ("--num-layers", "0", "[1, "),
    ("--gpu-memory-utilization", "1.5", "(0, 1]"),
    ("--port", "80x", "[0, 65535]"),
    ("--max-inflight-body-bytes", "-1", "[0, "),
    ("--rate-limit", "-2", "[0, "),
    ("--rate-limit", "inf", "[0, "),
    ("--rate-limit-burst", "nan", "[0, "),
    ("--idle-timeout", "0", "[1, 86400]"),
    ("--max-header-bytes", "10", "[1024, "),
])
def test_out_of_range_flags_are_refused_before_loading(flag, value, allowed):
    r = serve(flag, value)
    assert r.returncode != 0, (flag, value, r.stderr)
    assert flag in r.stderr and allowed in r.stderr and f"'{value}'" in r.stderr, r.stderr
    assert "listening" not in r.stderr  # refused before binding, let alone loading


def test_flags_that_cannot_work_are_refused_before_loading():
    for args, needle in [(("--api-key", ""), "--api-key: must not be empty"),
                         (("--served-model-name", ""), "--served-model-name: must not be empty"),
                         (("--gpu-memory-utilization", "0.5"), "--gpu-memory-utilization applies to --device cuda"),
                         (("--host", "no-such-host.invalid"), "--host no-such-host.invalid"),
                         (("--replay", "/nonexistent/replay.json"), "--replay"),
                         (("--max-request-body-bytes", "2000", "--max-inflight-body-bytes", "1000"),
                          "--max-inflight-body-bytes 1000 is smaller than --max-request-body-bytes 2000"),
                         (("--rate-limit-burst", "5"), "--rate-limit-burst 5 needs --rate-limit"),
                         (("--n-cpu-moe", "auto"), "--cpu-moe and --n-cpu-moe place experts beside a GPU")]:
        r = serve(*args)
        assert r.returncode != 0 and needle in r.stderr, (args, r.stderr)
        assert "ready" not in r.stderr
    r = subprocess.run([BINARY, "serve", "-m", "/nonexistent/model"], capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and "-m /nonexistent/model: no such file or directory" in r.stderr, r.stderr


def test_a_missing_tokenizer_is_found_before_the_weights_load():
    # The real M2.7 shape with dummy weights would take minutes and ~230 GB to
    # build; no tokenizer is next to a config.json, so it must fail at once.
    start = time.time()
    r = subprocess.run([BINARY, "serve", "-m", os.path.join(SOURCE_DIR, "configs", "minimax-m2.7.json"),
                        "--load-format", "dummy", "--port", "0"], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "tokenizer" in r.stderr, r.stderr
    assert time.time() - start < 20


def test_host_names_resolve_and_open_hosts_warn():
    s = ServerProcess("--host", "localhost")
    try:
        assert httpx.get(s.url + "/health").status_code == 200
        assert "no --api-key" not in s.log_text()
    finally:
        assert s.stop() == 0
    s = ServerProcess("--host", "0.0.0.0")
    try:
        assert "accepts connections from other machines and no --api-key is set" in s.log_text()
    finally:
        assert s.stop() == 0
    s = ServerProcess("--host", "0.0.0.0", "--api-key", "k")
    try:
        assert "no --api-key" not in s.log_text()
    finally:
        assert s.stop() == 0


def test_second_signal_exits_at_once():
    s = ServerProcess("--step-delay-ms", "20", "--shutdown-timeout", "600")
    client = httpx.Client(timeout=60)
    body = {"model": "m2-tiny-chat", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2000,
            "ignore_eos": True, "stream": True}
    with client.stream("POST", s.url + "/v1/chat/completions", json=body) as resp:
        lines = resp.iter_lines()
        next(line for line in lines if line.startswith("data: "))
        s.proc.send_signal(signal.SIGINT)
        assert wait_for(lambda: "shutting down" in s.log_text(), timeout=10)
        time.sleep(0.3)
        assert s.proc.poll() is None  # draining: the stream has minutes to finish
        start = time.time()
        s.proc.send_signal(signal.SIGINT)
        assert s.proc.wait(timeout=10) != 0
        assert time.time() - start < 5
    client.close()
    assert "second signal" in s.log_text()

