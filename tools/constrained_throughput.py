#!/usr/bin/env python3
"""64 concurrent chat streams against a served model, with and without a JSON-schema
response_format: completion tokens per second of wall time (docs/perf.md, constrained decoding).

Usage: python3 tools/constrained_throughput.py URL MODEL_NAME
(one client for every run: a fresh AsyncOpenAI per run left the third run's requests unsent)."""
import asyncio, json, sys, time
import openai
url, model = sys.argv[1], sys.argv[2]
PLAN = {"type": "object", "properties": {"mode": {"enum": ["walk", "bike", "train"]}, "note": {"type": "string"},
        "days": {"type": "integer"}}, "required": ["mode", "note", "days"]}
async def one(c, seed, constrained):
    kw = dict(model=model, messages=[{"role": "user", "content": "plan"}], max_tokens=64, seed=seed,
              extra_body={"reasoning_effort": "none", "ignore_eos": False})
    if constrained:
        kw["response_format"] = {"type": "json_schema", "json_schema": {"name": "p", "schema": PLAN}}
    r = await c.chat.completions.create(**kw)
    return r.usage.completion_tokens
C = None
async def run(constrained):
    global C
    C = C or openai.AsyncOpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=600)
    c = C
    t = time.time()
    toks = await asyncio.gather(*[one(c, s, constrained) for s in range(64)])
    dt = time.time() - t
    return sum(toks), dt
async def main():
    await run(False)  # warm-up
    for constrained in (False, True, False, True):
        n, dt = await run(constrained)
        print(f"constrained={constrained}: {n} tokens in {dt:.2f} s = {n/dt:.0f} tok/s")
asyncio.run(main())
