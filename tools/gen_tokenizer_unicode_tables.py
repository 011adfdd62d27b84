#!/usr/bin/env python3
"""Generates the Unicode tables of the m2cpp tokenizer by probing HF `tokenizers`.

Exactness against Hugging Face `tokenizers` needs its Unicode data, not ours:
its regexes run on Oniguruma (Unicode 16 in tokenizers 0.23), its Digits /
Lowercase / whitespace helpers on Rust's std (Unicode 17), `single_word` and
`lstrip`/`rstrip` on the Rust `regex` crate, and NFC/NFKC on an older
`unicode-normalization-alignments` crate (pre-Unicode 11). PCRE2 10.42 and
utf8proc 2.8 on Debian bookworm are Unicode 14 and 15. So every table here is
read back from the reference library itself, code point by code point:

  unicode_data_categories.cpp  general category of every code point, as runs
                               (what `\\p{..}` means to Oniguruma), and the
                               code points the system PCRE2 puts in a
                               category that Oniguruma does not
  unicode_data_hf.cpp          the sets and maps of the Rust side, and the
                               code points whose normalization data
                               HF does not have (masks over utf8proc)

Run:  python3 tools/gen_tokenizer_unicode_tables.py   (needs tokenizers, libutf8proc)
The output is deterministic for a given tokenizers / utf8proc version.
"""
import ctypes
import os
import sys

import tokenizers
from tokenizers import AddedToken, Regex, Tokenizer, models, normalizers, pre_tokenizers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_DIR = os.path.join(ROOT, "src", "text", "tokenizer")

# The order is the C++ enum GeneralCategory (unicode_data.h); Cn is last.
CATEGORIES = ("Lu Ll Lt Lm Lo Mn Mc Me Nd Nl No Pc Pd Ps Pe Pi Pf Po "
              "Sm Sc Sk So Zs Zl Zp Cc Cf Co Cn").split()
ALL_CPS = [c for c in range(0x110000) if not 0xD800 <= c < 0xE000]
ALL_TEXT = "".join(map(chr, ALL_CPS))


def onig_set(pattern):
    """Code points a one-character Oniguruma pattern matches, via a Split."""
    split = pre_tokenizers.Split(Regex(pattern), "removed", invert=True)
    return {ord(ch) for piece, _ in split.pre_tokenize_str(ALL_TEXT) for ch in piece}


def ranges(cps):
    out = []
    for c in sorted(cps):
        if out and out[-1][1] == c - 1:
            out[-1][1] = c
        else:
            out.append([c, c])
    return out


def probe_categories():
    sets = {cat: onig_set(r"\p{%s}" % cat) for cat in CATEGORIES}
    seen = {}
    for cat, cps in sets.items():
        for c in cps:
            if c in seen:
                sys.exit(f"U+{c:04X} is in both {seen[c]} and {cat}")
            seen[c] = cat
    missing = [c for c in ALL_CPS if c not in seen]
    if missing:
        sys.exit(f"{len(missing)} code points without a category, first U+{missing[0]:04X}")
    # Surrogates cannot occur in UTF-8; give them their category so runs stay few.
    for c in range(0xD800, 0xE000):
        seen[c] = "Cs"
    runs = []
    for c in range(0x110000):
        cat = seen[c]
        if not runs or runs[-1][1] != cat:
            runs.append((c, cat))
    return sets, runs


def onig_unicode_version(sets):
    """Oniguruma's Unicode version, from characters first assigned in 16.0 / 17.0."""
    if 0x1C89 in sets["Lu"] and 0x11DE0 in sets["Cn"]:
        return "16.0.0"
    sys.exit("Oniguruma is not Unicode 16: update onig_unicode_version()")


def check_classes(sets):
    """Oniguruma's shorthand classes: \\d is Nd; \\s and \\w are returned (\\w is
    Alphabetic, marks, Nd, Pc and a few Latin-1 No, no simple category union)."""
    if onig_set(r"\d") != sets["Nd"]:
        sys.exit("Oniguruma \\d is not Nd")
    return onig_set(r"\s"), onig_set(r"\w")


def rust_numeric():
    """char::is_numeric, seen through the Digits pre-tokenizer."""
    sep = "a"
    text = sep.join(chr(c) for c in ALL_CPS if chr(c) != sep)
    out = pre_tokenizers.Digits(individual_digits=True).pre_tokenize_str(text)
    return {ord(s) for s, _ in out if len(s) == 1 and s != sep}


def rust_whitespace():
    """char::is_whitespace, seen through WhitespaceSplit (it drops them)."""
    sep = "a"
    text = sep.join(chr(c) for c in ALL_CPS if chr(c) != sep)
    kept = {ord(ch) for s, _ in pre_tokenizers.WhitespaceSplit().pre_tokenize_str(text) for ch in s}
    return {c for c in ALL_CPS if chr(c) != sep} - kept


def regex_crate_set(flag):
    """`\\w` (single_word) or `\\s` (lstrip) of the Rust regex crate, via added tokens."""
    tok = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    if flag == "word":
        tok.add_tokens([AddedToken("@", single_word=True, normalized=False)])
        chunks = [chr(c) + "@ " for c in ALL_CPS if chr(c) != "@"]
    else:
        tok.add_tokens([AddedToken("@", lstrip=True, normalized=False)])
        chunks = ["b" + chr(c) + "@" for c in ALL_CPS if chr(c) != "@"]
    cps = [c for c in ALL_CPS if chr(c) != "@"]
    text = "".join(chunks)
    enc = tok.encode(text, add_special_tokens=False)
    starts = {}
    pos = 0
    for c, chunk in zip(cps, chunks):
        starts[pos] = c
        pos += len(chunk)
    hits = set()
    for tid, (a, b) in zip(enc.ids, enc.offsets):
        if tid != 1:
            continue
        if flag == "word":
            hits.add(starts[a - 1])  # the token matched: the char before it is not a word char
        elif b - a == 2:
            hits.add(starts[a - 1])  # the token swallowed the char before it
    if flag == "word":
        return set(cps) - hits
    return hits


def rust_lowercase():
    sep = "\x01"
    chars = [c for c in ALL_CPS if c != 1]
    out = normalizers.Lowercase().normalize_str(sep.join(map(chr, chars))).split(sep)
    assert len(out) == len(chars)
    return {c: s for c, s in zip(chars, out) if s != chr(c)}


class Pcre2:
    """The system libpcre2-8, to find where its categories exceed Oniguruma's."""

    def __init__(self):
        self.lib = ctypes.CDLL("libpcre2-8.so.0")
        L = self.lib
        L.pcre2_compile_8.restype = ctypes.c_void_p
        L.pcre2_compile_8.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint32, ctypes.POINTER(ctypes.c_int),
                                      ctypes.POINTER(ctypes.c_size_t), ctypes.c_void_p]
        L.pcre2_match_data_create_8.restype = ctypes.c_void_p
        L.pcre2_match_data_create_8.argtypes = [ctypes.c_uint32, ctypes.c_void_p]
        L.pcre2_jit_compile_8.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
        L.pcre2_jit_match_8.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_size_t,
                                        ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p]
        L.pcre2_get_ovector_pointer_8.restype = ctypes.POINTER(ctypes.c_size_t)
        L.pcre2_get_ovector_pointer_8.argtypes = [ctypes.c_void_p]
        L.pcre2_config_8.argtypes = [ctypes.c_uint32, ctypes.c_void_p]
        buf = ctypes.create_string_buffer(64)
        L.pcre2_config_8(10, buf)  # PCRE2_CONFIG_UNICODE_VERSION
        self.unicode_version = buf.value.decode()

    def category_set(self, cat, text, starts):
        """Code points of `text` (all code points, UTF-8) PCRE2's \\p{cat} matches."""
        L = self.lib
        pattern = f"\\p{{{cat}}}".encode()
        err, off = ctypes.c_int(), ctypes.c_size_t()
        code = L.pcre2_compile_8(pattern, len(pattern), 0x00080000 | 0x00020000, ctypes.byref(err), ctypes.byref(off),
                                 None)  # PCRE2_UTF | PCRE2_UCP
        L.pcre2_jit_compile_8(code, 1)
        md = L.pcre2_match_data_create_8(1, None)
        out, pos = set(), 0
        while L.pcre2_jit_match_8(code, text, len(text), pos, 0x40000000, md, None) > 0:  # PCRE2_NO_UTF_CHECK
            ov = L.pcre2_get_ovector_pointer_8(md)
            out.add(starts[ov[0]])
            pos = ov[1]
        return out


def pcre2_removals(sets):
    """Per category, the code points PCRE2 matches that Oniguruma does not
    (category changes between their Unicode versions, e.g. U+1171E Mn->Mc)."""
    pcre2 = Pcre2()
    cps = [c for c in ALL_CPS]
    text = ALL_TEXT.encode()
    starts = {}
    pos = 0
    for c in cps:
        starts[pos] = c
        pos += len(chr(c).encode())
    removals = {}
    for cat in CATEGORIES:
        if cat == "Cn":
            continue
        extra = pcre2.category_set(cat, text, starts) - sets[cat]
        if extra:
            removals[cat] = extra
    return pcre2.unicode_version, removals


class Utf8proc:
    def __init__(self):
        self.lib = ctypes.CDLL("libutf8proc.so.2")
        self.libc = ctypes.CDLL("libc.so.6")
        for fn in ("utf8proc_NFC", "utf8proc_NFD", "utf8proc_NFKC", "utf8proc_NFKD"):
            getattr(self.lib, fn).restype = ctypes.c_void_p
        self.lib.utf8proc_unicode_version.restype = ctypes.c_char_p
        self.version = self.lib.utf8proc_unicode_version().decode()

    def norm(self, form, text):
        p = getattr(self.lib, "utf8proc_" + form)(text.encode())
        out = ctypes.string_at(p).decode()
        self.libc.free(ctypes.c_void_p(p))
        return out


def batch(fn, texts, sep="\x01"):
    out = fn(sep.join(texts)).split(sep)
    assert len(out) == len(texts)
    return out


def normalization_masks(up):
    """Code points whose normalization data utf8proc has and HF does not."""
    chars = [c for c in ALL_CPS if c > 1]  # U+0000 ends a C string, U+0001 separates
    texts = [chr(c) for c in chars]
    no_decomp = set()
    for form in ("NFD", "NFKD"):
        hf = batch(getattr(normalizers, form)().normalize_str, texts)
        ref = batch(lambda s: up.norm(form, s), texts)
        for c, a, b in zip(chars, hf, ref):
            if a != b:
                if a != chr(c):
                    sys.exit(f"{form}(U+{c:04X}): HF {a!r}, utf8proc {b!r}: not a missing entry")
                no_decomp.add(c)
    # Canonical combining class 0 in HF but not in utf8proc: a mark that HF
    # does not know stays in place instead of being reordered. Probe with
    # U+0334 (ccc 1) after it and U+0345 (ccc 240) before it.
    hf_nfd = normalizers.NFD().normalize_str
    after = batch(hf_nfd, ["a" + chr(c) + "\u0334" for c in chars])
    before = batch(hf_nfd, ["a\u0345" + chr(c) for c in chars])
    ref_after = batch(lambda s: up.norm("NFD", s), ["a" + chr(c) + "\u0334" for c in chars])
    ref_before = batch(lambda s: up.norm("NFD", s), ["a\u0345" + chr(c) for c in chars])
    zero_ccc = set()
    for c, a, b, ra, rb in zip(chars, after, before, ref_after, ref_before):
        if (a, b) != (ra, rb):
            if c in no_decomp:
                continue  # explained by the missing decomposition
            if a != "a" + chr(c) + "\u0334" or b != "a\u0345" + chr(c):
                sys.exit(f"ccc of U+{c:04X} differs in a way a missing entry does not explain")
            zero_ccc.add(c)
    # Primary composites utf8proc forms and HF does not.
    hf_nfc = normalizers.NFC().normalize_str
    candidates = []
    for c in ALL_CPS[1:]:
        d = up.norm("NFD", chr(c))
        if len(d) == 2 and up.norm("NFC", d) == chr(c):
            candidates.append((c, d))
    hf = batch(hf_nfc, [d for _, d in candidates])
    no_compose = {c for (c, d), got in zip(candidates, hf) if got != chr(c)}
    for c, d in candidates:
        if c in no_compose and hf[candidates.index((c, d))] != d:
            sys.exit(f"NFC of the decomposition of U+{c:04X} is neither composed nor kept")
    return no_decomp, zero_ccc, no_compose


def fmt_ranges(name, rs, per_line=6):
    lines = [f"const CodepointRange {name}[] = {{"]
    items = [f"{{0x{a:X}, 0x{b:X}}}," for a, b in rs]
    for i in range(0, len(items), per_line):
        lines.append("    " + " ".join(items[i:i + per_line]))
    lines.append("};")
    lines.append(f"const std::span<const CodepointRange> {name.replace('kRanges', 'k')}({name});")
    return lines


HEADER = """// GENERATED by tools/gen_tokenizer_unicode_tables.py from HF tokenizers {tv}
// ({what}). Do not edit; rerun the generator.
#include "text/tokenizer/unicode_data.h"

namespace m2::text::tok::unicode_data {{
"""


def main():
    print(f"tokenizers {tokenizers.__version__}", file=sys.stderr)
    sets, runs = probe_categories()
    onig_space, onig_word = check_classes(sets)
    white = rust_whitespace()
    if white != onig_space:
        sys.exit("Rust char::is_whitespace differs from Oniguruma \\s")
    numeric = rust_numeric()
    onig_numeric = sets["Nd"] | sets["Nl"] | sets["No"]
    regex_word = regex_crate_set("word")
    regex_space = regex_crate_set("space")
    if regex_space != white:
        sys.exit("regex-crate \\s differs from White_Space")
    lower = rust_lowercase()
    up = Utf8proc()
    no_decomp, zero_ccc, no_compose = normalization_masks(up)

    tv = tokenizers.__version__
    out = [HEADER.format(tv=tv, what="Oniguruma general categories").rstrip("\n"), ""]
    out.append("// Every code point's general category: run i covers [start_i, start_{i+1}).")
    out.append("using enum GeneralCategory;")
    out.append("const CategoryRun kCategoryRunsData[] = {")
    items = [f"{{0x{s:X},k{cat}}}," for s, cat in runs]
    for i in range(0, len(items), 9):
        out.append("    " + " ".join(items[i:i + 9]))
    out.append("};")
    out.append("const std::span<const CategoryRun> kCategoryRuns(kCategoryRunsData);")
    out.append(f'const char kOnigUnicodeVersion[] = "{onig_unicode_version(sets)}";')
    pcre2_version, removals = pcre2_removals(sets)
    out.append("")
    out.append(f"// Code points PCRE2 (Unicode {pcre2_version}) matches with \\p{{cat}} and Oniguruma does not.")
    out.append(f'const char kPcre2UnicodeVersion[] = "{pcre2_version}";')
    items = [f"{{k{cat}, {{0x{a:X}, 0x{b:X}}}}}," for cat in CATEGORIES if cat in removals
             for a, b in ranges(removals[cat])]
    if items:
        out.append("const CategoryRange kPcre2RemovalsData[] = {")
        for i in range(0, len(items), 4):
            out.append("    " + " ".join(items[i:i + 4]))
        out.append("};")
        out.append("const std::span<const CategoryRange> kPcre2Removals(kPcre2RemovalsData);")
    else:
        out.append("const std::span<const CategoryRange> kPcre2Removals;")
    out.append("")
    out.append("}  // namespace m2::text::tok::unicode_data")
    with open(os.path.join(OUT_DIR, "unicode_data_categories.cpp"), "w") as f:
        f.write("\n".join(out) + "\n")

    out = [HEADER.format(tv=tv, what=f"Rust std / regex crate sets, Lowercase, "
                         f"normalization masks over utf8proc {up.version}").rstrip("\n"), ""]
    out.append("// char::is_numeric beyond the Oniguruma N categories (Rust std is newer).")
    if not onig_numeric <= numeric:
        sys.exit("Oniguruma N is not a subset of char::is_numeric")
    out += fmt_ranges("kRangesRustNumericExtra", ranges(numeric - onig_numeric))
    out.append("")
    out.append("// Oniguruma `\\w`, in full.")
    out += fmt_ranges("kRangesOnigWord", ranges(onig_word))
    out.append("")
    out.append("// `\\w` of the Rust regex crate (added tokens' single_word), in full.")
    out += fmt_ranges("kRangesRegexWord", ranges(regex_word))
    out.append("")
    out.append("// White_Space: Oniguruma \\s, char::is_whitespace and regex-crate \\s agree.")
    out += fmt_ranges("kRangesWhiteSpace", ranges(white))
    out.append("")
    single = sorted((c, s) for c, s in lower.items() if len(s) == 1)
    multi = sorted((c, s) for c, s in lower.items() if len(s) != 1)
    if len(multi) != 1 or multi[0] != (0x130, "i\u0307"):
        sys.exit(f"unexpected multi-character lowercase mappings: {multi}")
    out.append("// char::to_lowercase, one code point to one (U+0130 is special-cased in code).")
    out.append("const LowercasePair kLowercaseData[] = {")
    items = [f"{{0x{c:X}, 0x{ord(s):X}}}," for c, s in single]
    for i in range(0, len(items), 6):
        out.append("    " + " ".join(items[i:i + 6]))
    out.append("};")
    out.append("const std::span<const LowercasePair> kLowercase(kLowercaseData);")
    out.append("")
    out.append(f"// Decomposable in utf8proc {up.version}, unknown to HF's normalizer: kept as is.")
    out += fmt_ranges("kRangesNoDecomposition", ranges(no_decomp))
    out.append("// Nonzero combining class in utf8proc, unknown (class 0) to HF.")
    out += fmt_ranges("kRangesZeroCombiningClass", ranges(zero_ccc))
    out.append("// Primary composites utf8proc forms and HF does not.")
    out += fmt_ranges("kRangesNoComposition", ranges(no_compose))
    out.append("")
    out.append(f'const char kUtf8procUnicodeVersion[] = "{up.version}";')
    out.append("")
    out.append("}  // namespace m2::text::tok::unicode_data")
    with open(os.path.join(OUT_DIR, "unicode_data_hf.cpp"), "w") as f:
        f.write("\n".join(out) + "\n")
    print(f"runs {len(runs)}, numeric+{len(numeric - onig_numeric)}, word {len(regex_word)}, "
          f"lower {len(lower)}, no_decomp {len(no_decomp)}, zero_ccc {len(zero_ccc)}, "
          f"no_compose {len(no_compose)}", file=sys.stderr)


if __name__ == "__main__":
    main()
