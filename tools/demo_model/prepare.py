#!/usr/bin/env python3
"""Builds the demo model's tokenizer and training data (CPU, a few minutes).

    python3 tools/demo_model/prepare.py

1. Fetches the source packages (sources.py) into --cache.
2. Writes the text documents (Jane Austen, the Python docs) and renders the
   synthetic conversations (chat_data.py) with the official M2 chat template,
   through tools/chat_template_ref.py, the project's reference renderer.
3. Trains a byte-level BPE with HF `tokenizers` using MiniMax-M2's
   pre-tokenizer (the o200k regex Split + ByteLevel), base vocabulary 8128,
   then appends the 54 M2 added tokens at 8128..8181 in M2's order and with
   its special flags (copied from tests/data/tokenizer/m2-mini); no
   post-processor. The model has 8192 embedding rows: like the real model
   (200000 + 54 + 10 padding rows = 200064) the last 10 rows have no token.
4. Writes into models/m2-demo/: tokenizer.json, tokenizer_config.json and
   chat_template.jinja (the official template, byte-exact; BOS ]~!b[, EOS [e~[).
5. Tokenizes everything into tools/demo_model/data/:
     text.u16.xz, chat.u16.xz   uint16 token ids, LZMA-compressed; the top bit
                                of an id set means "no loss on this token"
                                (chat prompts: system, user and tool turns,
                                earlier assistant turns); ids are < 8192
     val_text.u16.xz, val_chat.u16.xz   held-out documents, same format
     meta.json                  counts, sources with versions and licences
"""
import argparse
import hashlib
import json
import lzma
import os
import random
import re
import sys

import numpy as np
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tools"))

import chat_data  # noqa: E402
import chat_template_ref  # noqa: E402  (tools/chat_template_ref.py)
import sources  # noqa: E402

M2_MINI = os.path.join(REPO, "tests/data/tokenizer/m2-mini")
OFFICIAL_TEMPLATE = os.path.join(REPO, "..", "shared/data/minimax-m2-chat-template.jinja")
TEMPLATE_SHA256 = "967ff7e387676f4b4340585da0585416532f1e6c5ee3f1ede64b2c21ef7ea001"

BASE_VOCAB = 8128   # BPE tokens (256 bytes + merges)
MODEL_VOCAB = 8192  # embedding rows: base + 54 added + 10 padding rows
NO_LOSS = 0x8000    # top bit of a stored id

BOS, EOS = "]~!b[", "[e~["


def official_template():
    """The byte-exact official template: tests/data's m2-mini tokenizer_config
    holds it, and shared/data has the file (checked by sha256 when present)."""
    with open(os.path.join(M2_MINI, "tokenizer_config.json"), encoding="utf-8") as f:
        source = json.load(f)["chat_template"]
    assert hashlib.sha256(source.encode()).hexdigest() == TEMPLATE_SHA256, "m2-mini template is not the official one"
    if os.path.exists(OFFICIAL_TEMPLATE):
        with open(OFFICIAL_TEMPLATE, "rb") as f:
            assert f.read() == source.encode()
    return source


# ---- documents ------------------------------------------------------------------------------


def chunk(paragraphs, n):
    return ["\n\n".join(paragraphs[i:i + n]) for i in range(0, len(paragraphs), n)]


def text_documents(src):
    """Plain English documents, each `]~!b[` + text + `[e~[`."""
    docs = []
    for name, text in sorted(sources.austen_novels(src["r-cran-janeaustenr"][0]).items()):
        docs += chunk(text.split("\n\n"), 25)
    paras, _ = sources.python_docs(src["python3.11-doc"][0])
    docs += chunk(paras, 12)
    return [BOS + d + EOS for d in docs]


def chat_documents(maker, template, n):
    """n rendered conversations (add_generation_prompt=False), as m2cpp renders them."""
    out = []
    for _ in range(n):
        messages, tools = maker.conversation()
        out.append(chat_template_ref.render(template, messages, tools=tools, add_generation_prompt=False))
    return out


def trained_spans(rendered):
    """Character spans that carry loss: each assistant turn after the last user
    turn, from after `]~b]ai\\n` through its `[e~[` (reasoning, answer, tool calls)."""
    last_user = rendered.rfind("]~b]user\n")
    spans = []
    for m in re.finditer(re.escape("]~b]ai\n"), rendered):
        if m.start() < last_user:
            continue
        end = rendered.index(EOS, m.end()) + len(EOS)
        spans.append((m.end(), end))
    assert spans, "conversation without a final assistant turn"
    return spans


# ---- tokenizer -----------------------------------------------------------------------------


def m2_pretokenizer_pattern():
    with open(os.path.join(M2_MINI, "tokenizer.json"), encoding="utf-8") as f:
        return json.load(f)["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"]


def train_tokenizer(texts):
    """Byte-level BPE with M2's pre-tokenizer and added tokens, checked field by
    field against the m2-mini layout."""
    with open(os.path.join(M2_MINI, "tokenizer.json"), encoding="utf-8") as f:
        mini = json.load(f)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(m2_pretokenizer_pattern()), behavior="removed", invert=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    added = mini["added_tokens"]
    specials = re.compile("|".join(re.escape(a["content"]) for a in added))
    trainer = trainers.BpeTrainer(vocab_size=BASE_VOCAB, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[])
    # Added-token text is not BPE material: it becomes single tokens below.
    tok.train_from_iterator((specials.sub("\n", t) for t in texts), trainer=trainer)
    assert tok.get_vocab_size() == BASE_VOCAB, tok.get_vocab_size()
    for a in added:  # one by one, so ids follow M2's order
        t = AddedToken(a["content"], single_word=a["single_word"], lstrip=a["lstrip"], rstrip=a["rstrip"],
                       normalized=a["normalized"], special=a["special"])
        (tok.add_special_tokens if a["special"] else tok.add_tokens)([t])

    j = json.loads(tok.to_str())
    assert j["pre_tokenizer"] == mini["pre_tokenizer"], j["pre_tokenizer"]
    assert j["decoder"] == mini["decoder"], j["decoder"]
    assert j["normalizer"] is None and j["post_processor"] is None
    offset = BASE_VOCAB - added[0]["id"]
    assert [dict(a, id=a["id"] + offset) for a in added] == j["added_tokens"], "added tokens differ from M2's"
    return tok


def write_tokenizer_files(tok, template, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    tok.save(os.path.join(out_dir, "tokenizer.json"))
    with open(os.path.join(M2_MINI, "tokenizer_config.json"), encoding="utf-8") as f:
        config = json.load(f)  # M2's fields: bos ]~!b[, eos [e~[, unk ]!d~[, GPT2Tokenizer, template
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2, ensure_ascii=False)
        f.write("\n")
    with open(os.path.join(out_dir, "chat_template.jinja"), "w", encoding="utf-8", newline="") as f:
        f.write(template)


# ---- token ids -------------------------------------------------------------------------------


def encode_texts(tok, docs):
    ids = []
    for enc in tok.encode_batch(docs, add_special_tokens=False):
        d = np.array(enc.ids, dtype=np.uint16)
        d[0] |= NO_LOSS  # the BOS that starts a document is not predicted
        ids.append(d)
    return np.concatenate(ids)


def encode_chats(tok, docs):
    ids = []
    for doc, enc in zip(docs, tok.encode_batch(docs, add_special_tokens=False)):
        spans = trained_spans(doc)
        d = np.array(enc.ids, dtype=np.uint16)
        starts = np.array([o[0] for o in enc.offsets])
        keep = np.zeros(len(d), dtype=bool)
        for a, b in spans:
            keep |= (starts >= a) & (starts < b)
        d[~keep] |= NO_LOSS
        ids.append(d)
    return np.concatenate(ids)


def save_ids(path, ids):
    assert ids.dtype == np.uint16 and int((ids & (NO_LOSS - 1)).max()) < MODEL_VOCAB
    with lzma.open(path, "wb", preset=6) as f:
        f.write(ids.tobytes())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", default="/tmp/m2-demo-sources", help="where the source packages are unpacked")
    ap.add_argument("--model-dir", default=os.path.join(REPO, "models/m2-demo"))
    ap.add_argument("--data-dir", default=os.path.join(HERE, "data"))
    ap.add_argument("--chats", type=int, default=120000, help="synthetic conversations for training")
    ap.add_argument("--val-chats", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=8)
    args = ap.parse_args()

    template = official_template()
    src = sources.fetch(args.cache)
    wn = sources.WordNet(src["wordnet-base"][0])
    _, glossary = sources.python_docs(src["python3.11-doc"][0])

    texts = text_documents(src)
    random.Random(args.seed).shuffle(texts)
    n_val_text = max(1, len(texts) // 100)
    val_texts, texts = texts[:n_val_text], texts[n_val_text:]
    maker = chat_data.ChatMaker(wn, glossary, seed=args.seed)
    chats = chat_documents(maker, template, args.chats)
    val_chats = chat_documents(maker, template, args.val_chats)
    print(f"{len(texts)} text documents ({sum(map(len, texts)) / 1e6:.1f} M chars), "
          f"{len(chats)} conversations ({sum(map(len, chats)) / 1e6:.1f} M chars)")

    tok = train_tokenizer(texts + chats[:20000])
    write_tokenizer_files(tok, template, args.model_dir)

    os.makedirs(args.data_dir, exist_ok=True)
    counts = {}
    for name, docs, enc in [("text", texts, encode_texts), ("chat", chats, encode_chats),
                            ("val_text", val_texts, encode_texts), ("val_chat", val_chats, encode_chats)]:
        ids = enc(tok, docs)
        save_ids(os.path.join(args.data_dir, f"{name}.u16.xz"), ids)
        counts[name] = {"documents": len(docs), "tokens": int(len(ids)),
                        "loss_tokens": int(((ids & NO_LOSS) == 0).sum())}
        print(f"{name}: {counts[name]}")
    with open(os.path.join(args.model_dir, "tokenizer.json"), "rb") as f:
        tok_sha = hashlib.sha256(f.read()).hexdigest()
    meta = {
        "vocab_size": MODEL_VOCAB, "base_vocab": BASE_VOCAB, "no_loss_bit": NO_LOSS,
        "tokenizer_sha256": tok_sha, "seed": args.seed, "counts": counts,
        "sources": {pkg: dict(sources.SOURCES[pkg], debian_version=src[pkg][1]) for pkg in sources.SOURCES},
        "synthetic": "tools/demo_model/chat_data.py: conversations rendered with the official M2 chat template",
    }
    with open(os.path.join(args.data_dir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
