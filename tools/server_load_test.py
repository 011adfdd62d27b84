#!/usr/bin/env python3
"""Load test of `m2cpp serve` on loopback: N concurrent streaming chat
requests (default 256), in R rounds, against a server this script starts on
the tiny chat fixture model. Reports errors, time to first token, throughput,
the server's RSS at idle / peak / after each round, and its KV blocks in use
after each round (must be 0). Bounded: every request and the whole run have
time limits; traffic goes to 127.0.0.1 only.

    python3 tools/server_load_test.py [--binary build/m2cpp] [--concurrency 256] [--rounds 2]
        [--max-tokens 64] [--json out.json]

Exits non-zero if any request failed or the KV blocks did not return to 0.
"""
import argparse
import asyncio
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import httpx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def metric(url, name):
    text = httpx.get(url + "/metrics", timeout=10).text
    m = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


async def one(client, url, i, max_tokens, result):
    body = {"model": "m2-tiny-chat", "messages": [{"role": "user", "content": f"Request number {i}, say hi."}],
            "max_tokens": max_tokens, "ignore_eos": True, "stream": True, "seed": i,
            "stream_options": {"include_usage": True}}
    t0 = time.perf_counter()
    ttft, tokens, done = None, 0, False
    try:
        async with client.stream("POST", url + "/v1/chat/completions", json=body) as r:
            if r.status_code != 200:
                result["errors"].append(f"HTTP {r.status_code}")
                return
            async for line in r.aiter_lines():
                if not line.startswith("data: "):
                    continue
                if line == "data: [DONE]":
                    done = True
                    continue
                chunk = json.loads(line[6:])
                if "error" in chunk:
                    result["errors"].append(chunk["error"]["message"])
                    return
                if chunk.get("usage"):
                    tokens = chunk["usage"]["completion_tokens"]
                elif ttft is None and chunk["choices"] and any(
                        v for k, v in chunk["choices"][0]["delta"].items() if k != "role"):
                    ttft = time.perf_counter() - t0
    except Exception as e:  # noqa: BLE001 - every failure is counted
        result["errors"].append(repr(e))
        return
    if not done or tokens != max_tokens:
        result["errors"].append(f"incomplete stream: done={done} tokens={tokens}")
        return
    result["ttft"].append(ttft if ttft is not None else time.perf_counter() - t0)
    result["e2e"].append(time.perf_counter() - t0)
    result["tokens"] += tokens


async def round_(url, n, max_tokens, pid, timeout):
    result = {"errors": [], "ttft": [], "e2e": [], "tokens": 0}
    peak = [rss_kib(pid)]
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], rss_kib(pid))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample)
    sampler.start()
    limits = httpx.Limits(max_connections=n + 8, max_keepalive_connections=n + 8)
    t0 = time.perf_counter()
    async with httpx.AsyncClient(timeout=timeout, limits=limits) as client:
        await asyncio.wait_for(asyncio.gather(*(one(client, url, i, max_tokens, result) for i in range(n))),
                               timeout=timeout)
    wall = time.perf_counter() - t0
    stop.set()
    sampler.join()
    result["wall_s"] = wall
    result["peak_rss_kib"] = peak[0]
    return result


def pct(xs, p):
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "m2cpp"))
    ap.add_argument("--model", default=os.path.join(ROOT, "tests", "data", "m2-tiny-chat"))
    ap.add_argument("--concurrency", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--kv-cache-memory", type=int, default=8 << 20,
                    help="KV pool bytes; a small pool is touched whole by the first round, so RSS compares")
    ap.add_argument("--json")
    args = ap.parse_args()

    log = tempfile.NamedTemporaryFile(prefix="m2cpp-load-", suffix=".log", delete=False)
    proc = subprocess.Popen([args.binary, "serve", "-m", args.model, "--port", "0", "--served-model-name",
                             "m2-tiny-chat", "--max-num-seqs", "256", "--disable-access-log",
                             "--kv-cache-memory", str(args.kv_cache_memory)],
                            stdout=subprocess.DEVNULL, stderr=log)
    try:
        port = None
        for _ in range(600):
            m = re.search(r"listening on http://[^:]+:(\d+)", open(log.name).read())
            if m:
                port = int(m.group(1))
                break
            time.sleep(0.05)
        url = f"http://127.0.0.1:{port}"
        for _ in range(600):
            try:
                if httpx.get(url + "/health").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        idle = rss_kib(proc.pid)
        report = {"concurrency": args.concurrency, "max_tokens": args.max_tokens, "idle_rss_kib": idle, "rounds": []}
        print(f"server pid {proc.pid}, idle RSS {idle / 1024:.1f} MiB")
        ok = True
        for r in range(args.rounds):
            res = asyncio.run(round_(url, args.concurrency, args.max_tokens, proc.pid, args.timeout))
            time.sleep(2)  # the server trims its heap after 0.5 s of idleness
            after = rss_kib(proc.pid)
            kv = metric(url, "m2cpp:kv_cache_blocks_used")
            running = metric(url, "m2cpp:num_requests_running")
            row = {"round": r + 1, "errors": len(res["errors"]), "completed": len(res["e2e"]),
                   "wall_s": round(res["wall_s"], 3), "output_tokens": res["tokens"],
                   "output_tokens_per_s": round(res["tokens"] / res["wall_s"], 1),
                   "ttft_p50_s": pct(res["ttft"], 50), "ttft_p99_s": pct(res["ttft"], 99),
                   "e2e_p50_s": pct(res["e2e"], 50), "e2e_max_s": max(res["e2e"]) if res["e2e"] else None,
                   "peak_rss_kib": res["peak_rss_kib"], "rss_after_kib": after, "kv_blocks_used_after": kv,
                   "running_after": running}
            report["rounds"].append(row)
            print(json.dumps(row))
            if res["errors"]:
                print("errors:", res["errors"][:5], file=sys.stderr)
            ok = ok and not res["errors"] and kv == 0 and running == 0
        proc.send_signal(signal.SIGTERM)
        report["exit_code"] = proc.wait(timeout=60)
        ok = ok and report["exit_code"] == 0
        if args.json:
            with open(args.json, "w") as f:
                json.dump(report, f, indent=2)
        print("OK" if ok else "FAILED")
        return 0 if ok else 1
    finally:
        if proc.poll() is None:
            proc.kill()
        os.unlink(log.name)


if __name__ == "__main__":
    sys.exit(main())
