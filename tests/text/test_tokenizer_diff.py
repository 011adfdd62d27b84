"""Differential test of m2cpp's tokenizer against Hugging Face `tokenizers`.

For each tokenizer: the ids of every document of a large generated corpus
(tools/tokenizer_corpus.py) must be identical to `Tokenizer.encode` with
add_special_tokens False and True, and decoding (with and without
skip_special_tokens, whole and through the streaming detokenizer) must give
`Tokenizer.decode`'s text, also for random id sequences that split
characters. m2cpp runs in its batch mode (`tokenize --jsonl`), one process
per tokenizer and mode.

Tokenizers: the five real files of ../shared/data/tokenizers (skipped if
absent), and variants of tests/data/tokenizer/m2-mini exercising every
supported component (normalizers, pre-tokenizers and their options, model
options, added-token flags, post-processors, decoders).
"""
import copy
import json
import os
import random
import subprocess
import sys

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

SOURCE = os.environ.get("M2CPP_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BINARY = os.environ.get("M2CPP_BINARY", os.path.join(SOURCE, "build", "m2cpp"))
SHARED = os.path.join(SOURCE, "..", "shared", "data", "tokenizers")
MINI = os.path.join(SOURCE, "tests", "data", "tokenizer", "m2-mini", "tokenizer.json")
REAL = ["gpt4o", "qwen3", "deepseek-v3", "m2-layout", "m2-mini"]

sys.path.insert(0, os.path.join(SOURCE, "tools"))
from tokenizer_corpus import build_corpus, sweep_documents  # noqa: E402

SEED = 1234


@pytest.fixture(scope="session")
def base_corpus():
    return build_corpus(seed=SEED, tokenizers_dir=SHARED, with_sweep=False)


@pytest.fixture(scope="session")
def sweep():
    return sweep_documents(SEED)


@pytest.fixture(scope="session")
def corpus(base_corpus, sweep):
    return base_corpus + sweep


@pytest.fixture(scope="session")
def small_corpus(base_corpus, sweep):
    """For the variants: half the documents under 3,000 characters and a
    quarter of the code point sweep (all of it for the normalizers)."""
    docs = [d for i, d in enumerate(base_corpus) if len(d) < 3000 and i % 2 == 0] + sweep[::4]
    assert len(docs) > 2000
    return docs


def write_jsonl(path, values):
    with open(path, "w", encoding="utf-8") as f:
        for v in values:
            f.write(json.dumps(v) + "\n")


def m2cpp(tokenizer_path, jsonl, *flags):
    cmd = [BINARY, "-q", "tokenize", "--tokenizer", str(tokenizer_path), "--jsonl", str(jsonl), *flags]
    out = subprocess.run(cmd, capture_output=True)
    assert out.returncode == 0, f"{' '.join(cmd)} failed: {out.stderr.decode(errors='replace')[:2000]}"
    # Decoded text may contain U+2028 and friends: split on '\n' only.
    return [json.loads(line) for line in out.stdout.decode().split("\n")[:-1]]


def first_difference(a, b):
    for k in range(min(len(a), len(b))):
        if a[k] != b[k]:
            return k
    return min(len(a), len(b))


def report(kind, hf, ours, inputs, hf_tok, limit=5):
    assert len(hf) == len(ours), f"{kind}: {len(ours)} outputs for {len(hf)} inputs"
    bad = [i for i, (a, b) in enumerate(zip(hf, ours)) if a != b]
    lines = []
    for i in bad[:limit]:
        a, b = hf[i], ours[i]
        k = first_difference(a, b)
        lo = max(0, k - 3)
        if isinstance(a, list):
            lines.append(f"  #{i} {inputs[i][:80]!r}: at id {k}: HF {a[lo:k + 5]} "
                         f"{[hf_tok.id_to_token(x) for x in a[lo:k + 5]]} vs ours {b[lo:k + 5]} "
                         f"{[hf_tok.id_to_token(x) for x in b[lo:k + 5]]}")
        else:
            lines.append(f"  #{i} ids {inputs[i][:12]}: at char {k}: HF {a[lo:k + 20]!r} vs ours {b[lo:k + 20]!r}")
    assert not bad, f"{kind}: {len(bad)} of {len(hf)} differ\n" + "\n".join(lines)
    return len(hf)


def random_id_sequences(tok, n, seed):
    """Random ids (beyond the vocabulary too): splits characters, specials."""
    r = random.Random(seed)
    top = max(tok.get_vocab_size(with_added_tokens=True), 1)
    specials = list(tok.get_added_tokens_decoder().keys())
    seqs = []
    for _ in range(n):
        seq = []
        for _ in range(r.randint(1, 24)):
            k = r.random()
            seq.append(r.choice(specials) if k < 0.1 and specials else r.randrange(0, top + 10))
        seqs.append(seq)
    return seqs


def check_tokenizer(path, docs, tmp_path, id_seqs=300, special_step=1):
    """Encode `docs` with HF and m2cpp (add_special_tokens=True on every
    special_step-th document), decode every other encoding and random id
    sequences (skip_special_tokens on and off, whole and streamed)."""
    hf = Tokenizer.from_file(str(path))
    compared = 0
    ids = None
    for special, subset in ((False, docs), (True, docs[::special_step])):
        doc_file = tmp_path / f"docs_{special}.jsonl"
        write_jsonl(doc_file, subset)
        want = [e.ids for e in hf.encode_batch(subset, add_special_tokens=special)]
        got = m2cpp(path, doc_file, *(["--add-special-tokens"] if special else []))
        compared += report(f"encode(add_special_tokens={special})", want, got, subset, hf)
        if not special:
            ids = want
    seqs = ids[::2] + random_id_sequences(hf, id_seqs, seed=len(docs))
    ids_file = tmp_path / "ids.jsonl"
    write_jsonl(ids_file, seqs)
    for skip in (False, True):
        want = hf_decode(hf, seqs, skip)
        for incremental in (False, True):
            flags = ["--decode"] + (["--skip-special-tokens"] if skip else []) + (["--incremental"] if incremental else [])
            got = m2cpp(path, ids_file, *flags)
            kept = [i for i, w in enumerate(want) if w is not None]
            compared += report(f"decode(skip_special_tokens={skip}, incremental={incremental})",
                               [want[i] for i in kept], [got[i] for i in kept], [seqs[i] for i in kept], hf)
    return compared


def hf_decode(hf, seqs, skip):
    """HF's decode of each sequence; None where HF itself panics (its Strip
    decoder underflows on an empty token), which is then not compared."""
    try:
        return hf.decode_batch(seqs, skip_special_tokens=skip)
    except BaseException:  # pyo3 PanicException derives from BaseException
        out = []
        for s in seqs:
            try:
                out.append(hf.decode(s, skip_special_tokens=skip))
            except BaseException:
                out.append(None)
        assert sum(o is None for o in out) < len(out) // 10, "HF failed on too many sequences"
        return out


@pytest.mark.parametrize("name", REAL)
def test_real_tokenizer_matches_hf(name, corpus, tmp_path):
    path = os.path.join(SHARED, name, "tokenizer.json")
    if not os.path.exists(path):
        pytest.skip(f"{path} not available")
    assert len(corpus) > 4000
    check_tokenizer(path, corpus, tmp_path, special_step=8)


# ---- variants: every supported component on the m2-mini vocabulary ----------

def mini():
    with open(MINI, encoding="utf-8") as f:
        return json.load(f)


BYTES = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}


def with_(normalizer=None, pre=None, post=None, decoder=None, **model):
    def build():
        t = mini()
        if normalizer is not None:
            t["normalizer"] = normalizer
        if pre is not None:
            t["pre_tokenizer"] = pre
        if post is not None:
            t["post_processor"] = post
        if decoder is not None:
            t["decoder"] = decoder
        t["model"].update(model)
        return t
    return build


def seq_pre(*steps):
    return {"type": "Sequence", "pretokenizers": list(steps)}


def split(pattern, behavior, invert=False, key="Regex"):
    return {"type": "Split", "pattern": {key: pattern}, "behavior": behavior, "invert": invert}


def added_flags():
    t = mini()
    t["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}]}
    base = max(a["id"] for a in t["added_tokens"]) + 1
    extra = [
        {"content": "<mask>", "single_word": False, "lstrip": True, "rstrip": True, "normalized": False, "special": True},
        {"content": "hello", "single_word": True, "lstrip": False, "rstrip": False, "normalized": True, "special": False},
        {"content": "Ωmega", "single_word": False, "lstrip": False, "rstrip": True, "normalized": True, "special": False},
        {"content": "ab", "single_word": True, "lstrip": True, "rstrip": False, "normalized": False, "special": False},
        {"content": "\n\n", "single_word": False, "lstrip": False, "rstrip": True, "normalized": False, "special": False},
        {"content": "the", "single_word": False, "lstrip": False, "rstrip": False, "normalized": True, "special": True},
        {"content": "ﬁ", "single_word": False, "lstrip": True, "rstrip": False, "normalized": True, "special": False},
        {"content": "in", "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": False},
        {"content": "<mask>", "single_word": False, "lstrip": True, "rstrip": True, "normalized": False, "special": True},
    ]
    for i, e in enumerate(extra):
        e["id"] = base + i
    t["added_tokens"] += extra
    return t


def template(kind):
    def build():
        t = mini()
        ids = {a["content"]: a["id"] for a in t["added_tokens"]}
        if kind == "template":
            t["post_processor"] = {
                "type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": "]~!b[", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                           {"SpecialToken": {"id": "[e~[", "type_id": 0}}],
                "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                "special_tokens": {"]~!b[": {"id": "]~!b[", "ids": [ids["]~!b["]], "tokens": ["]~!b["]},
                                   "[e~[": {"id": "[e~[", "ids": [ids["[e~["]], "tokens": ["[e~["]}}}
        elif kind == "bert":
            t["post_processor"] = {"type": "BertProcessing", "sep": ["[e~[", ids["[e~["]], "cls": ["]~!b[", ids["]~!b["]]}
        elif kind == "roberta":
            t["post_processor"] = {"type": "RobertaProcessing", "sep": ["[e~[", ids["[e~["]],
                                   "cls": ["]~!b[", ids["]~!b["]], "trim_offsets": True, "add_prefix_space": False}
        else:
            t["post_processor"] = {"type": "Sequence", "processors": [
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
                {"type": "BertProcessing", "sep": ["[e~[", ids["[e~["]], "cls": ["]~!b[", ids["]~!b["]]}]}
        return t
    return build


def trained(kind):
    """A small BPE trained by HF itself on seed text (sentencepiece / wordpiece styles)."""
    def build():
        from tokenizer_corpus import SEEDS, CODE
        text = [s for group in SEEDS.values() for s in group] + CODE
        if kind == "suffix":
            tok = Tokenizer(models.BPE(unk_token="<unk>", continuing_subword_prefix="##", end_of_word_suffix="</w>"))
            tok.pre_tokenizer = pre_tokenizers.Whitespace()
            trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=["<unk>"], continuing_subword_prefix="##",
                                          end_of_word_suffix="</w>", show_progress=False)
        else:
            tok = Tokenizer(models.BPE(unk_token="<unk>"))
            tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
            trainer = trainers.BpeTrainer(vocab_size=700, special_tokens=["<unk>", "<s>", "</s>"], show_progress=False,
                                          limit_alphabet=120)
        tok.train_from_iterator(text * 3, trainer)
        t = json.loads(tok.to_str())
        m = t["model"]
        if kind == "suffix":
            t["decoder"] = {"type": "BPEDecoder", "suffix": "</w>"}
            return t
        if kind == "byte_fallback":
            nxt = max(m["vocab"].values()) + 1
            for b in range(256):
                m["vocab"].setdefault(f"<0x{b:02X}>", nxt + b)
            m["byte_fallback"] = True
            t["decoder"] = {"type": "Sequence", "decoders": [
                {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"},
                {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
            t["post_processor"] = {"type": "TemplateProcessing",
                                   "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                              {"Sequence": {"id": "A", "type_id": 0}}],
                                   "pair": [{"Sequence": {"id": "A", "type_id": 0}}],
                                   "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}}
        else:
            m["fuse_unk"] = kind == "unk_fused"
            t["decoder"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False}
        return t
    return build


VARIANTS = {
    "nfc": with_(normalizer={"type": "NFC"}),
    "nfd": with_(normalizer={"type": "NFD"}),
    "nfkc": with_(normalizer={"type": "NFKC"}),
    "nfkd": with_(normalizer={"type": "NFKD"}),
    "nfkc_lowercase": with_(normalizer={"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}]}),
    "lowercase": with_(normalizer={"type": "Lowercase"}),
    "replace_prepend_strip": with_(normalizer={"type": "Sequence", "normalizers": [
        {"type": "Strip", "strip_left": True, "strip_right": True},
        {"type": "Replace", "pattern": {"Regex": r"\s+"}, "content": " "},
        {"type": "Replace", "pattern": {"String": "a"}, "content": "ä"},
        {"type": "Prepend", "prepend": "▁"}]}),
    "gpt2_byte_level": with_(pre={"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}),
    "gpt2_no_prefix": with_(pre={"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}),
    "split_string": with_(pre=seq_pre(split(" ", "Isolated", key="String"), BYTES)),
    "split_empty_matches": with_(pre=seq_pre(split(r"\s*", "MergedWithNext"), split(r"(?<=\p{Ll})(?=\p{Lu})", "Isolated"),
                                             BYTES)),
    "onig_syntax": with_(pre=seq_pre(split(r"\h{2,}|(?i:hello|W[aeiou]+)|\w{,3}|\d|\b|\W", "Isolated"), BYTES)),
    "digits_individual": with_(pre=seq_pre({"type": "Digits", "individual_digits": True}, BYTES)),
    "digits_contiguous": with_(pre=seq_pre({"type": "Digits", "individual_digits": False}, BYTES)),
    "whitespace": with_(pre=seq_pre({"type": "Whitespace"}, BYTES)),
    "whitespace_split": with_(pre=seq_pre({"type": "WhitespaceSplit"}, BYTES)),
    "char_delimiter": with_(pre=seq_pre({"type": "CharDelimiterSplit", "delimiter": "e"}, BYTES)),
    "metaspace_always": with_(pre=seq_pre({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always",
                                           "split": True}, BYTES)),
    "metaspace_first": with_(pre=seq_pre({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first",
                                          "split": True}, BYTES),
                             decoder={"type": "Sequence", "decoders": [
                                 {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
                                 {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": True}]}),
    "metaspace_never": with_(pre=seq_pre({"type": "Metaspace", "replacement": "_", "prepend_scheme": "never",
                                          "split": False}, BYTES)),
    "ignore_merges": with_(ignore_merges=True),
    "no_pre_tokenizer": lambda: {**mini(), "pre_tokenizer": None},
    "decoders_replace_strip": with_(decoder={"type": "Sequence", "decoders": [
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        {"type": "Replace", "pattern": {"Regex": "[aeiou]+"}, "content": "*"},
        {"type": "Strip", "content": "*", "start": 2, "stop": 1}, {"type": "Fuse"}]}),
    "no_decoder": lambda: {**mini(), "decoder": None},
    "added_flags": added_flags,
    "post_template": template("template"),
    "post_bert": template("bert"),
    "post_roberta": template("roberta"),
    "post_sequence": template("sequence"),
    "sentencepiece_byte_fallback": trained("byte_fallback"),
    "sentencepiece_unk": trained("unk"),
    "sentencepiece_unk_fused": trained("unk_fused"),
    "subword_prefix_suffix": trained("suffix"),
}
for behavior in ["Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"]:
    for invert in (False, True):
        VARIANTS[f"split_{behavior}_{'inverted' if invert else 'plain'}"] = with_(
            pre=seq_pre(split(r"\p{P}+|\s|[0-9]", behavior, invert), BYTES))


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_variant_matches_hf(variant, small_corpus, sweep, tmp_path):
    path = tmp_path / "tokenizer.json"
    spec = VARIANTS[variant]()
    with open(path, "w", encoding="utf-8") as f:
        json.dump(spec, f, ensure_ascii=False)
    docs = small_corpus + (sweep[1::4] + sweep[2::4] + sweep[3::4] if spec.get("normalizer") else [])
    # add_special_tokens only matters with a post-processor; check a sample otherwise.
    check_tokenizer(path, docs, tmp_path, id_seqs=200, special_step=1 if spec.get("post_processor") else 10)

