"""Redistributable English text for the demo model, from what Debian packages ship.

Each source is a Debian package fetched with `apt-get download` (no install, no
root needed) and unpacked with `dpkg-deb -x` into a cache folder; its licence
is recorded in SOURCES (and copied into models/m2-demo/MODEL_CARD.md):

  wordnet-base        WordNet 3.0 (Princeton): glosses, examples, relations,
                      used to write the synthetic "tell me about X" answers.
                      WordNet 3.0 licence: use, copy, modify and distribute for
                      any purpose, with the copyright notice kept.
  r-cran-janeaustenr  Jane Austen's six novels (public-domain text; the R
                      package is MIT).
  python3.11-doc      The Python 3.11 documentation sources (reST): tutorial,
                      FAQ, HOWTOs, glossary, library and language reference.
                      PSF License Version 2.

Nothing here is downloaded at training time: prepare.py runs this once on a
CPU machine that reaches Debian's archive and writes token ids.
"""

import glob
import gzip
import os
import re
import struct
import subprocess
import zlib

SOURCES = {
    "wordnet-base": {
        "what": "WordNet 3.0 lexical database (glosses, example phrases, synonyms, hypernyms, hyponyms, parts, antonyms)",
        "licence": "WordNet 3.0 License (Princeton University): permission to use, copy, modify and distribute "
                   "for any purpose without fee, provided the copyright notice is kept. "
                   "\"WordNet 3.0 Copyright 2006 by Princeton University. All rights reserved.\"",
        "used_as": "facts for the synthetic chat answers (definitions, kinds, parts, synonyms, opposites)",
    },
    "r-cran-janeaustenr": {
        "what": "Jane Austen's six completed novels (Emma, Mansfield Park, Northanger Abbey, Persuasion, "
                "Pride and Prejudice, Sense and Sensibility)",
        "licence": "novels in the public domain (Project Gutenberg texts); the R package janeaustenr is MIT "
                   "(Copyright 2016-2017 Julia Silge)",
        "used_as": "plain English prose",
    },
    "python3.11-doc": {
        "what": "Python 3.11 documentation sources (tutorial, FAQ, HOWTOs, glossary, library, reference), "
                "reStructuredText markup removed, code blocks dropped",
        "licence": "PSF License Version 2 (Python Software Foundation); code examples Zero-Clause BSD",
        "used_as": "plain English technical prose; the glossary also answers \"what is X in Python?\"",
    },
}


def fetch(cache_dir):
    """Downloads and unpacks every source package once; returns {package: (root, version)}."""
    os.makedirs(cache_dir, exist_ok=True)
    out = {}
    for pkg in SOURCES:
        root = os.path.join(cache_dir, pkg)
        debs = glob.glob(os.path.join(cache_dir, f"{pkg}_*.deb"))
        if not debs:
            subprocess.run(["apt-get", "download", "-q", pkg], cwd=cache_dir, check=True,
                           stdout=subprocess.DEVNULL)
            debs = glob.glob(os.path.join(cache_dir, f"{pkg}_*.deb"))
        deb = sorted(debs)[-1]
        if not os.path.isdir(root):
            subprocess.run(["dpkg-deb", "-x", deb, root], check=True)
        version = subprocess.run(["dpkg-deb", "-f", deb, "Version"], check=True, capture_output=True,
                                 text=True).stdout.strip()
        out[pkg] = (root, version)
    return out


# ---- WordNet -------------------------------------------------------------------------

POS_FILES = {"n": "noun", "v": "verb", "a": "adj", "r": "adv"}


class Synset:
    __slots__ = ("offset", "pos", "lemmas", "ptrs", "definition", "examples")

    def __init__(self, offset, pos, lemmas, ptrs, definition, examples):
        self.offset, self.pos, self.lemmas, self.ptrs = offset, pos, lemmas, ptrs
        self.definition, self.examples = definition, examples


class WordNet:
    """The parts of WordNet 3.0's data.* and index.* files that the chat data uses.

    synsets[(pos, offset)] -> Synset; senses[pos][lemma] -> synset keys, most
    frequent sense first; counts[pos][lemma] -> how often the word was tagged
    in the semantic concordance (cntlist.rev), a measure of how common it is."""

    def __init__(self, root):
        d = os.path.join(root, "usr/share/wordnet")
        self.synsets, self.senses, self.counts = {}, {}, {}
        for pos, name in POS_FILES.items():
            with open(os.path.join(d, "data." + name), encoding="latin-1") as f:
                for line in f:
                    if line.startswith("  "):
                        continue  # licence header
                    s = self._parse_data_line(line)
                    self.synsets[(pos, s.offset)] = s
            self.senses[pos], self.counts[pos] = {}, {}
            with open(os.path.join(d, "index." + name), encoding="latin-1") as f:
                for line in f:
                    if line.startswith("  "):
                        continue
                    fields = line.split()
                    lemma, n_syn, n_ptr = fields[0], int(fields[2]), int(fields[3])
                    offsets = fields[6 + n_ptr:6 + n_ptr + n_syn]
                    self.senses[pos][lemma] = [(pos, o) for o in offsets]
                    self.counts[pos][lemma] = 0
        with open(os.path.join(d, "cntlist.rev"), encoding="latin-1") as f:
            for line in f:
                key, _, count = line.split()
                lemma, _, lex_sense = key.partition("%")
                pos = "nvara"[int(lex_sense[0]) - 1]  # ss_type 1..5; 5 = adjective satellite
                if lemma in self.counts[pos]:
                    self.counts[pos][lemma] += int(count)

    @staticmethod
    def _parse_data_line(line):
        data, _, gloss = line.partition(" | ")
        f = data.split()
        offset, ss_type = f[0], f[2]
        pos = "a" if ss_type == "s" else ss_type
        n_words = int(f[3], 16)
        lemmas = [re.sub(r"\(.*\)$", "", f[4 + 2 * i]) for i in range(n_words)]
        i = 4 + 2 * n_words
        n_ptrs = int(f[i])
        ptrs = []
        for k in range(n_ptrs):
            sym, off, ppos, srctgt = f[i + 1 + 4 * k:i + 5 + 4 * k]
            ppos = "a" if ppos == "s" else ppos
            ptrs.append((sym, (ppos, off), srctgt))
        parts = [p.strip() for p in gloss.strip().split(";")]
        definition = "; ".join(p for p in parts if p and not p.startswith('"'))
        examples = [p.strip('"').strip() for p in re.findall(r'"[^"]+"', gloss)]
        return Synset(offset, pos, lemmas, ptrs, definition, examples)

    def related(self, synset, symbols):
        """Synsets reached from `synset` by pointers whose symbol is in `symbols`."""
        return [self.synsets[key] for sym, key, _ in synset.ptrs if sym in symbols and key in self.synsets]


# ---- Jane Austen (R lazy-load database) ----------------------------------------------------


class _RReader:
    """Just enough of R's XDR serialization (version 2/3) to read character vectors."""

    def __init__(self, data):
        self.d, self.i = data, 0

    def int(self):
        v = struct.unpack_from(">i", self.d, self.i)[0]
        self.i += 4
        return v

    def header(self):
        assert self.d[:2] == b"X\n", "not an XDR-serialized R object"
        self.i = 2
        version = self.int()
        self.int(), self.int()  # writer and minimum reader version
        if version == 3:
            n = self.int()
            self.i += n  # native encoding name

    def strsxp(self):
        flags = self.int()
        assert flags & 0xFF == 16, f"expected a character vector, got SEXP type {flags & 0xFF}"
        n = self.int()
        out = []
        for _ in range(n):
            cflags = self.int()
            assert cflags & 0xFF == 9, "expected CHARSXP"
            length = self.int()
            if length == -1:
                out.append("")
                continue
            out.append(self.d[self.i:self.i + length].decode("utf-8", errors="replace"))
            self.i += length
        return out


def austen_novels(root):
    """{name: text} for the six novels in janeaustenr's data/Rdata.rdb."""
    base = glob.glob(os.path.join(root, "usr/lib/R/site-library/janeaustenr/data"))[0]
    index = gzip.decompress(open(os.path.join(base, "Rdata.rdx"), "rb").read())
    rdb = open(os.path.join(base, "Rdata.rdb"), "rb").read()
    # The index's first element, 'variables', is a list of (offset, length)
    # integer pairs, one per data set, followed by its 'names' attribute.
    pairs = re.findall(rb"\x00\x00\x00\x0d\x00\x00\x00\x02(.{8})", index, flags=re.S)
    r = _RReader(index)
    r.i = index.index(b"\x00\x00\x00\x05names") + 9
    names = r.strsxp()
    novels = {}
    for name, pair in zip(names, pairs):
        offset, length = struct.unpack(">ii", pair)
        blob = rdb[offset:offset + length]
        data = zlib.decompress(blob[4:])  # 4-byte uncompressed size, then zlib
        r = _RReader(data)
        r.header()
        lines = r.strsxp()
        novels[name] = _join_lines(lines)
    return novels


def _join_lines(lines):
    """Hard-wrapped lines -> one paragraph per line, chapter headings dropped."""
    paras, cur = [], []
    for line in lines:
        line = line.strip()
        if not line:
            if cur:
                paras.append(" ".join(cur))
                cur = []
            continue
        cur.append(line)
    if cur:
        paras.append(" ".join(cur))
    keep = []
    for p in paras:
        p = re.sub(r"\s+", " ", p.replace("_", ""))
        if re.fullmatch(r"(CHAPTER|Chapter|VOLUME|Volume)\b.*", p) or len(p) < 20 or p.isupper():
            continue
        keep.append(p)
    return "\n\n".join(keep)


# ---- Python documentation (reST sources) ---------------------------------------------------

DOC_DIRS = ["tutorial", "faq", "howto", "library", "reference", "glossary.rst.txt"]


def _clean_inline(text):
    text = re.sub(r":pep:`(\d+)`", r"PEP \1", text)
    text = re.sub(r":[a-z:]+:`~?!?([^`<]*?)(?:\s*<[^>]*>)?`", r"\1", text)  # :func:`x`, :ref:`t <l>`
    text = re.sub(r"`([^`<]+?)\s*<[^>]+>`__?", r"\1", text)  # `text <url>`_
    text = re.sub(r"``([^`]+)``", r"\1", text)
    text = re.sub(r"`([^`]+)`_?", r"\1", text)
    text = re.sub(r"\*\*([^*]+)\*\*", r"\1", text)
    text = re.sub(r"\*([^*\s][^*]*)\*", r"\1", text)
    text = re.sub(r"\s*\[#\d*\]_", "", text)
    text = text.replace("\\", "")
    return re.sub(r"\s+", " ", text).strip()


def _rst_paragraphs(source):
    """Prose paragraphs of one reST file: no directives, code, tables or headings."""
    out = []
    blocks = re.split(r"\n\s*\n", source)
    skip_indent = None  # skip indented blocks following '::' or a directive
    for block in blocks:
        lines = block.split("\n")
        indent = len(lines[0]) - len(lines[0].lstrip())
        stripped = block.strip()
        if skip_indent is not None:
            if indent > skip_indent:
                continue
            skip_indent = None
        if not stripped:
            continue
        if stripped.startswith(".."):
            skip_indent = indent
            continue
        if stripped.endswith("::"):
            skip_indent = indent
            stripped = stripped[:-2].rstrip() + ("." if not stripped.endswith(" ::") else "")
            if stripped in ("", "."):
                continue
        if indent > 0 and not stripped.startswith(("*", "-", "#.")):
            continue  # quoted/indented material: mostly code or tables
        if re.search(r"^[=\-~^\"'`#*+]{3,}\s*$", block, re.M) or stripped.startswith((">>>", "+", "|", "$")):
            continue
        text = _clean_inline(re.sub(r"^\s*(?:[*\-]|#\.)\s+", "", stripped))
        letters = sum(c.isalpha() or c == " " for c in text)
        if len(text) < 40 or letters < 0.85 * len(text) or not text.endswith((".", "?", "!", ":")):
            continue
        out.append(text)
    return out


def python_docs(root):
    """(prose paragraphs, glossary {term: definition}) from the Python 3.11 docs."""
    src = glob.glob(os.path.join(root, "usr/share/doc/python3.11/html/_sources"))[0]
    paras = []
    for entry in DOC_DIRS:
        path = os.path.join(src, entry)
        files = [path] if os.path.isfile(path) else sorted(glob.glob(os.path.join(path, "**/*.rst.txt"), recursive=True))
        for fname in files:
            with open(fname, encoding="utf-8") as f:
                paras.extend(_rst_paragraphs(f.read()))
    return paras, _glossary(os.path.join(src, "glossary.rst.txt"))


def _glossary(path):
    """Python glossary terms with the first paragraph of their definition."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    terms = {}
    for m in re.finditer(r"^   (\S[^\n]*)\n((?:      [^\n]*\n|\n)+)", text, re.M):
        term = _clean_inline(m.group(1))
        body = _clean_inline(m.group(2).strip().split("\n\n")[0])
        # At most three sentences, none ending in ':' (those introduce a list).
        sentences = [x for x in re.split(r"(?<=[.!?])\s+", body) if not x.endswith(":")][:3]
        definition = " ".join(sentences)
        if len(definition) > 30 and re.match(r"[a-z]", term):
            terms[term] = definition
    return terms
