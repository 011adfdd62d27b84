"""`m2cpp bench serve` and `m2cpp bench plot` against a live `m2cpp serve` on
the tiny chat fixture model: the JSON results (config, per-level summaries
with TTFT/TPOT/ITL/E2EL, throughput per GPU, every raw sample), exact
output lengths, the Pareto plot (valid SVG, one point per concurrency
level), chat prompts made exact through /tokenize, the agentic workload's
per-turn prefix-cache hits, errors, overlays, and Ctrl-C."""
import json
import signal
import subprocess
import time
import xml.etree.ElementTree as ET

import pytest

from live_server import BINARY, MODEL, MODEL_NAME, ServerProcess

SVG = "{http://www.w3.org/2000/svg}"
LATENCY_KEYS = {"count", "mean", "std", "min", "p50", "p90", "p99", "max"}


@pytest.fixture(scope="module")
def server():
    # The default two I/O threads: this suite also guards against the write-completion race fixed in
    # http_server.cpp (a queue cleared while a write was in flight).
    s = ServerProcess()
    yield s
    assert s.stop() == 0, s.log_text()[-4000:]


def bench(server, out, *args, check=True):
    cmd = [BINARY, "bench", "serve", "--base-url", server.url, "--out", str(out), "--no-progress", *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if check:
        assert r.returncode == 0, r.stderr[-3000:]
    return r


def points(svg_path):
    root = ET.parse(svg_path).getroot()  # raises unless well-formed XML
    assert root.tag == SVG + "svg"
    return [c.attrib for c in root.iter(SVG + "circle") if c.get("class") == "point"]


def test_completions_sweep(server, tmp_path):
    r = bench(server, tmp_path / "run", "--input-len", "32", "--output-len", "8", "--concurrency", "1,2,4",
              "--num-prompts", "4", "--warmup", "2", "--gpus", "2", "--label", "tiny cpu")
    assert "out tok/s/GPU" in r.stdout and "TTFT" in r.stdout and "tok/s/user" in r.stdout
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["format"] == "m2cpp-bench-serve/1" and run["label"] == "tiny cpu" and not run["interrupted"]
    c = run["config"]
    assert c["model"] == MODEL_NAME and c["endpoint"] == "/v1/completions" and c["dataset"] == "random"
    assert (c["input_len"], c["output_len"], c["gpus"], c["concurrency"]) == (32, 8, 2, [1, 2, 4])
    assert [lv["label"] for lv in run["levels"]] == ["c=1", "c=2", "c=4"]
    for lv in run["levels"]:
        s = lv["summary"]
        assert (s["completed"], s["failed"], s["output_len_mismatches"], s["usage_missing"]) == (4, 0, 0, 0)
        assert (s["total_input_tokens"], s["total_output_tokens"]) == (4 * 32, 4 * 8)
        for key in ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms"):
            assert set(s[key]) == LATENCY_KEYS and s[key]["p50"] > 0, key
        assert s["ttft_ms"]["p50"] <= s["e2el_ms"]["p50"]
        assert abs(s["output_throughput_per_gpu"] * 2 - s["output_throughput"]) < 1e-6 * s["output_throughput"]
        assert abs(s["tokens_per_s_per_user"] - 1000 / s["tpot_ms"]["p50"]) < 1e-6 * s["tokens_per_s_per_user"]
        assert s["request_throughput"] > 0 and s["total_token_throughput"] > s["output_throughput"]
        assert s["prefix_cache"]["server_hit_rate"] is not None  # m2cpp's /metrics counters were read
        assert len(lv["samples"]) == 4
        for smp in lv["samples"]:
            assert smp["success"] and smp["prompt_len"] == 32 and smp["prompt_tokens"] == 32
            assert smp["output_tokens"] == smp["expected_output_len"] == 8
            assert len(smp["itl_us"]) == smp["chunks"] - 1
            assert 0 < smp["ttft_us"] <= smp["e2e_us"]
    pts = points(tmp_path / "run.svg")
    assert [p["data-label"] for p in pts] == ["c=1", "c=2", "c=4"]
    for p, lv in zip(pts, run["levels"]):
        assert abs(float(p["data-x"]) - lv["summary"]["tokens_per_s_per_user"]) < 1e-3 * float(p["data-x"])
        assert abs(float(p["data-y"]) - lv["summary"]["output_throughput_per_gpu"]) < 1e-3 * float(p["data-y"])


def test_chat_agentic_sessions(server, tmp_path):
    bench(server, tmp_path / "agentic", "--endpoint", "chat", "--dataset", "agentic", "--turns", "3",
          "--input-len", "64", "--tool-result-len", "16", "--output-len", "4", "--concurrency", "2",
          "--num-prompts", "2")
    run = json.loads((tmp_path / "agentic.json").read_text())
    assert run["config"]["endpoint"] == "/v1/chat/completions" and run["config"]["shared_prefix_len"] == 32
    (lv,) = run["levels"]
    s = lv["summary"]
    assert (s["completed"], s["failed"]) == (6, 0)
    turns = s["per_turn"]
    assert [t["turn"] for t in turns] == [0, 1, 2] and all(t["count"] == 2 for t in turns)
    # Each turn resends the growing history: longer prompts, mostly found in the prefix cache.
    assert turns[0]["mean_prompt_tokens"] < turns[1]["mean_prompt_tokens"] < turns[2]["mean_prompt_tokens"]
    assert turns[2]["cached_rate"] > turns[0]["cached_rate"] and turns[2]["cached_rate"] > 0.5
    assert s["prefix_cache"]["server_hit_rate"] > 0
    by_session = {}
    for smp in lv["samples"]:
        assert smp["output_tokens"] == 4
        by_session.setdefault(smp["session"], []).append(smp["turn"])
    assert sorted(map(sorted, by_session.values())) == [[0, 1, 2], [0, 1, 2]]
    # The first turn's user text was made exactly 32 tokens long (+ 32 shared system-prompt tokens).
    assert all(smp["prompt_len"] == 64 for smp in lv["samples"] if smp["turn"] == 0)


def test_errors_are_counted(server, tmp_path):
    # --tokenizer: prompts are built locally (the server's /tokenize would refuse the unknown model too).
    bench(server, tmp_path / "bad", "--model", "no-such-model", "--tokenizer", MODEL, "--input-len", "8",
          "--output-len", "2", "--concurrency", "1", "--num-prompts", "2")
    s = json.loads((tmp_path / "bad.json").read_text())["levels"][0]["summary"]
    assert (s["completed"], s["failed"]) == (0, 2)
    assert "does not exist" in s["errors"][0]["message"] and s["errors"][0]["count"] == 2


def test_plot_overlays_runs(server, tmp_path):
    bench(server, tmp_path / "a", "--input-len", "16", "--output-len", "4", "--concurrency", "1,2",
          "--num-prompts", "2")
    out = tmp_path / "both.svg"
    r = subprocess.run([BINARY, "bench", "plot", str(tmp_path / "a.json"), str(tmp_path / "a.json"),
                        "--labels", "m2cpp,again", "--out", str(out)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    pts = points(out)
    assert [(p["data-series"], p["data-label"]) for p in pts] == [("0", "c=1"), ("0", "c=2"), ("1", "c=1"),
                                                                  ("1", "c=2")]
    text = out.read_text()
    assert ">m2cpp</text>" in text and ">again</text>" in text


def test_ctrl_c_writes_what_was_measured(server, tmp_path):
    cmd = [BINARY, "bench", "serve", "--base-url", server.url, "--out", str(tmp_path / "int"), "--no-progress",
           "--input-len", "16", "--output-len", "64", "--concurrency", "2,4", "--num-prompts", "100000"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, err[-3000:]
    assert "interrupted" in err
    run = json.loads((tmp_path / "int.json").read_text())
    assert run["interrupted"] and len(run["levels"]) == 1
    lv = run["levels"][0]
    assert lv["interrupted"] and lv["summary"]["completed"] == len(lv["samples"]) > 0
    assert all(s["success"] for s in lv["samples"])  # requests cut short are not measurements
    assert "c=2" in out and points(tmp_path / "int.svg")
