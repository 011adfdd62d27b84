#!/usr/bin/env python3
"""Tokenizer speed: m2cpp against Hugging Face `tokenizers`, same corpus.

For each tokenizer: load time, and single-threaded encode throughput over a
corpus of documents (each document encoded on its own, add_special_tokens
False). HF is timed in this process with `Tokenizer.encode` called per
document, and with `encode_batch` (RAYON_NUM_THREADS=1,
TOKENIZERS_PARALLELISM=false: one thread); the ratio is against the faster;
m2cpp by bench/tokenizer_bench (Google Benchmark) on the same documents.
Both figures are CPU time of the encoding thread (less sensitive to a busy
machine than wall time).

Usage:
  python3 tools/tokenizer_bench.py --bench build/tokenizer_bench [--corpus natural|diff|FILE.jsonl]
      [--tokenizers DIR] [name ...]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

from tokenizers import Tokenizer  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tokenizer_corpus  # noqa: E402


def natural_corpus(n=3000, seed=7):
    """Sentences, code and mixed text only (no code point sweep, no long runs)."""
    g = tokenizer_corpus.Gen(seed, tokenizer_corpus.special_strings(None))
    docs = []
    for i in range(n):
        k = i % 3
        if k == 0:
            docs.append(" ".join(g.pick(g.sentences) for _ in range(g.r.randint(3, 12))))
        elif k == 1:
            docs.append("".join(g.pick(tokenizer_corpus.CODE) for _ in range(g.r.randint(1, 4))))
        else:
            docs.append(g.mixed_text(g.r.randint(2, 10)))
    return docs


def hf_figures(path, docs, rounds=3):
    """Load seconds, MB/s with encode() per document, MB/s with encode_batch() (one thread)."""
    t0 = time.process_time()
    tok = Tokenizer.from_file(path)
    load = time.process_time() - t0
    size = sum(len(d.encode()) for d in docs)
    per_doc = batch = float("inf")
    for _ in range(rounds):
        t0 = time.process_time()
        for d in docs:
            tok.encode(d, add_special_tokens=False)
        per_doc = min(per_doc, time.process_time() - t0)
        t0 = time.process_time()
        tok.encode_batch(docs, add_special_tokens=False)
        batch = min(batch, time.process_time() - t0)
    return load, size / per_doc / 1e6, size / batch / 1e6


def m2cpp_figures(bench, tokenizer_dir, corpus_file):
    out = subprocess.run([bench, "--tokenizer", tokenizer_dir, "--corpus", corpus_file,
                          "--benchmark_format=json", "--benchmark_repetitions=3",
                          "--benchmark_report_aggregates_only=true"], capture_output=True, text=True, check=True)
    runs = json.loads(out.stdout)["benchmarks"]
    load_ms = next(b["cpu_time"] for b in runs if b["name"].startswith("BM_Load") and b["aggregate_name"] == "median")
    enc = next(b for b in runs if b["name"].startswith("BM_Encode") and b["aggregate_name"] == "median")
    # bytes_per_second is computed from CPU time by Google Benchmark.
    return load_ms / 1e3, enc["bytes_per_second"] / 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", required=True, help="path of the tokenizer_bench program")
    ap.add_argument("--corpus", default="natural", help="natural, diff (the differential corpus) or a .jsonl file")
    ap.add_argument("--tokenizers", default=os.path.join(HERE, "..", "..", "shared", "data", "tokenizers"))
    ap.add_argument("names", nargs="*", default=["gpt4o", "qwen3", "deepseek-v3", "m2-layout", "m2-mini"])
    args = ap.parse_args()
    if args.corpus == "natural":
        docs = natural_corpus()
    elif args.corpus == "diff":
        docs = tokenizer_corpus.build_corpus(tokenizers_dir=args.tokenizers)
    else:
        with open(args.corpus, encoding="utf-8") as f:
            docs = [json.loads(line) for line in f]
    size = sum(len(d.encode()) for d in docs)
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps(d) + "\n")
        corpus_file = f.name
    print(f"corpus '{args.corpus}': {len(docs)} documents, {size / 1e6:.2f} MB; CPU time, one thread")
    print(f"{'tokenizer':<12} {'HF load s':>10} {'m2cpp load s':>13} {'HF MB/s':>8} {'HF batch':>9} "
          f"{'m2cpp MB/s':>11} {'ratio':>6}")
    try:
        for name in args.names:
            d = os.path.join(args.tokenizers, name)
            hf_load, hf_speed, hf_batch = hf_figures(os.path.join(d, "tokenizer.json"), docs)
            load, speed = m2cpp_figures(args.bench, d, corpus_file)
            ratio = speed / max(hf_speed, hf_batch)
            print(f"{name:<12} {hf_load:>10.3f} {load:>13.3f} {hf_speed:>8.2f} {hf_batch:>9.2f} {speed:>11.2f} "
                  f"{ratio:>6.2f}")
    finally:
        os.unlink(corpus_file)


if __name__ == "__main__":
    main()
