#!/usr/bin/env python3
"""Soak of a running `m2cpp serve` (scripts/gpu_soak.sh starts one on the GPU):
levels of concurrent requests (default 1,16,64,128,256,512, then the largest
again) of every kind a client sends: streaming and not, chat-free token-id
completions with prompts from 1 to --max-prompt tokens (log-uniform), n > 1,
logprobs, stop strings, seeds, and clients that disconnect mid-stream. All
traffic goes to 127.0.0.1; every request, level and the whole run are bounded
in time.

Pass (exit 0) when:
  - every request completed (200 with its tokens) or got a clear error: a
    4xx with an error body, or 429/503 carrying Retry-After; no 500, no
    connection reset, no hang (each request has a deadline);
  - /health answered 200 within 2 s throughout (polled every 0.5 s);
  - after each level the KV blocks in use return to 0 (m2cpp:kv_cache_blocks_used)
    and the server's GPU memory (nvidia-smi) is no higher after the repeat
    of the largest level than after its first run.

    python3 tools/gpu_soak.py --url http://127.0.0.1:8123 --levels 1,16,64,128,256,512 --json soak.json
"""
import argparse
import asyncio
import json
import math
import random
import re
import subprocess
import sys
import time

import httpx


def metric(text, name):
    m = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


def gpu_memory_mib(pid):
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    total = None
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and (pid is None or parts[0] == str(pid)):
            total = (total or 0) + int(parts[1])
    return total


def make_request(rng, i, model, max_prompt, vocab, max_tokens):
    n_prompt = max(1, int(math.exp(rng.uniform(0, math.log(max_prompt)))))
    body = {"model": model, "prompt": [rng.randrange(vocab) for _ in range(n_prompt)],
            "max_tokens": rng.choice([1, 8, 32, max_tokens]), "temperature": rng.choice([0, 0.8]),
            "ignore_eos": True, "seed": i}
    kind = []
    if rng.random() < 0.5:
        body["stream"] = True
        kind.append("stream")
    if rng.random() < 0.15:
        body["n"] = rng.choice([2, 3])
        kind.append("n")
    if rng.random() < 0.2:
        body["logprobs"] = rng.choice([0, 5])
        kind.append("logprobs")
    if rng.random() < 0.2:
        body["stop"] = [rng.choice(["a", "the", "\n", "zz"])]
        kind.append("stop")
    disconnect = body.get("stream") and rng.random() < 0.2
    if disconnect:
        kind.append("disconnect")
    return body, disconnect, "+".join(kind) or "plain"


async def one(client, url, body, disconnect, rng, deadline_s, res):
    t0 = time.perf_counter()
    try:
        async with asyncio.timeout(deadline_s):
            if body.get("stream"):
                async with client.stream("POST", url + "/v1/completions", json=body) as r:
                    if r.status_code != 200:
                        await r.aread()
                        return classify(r, res)
                    chunks = 0
                    stop_after = rng.randint(1, 8) if disconnect else None
                    async for line in r.aiter_lines():
                        if line.startswith("data: "):
                            chunks += 1
                            if line == "data: [DONE]":
                                res["ok"] += 1
                                return
                            if '"error"' in line[:40]:
                                res["stream_errors"] += 1
                                return
                            if stop_after is not None and chunks >= stop_after:
                                res["disconnected"] += 1
                                return  # leaving the context closes the connection
                    res["bad"].append("stream ended without [DONE]")
            else:
                r = await client.post(url + "/v1/completions", json=body)
                if r.status_code != 200:
                    return classify(r, res)
                j = r.json()
                want = body.get("n", 1)
                if len(j.get("choices", [])) != want:
                    res["bad"].append(f"{len(j.get('choices', []))} choices for n={want}")
                    return
                res["ok"] += 1
    except TimeoutError:
        res["bad"].append(f"no answer within {deadline_s} s")
    except httpx.HTTPError as e:
        res["bad"].append(f"{type(e).__name__}: {e}")
    finally:
        res["latency"].append(time.perf_counter() - t0)


def classify(r, res):
    code = r.status_code
    if code in (429, 503):
        if "retry-after" in r.headers:
            res["overload"] += 1
        else:
            res["bad"].append(f"HTTP {code} without Retry-After")
    elif 400 <= code < 500:
        try:
            msg = r.json()["error"]["message"]
            res["client_errors"].append(f"{code}: {msg[:120]}")
        except (ValueError, KeyError, TypeError):
            res["bad"].append(f"HTTP {code} without an error body")
    else:
        res["bad"].append(f"HTTP {code}: {r.text[:200]}")


async def health_poller(url, stop, stats):
    async with httpx.AsyncClient(timeout=2.0) as c:
        while not stop.is_set():
            t0 = time.perf_counter()
            try:
                r = await c.get(url + "/health")
                ok = r.status_code == 200
            except httpx.HTTPError:
                ok = False
            dt = time.perf_counter() - t0
            stats["polls"] += 1
            stats["worst_s"] = max(stats["worst_s"], dt)
            if not ok:
                stats["failures"] += 1
            try:
                await asyncio.wait_for(stop.wait(), 0.5)
            except TimeoutError:
                pass


async def wait_idle(client, url, limit_s):
    t0 = time.perf_counter()
    used = None
    while time.perf_counter() - t0 < limit_s:
        try:
            used = metric((await client.get(url + "/metrics")).text, "m2cpp:kv_cache_blocks_used")
        except httpx.HTTPError:
            used = None
        if used == 0:
            return 0, time.perf_counter() - t0
        await asyncio.sleep(0.5)
    return used, time.perf_counter() - t0


async def run(args):
    rng = random.Random(args.seed)
    url = args.url.rstrip("/")
    levels = [int(x) for x in args.levels.split(",")]
    levels.append(levels[-1])  # the largest again: memory must not grow
    report = {"levels": [], "pass": True}
    health = {"polls": 0, "failures": 0, "worst_s": 0.0}
    stop = asyncio.Event()
    poller = asyncio.create_task(health_poller(url, stop, health))
    limits = httpx.Limits(max_connections=2048, max_keepalive_connections=2048)
    t_run = time.perf_counter()
    async with httpx.AsyncClient(timeout=httpx.Timeout(args.request_s, connect=30), limits=limits) as client:
        model = (await client.get(url + "/v1/models")).json()["data"][0]["id"]
        for li, conc in enumerate(levels):
            if time.perf_counter() - t_run > args.total_s:
                report["pass"] = False
                report["stopped"] = f"run over {args.total_s} s before level {conc}"
                break
            res = {"ok": 0, "overload": 0, "disconnected": 0, "stream_errors": 0, "client_errors": [], "bad": [],
                   "latency": []}
            kinds = {}
            reqs = []
            for i in range(conc * args.per_level):
                body, disc, kind = make_request(rng, li * 100000 + i, model, args.max_prompt, args.vocab, args.max_tokens)
                kinds[kind] = kinds.get(kind, 0) + 1
                reqs.append((body, disc))
            sem = asyncio.Semaphore(conc)

            async def bounded(body, disc):
                async with sem:
                    await one(client, url, body, disc, rng, args.request_s, res)

            t0 = time.perf_counter()
            await asyncio.gather(*(bounded(b, d) for b, d in reqs))
            elapsed = time.perf_counter() - t0
            used, idle_s = await wait_idle(client, url, 60)
            mem = gpu_memory_mib(args.server_pid)
            lat = sorted(res["latency"])
            entry = {"concurrency": conc, "requests": len(reqs), "seconds": round(elapsed, 1), "ok": res["ok"],
                     "overload_with_retry_after": res["overload"], "disconnected": res["disconnected"],
                     "stream_errors": res["stream_errors"], "client_errors": len(res["client_errors"]),
                     "client_error_samples": res["client_errors"][:3], "bad": len(res["bad"]),
                     "bad_samples": res["bad"][:5], "kv_blocks_after": used, "idle_after_s": round(idle_s, 1),
                     "gpu_mib_after": mem, "p50_s": round(lat[len(lat) // 2], 2) if lat else None,
                     "max_s": round(lat[-1], 2) if lat else None, "kinds": kinds}
            report["levels"].append(entry)
            if res["bad"] or used != 0:
                report["pass"] = False
            print(f"level {conc:4d}: {len(reqs)} requests in {elapsed:.1f} s: ok {res['ok']}, 429/503 "
                  f"{res['overload']}, disconnected {res['disconnected']}, stream errors {res['stream_errors']}, "
                  f"4xx {len(res['client_errors'])}, BAD {len(res['bad'])} {res['bad'][:2]}; KV blocks after "
                  f"{used}, GPU {mem} MiB", flush=True)
            if res["bad"] and any("Connect" in b for b in res["bad"]):
                break  # the server is gone
    stop.set()
    await poller
    report["health"] = health
    if health["failures"]:
        report["pass"] = False
    mems = [lv["gpu_mib_after"] for lv in report["levels"]]
    if len(mems) >= 2 and None not in mems[-2:] and mems[-1] > mems[-2]:
        report["pass"] = False
        report["memory"] = f"GPU memory grew on the repeated level: {mems[-2]} -> {mems[-1]} MiB"
    print(f"health: {health['polls']} polls, {health['failures']} failures, slowest {health['worst_s']:.2f} s")
    print("PASS" if report["pass"] else "FAIL", report.get("memory", ""), report.get("stopped", ""))
    return report


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8123")
    ap.add_argument("--levels", default="1,16,64,128,256,512")
    ap.add_argument("--per-level", type=int, default=1, help="requests per level = this x concurrency")
    ap.add_argument("--max-prompt", type=int, default=32768)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--vocab", type=int, default=200000)
    ap.add_argument("--request-s", type=float, default=300, help="deadline of one request")
    ap.add_argument("--total-s", type=float, default=480, help="no new level after this many seconds")
    ap.add_argument("--server-pid", type=int, default=None, help="whose GPU memory to read (default: all)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json")
    args = ap.parse_args()
    report = asyncio.run(run(args))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    sys.exit(0 if report["pass"] else 1)


if __name__ == "__main__":
    main()
