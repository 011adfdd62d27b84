#!/usr/bin/env python3
"""64 concurrent chat requests against a served model, with and without a JSON-schema
response_format: completion tokens per second of wall time (docs/perf.md, constrained decoding).
Constrained answers are checked against the schema (jsonschema when installed, else the
required keys). httpx only, so it runs on the GPU machine's image too.

Usage: python3 tools/constrained_throughput.py URL MODEL_NAME [STREAMS] [MAX_TOKENS]"""
import asyncio, json, sys, time
import httpx

url, model = sys.argv[1], sys.argv[2]
STREAMS = int(sys.argv[3]) if len(sys.argv) > 3 else 64
MAX_TOKENS = int(sys.argv[4]) if len(sys.argv) > 4 else 64
PLAN = {"type": "object", "properties": {"mode": {"enum": ["walk", "bike", "train"]}, "note": {"type": "string"},
        "days": {"type": "integer"}}, "required": ["mode", "note", "days"]}
try:
    import jsonschema
except ImportError:
    jsonschema = None


def valid(text):
    try:
        doc = json.loads(text)
    except ValueError:
        return False
    if jsonschema:
        try:
            jsonschema.validate(doc, PLAN)
            return True
        except jsonschema.ValidationError:
            return False
    return isinstance(doc, dict) and all(k in doc for k in PLAN["required"])


async def one(c, seed, constrained):
    body = dict(model=model, messages=[{"role": "user", "content": "plan"}], max_tokens=MAX_TOKENS, seed=seed,
                reasoning_effort="none", ignore_eos=False)
    if constrained:
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "p", "schema": PLAN}}
    r = await c.post(url + "/v1/chat/completions", json=body)
    r.raise_for_status()
    j = r.json()
    ok = j["choices"][0]["finish_reason"] != "stop" or valid(j["choices"][0]["message"]["content"])
    return j["usage"]["completion_tokens"], ok


async def run(c, constrained):
    t = time.time()
    res = await asyncio.gather(*[one(c, s, constrained) for s in range(STREAMS)])
    return sum(n for n, _ in res), time.time() - t, sum(not ok for _, ok in res)


async def main():
    async with httpx.AsyncClient(timeout=600, limits=httpx.Limits(max_connections=STREAMS + 8)) as c:
        await run(c, False)  # warm-up
        for constrained in (False, True, False, True):
            n, dt, bad = await run(c, constrained)
            print(f"constrained={constrained}: {n} tokens in {dt:.2f} s = {n/dt:.0f} tok/s"
                  + (f", {bad} answers that finished but do not validate" if constrained else ""))

asyncio.run(main())
