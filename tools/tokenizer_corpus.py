#!/usr/bin/env python3
"""Deterministic, deliberately nasty text corpus for tokenizer differential tests.

Every document is generated here from a fixed seed; the seed sentences below
were written for this project (no third-party text), so the corpus carries
no licence obligations. It covers: many scripts, NFC/NFD pairs and unordered
combining marks, characters newer than one Unicode library or another,
emoji ZWJ sequences / flags / skin tones / keycaps, code with tabs and CRLF,
runs of spaces and newlines, control, format, private-use and noncharacter
code points, long digit runs, contractions in every case, every added-token
string of the test tokenizers embedded whole, adjacent and partial, very long
words (tens of KB), empty and one-character documents, and a sweep over the
code point space.

Usage: python3 tools/tokenizer_corpus.py OUT.jsonl [--seed N] [--scale F]
(one JSON string per line). Tests import build_corpus() directly.
"""
import argparse
import json
import os
import random
import unicodedata

SEEDS = {
    "en": ["The quick brown fox jumps over the lazy dog, doesn't it?",
           "We'll meet at 10:30 a.m. on Tuesday -- bring the blue folder & the keys!",
           "She said: \"It's not what you think; it's what you've DONE.\""],
    "fr": ["L'été dernier, nous sommes allés à la mer avec nos cousins.",
           "Où est la bibliothèque ? Elle est fermée aujourd'hui."],
    "de": ["Größere Straßen führen über die Brücke zum Bahnhof.",
           "Die Übersetzung war schwierig, aber wir haben es geschafft."],
    "es": ["¿Dónde está el niño? ¡Está jugando en el jardín!",
           "La canción que escuchamos anoche era muy bonita."],
    "pt": ["A informação não está disponível, mas você pode voltar amanhã."],
    "it": ["Perché non andiamo al mercato più tardi? È già chiuso."],
    "pl": ["Zażółć gęślą jaźń, a potem idź do sklepu po chleb."],
    "cs": ["Příliš žluťoučký kůň úpěl ďábelské ódy."],
    "tr": ["İstanbul'da yağmur yağıyor; ılık bir gün değil."],
    "vi": ["Tiếng Việt có nhiều dấu thanh: à, á, ả, ã, ạ, ầ, ấ, ẩ, ẫ, ậ.",
           "Chúng tôi đã đi học sáng nay."],
    "is": ["Þetta er íslenskur texti með ð og þ og æ."],
    "hu": ["Árvíztűrő tükörfúrógép és őszi szél."],
    "fi": ["Hyvää huomenta, mitä kuuluu tänään?"],
    "ru": ["Съешь же ещё этих мягких французских булок, да выпей чаю.",
           "Мы встретимся завтра в 9 часов у входа в метро."],
    "uk": ["Ґанок їжака й європейський щит: ще одна фраза."],
    "el": ["Η γρήγορη καφέ αλεπού πηδάει πάνω από τον τεμπέλη σκύλο.",
           "Ευχαριστώ πολύ για τη βοήθεια σας!"],
    "hy": ["Բարև ձեզ, ինչպե՞ս եք այսօր։"],
    "ka": ["გამარჯობა, როგორ ხარ დღეს?"],
    "he": ["שלום עולם, מה שלומך היום? אני בסדר.", "הַשָּׁלוֹם עָלֵינוּ"],
    "ar": ["مرحبا بالعالم، كيف حالك اليوم؟", "بِسْمِ اللَّهِ الرَّحْمَٰنِ الرَّحِيمِ"],
    "fa": ["سلام دنیا، امروز هوا خوب است."],
    "ur": ["آج موسم بہت اچھا ہے۔"],
    "hi": ["नमस्ते दुनिया, आज मौसम बहुत अच्छा है।", "क्षत्रिय और ज्ञान शब्दों में संयुक्ताक्षर हैं।"],
    "bn": ["আমি বাংলায় গান গাই।"],
    "ta": ["வணக்கம் உலகம், இன்று எப்படி இருக்கிறீர்கள்?"],
    "te": ["నమస్కారం, మీరు ఎలా ఉన్నారు?"],
    "kn": ["ನಮಸ್ಕಾರ, ನೀವು ಹೇಗಿದ್ದೀರಿ?"],
    "ml": ["നമസ്കാരം, സുഖമാണോ?"],
    "gu": ["નમસ્તે, તમે કેમ છો?"],
    "pa": ["ਸਤ ਸ੍ਰੀ ਅਕਾਲ, ਤੁਸੀਂ ਕਿਵੇਂ ਹੋ?"],
    "si": ["ආයුබෝවන්, ඔබට කොහොමද?"],
    "th": ["ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ แต่เว้นวรรคระหว่างประโยค"],
    "lo": ["ສະບາຍດີ, ເຈົ້າສະບາຍດີບໍ?"],
    "km": ["សួស្តី តើអ្នកសុខសប្បាយទេ?"],
    "my": ["မင်္ဂလာပါ၊ နေကောင်းလား။"],
    "bo": ["བཀྲ་ཤིས་བདེ་ལེགས། ཁྱེད་རང་སྐུ་གཟུགས་བདེ་པོ་ཡིན་པས།"],
    "zh": ["我能吞下玻璃而不伤身体。今天天气很好，我们去公园散步吧！",
           "這是繁體中文的句子，包含「引號」和《書名號》。"],
    "ja": ["私はガラスを食べられます。それは私を傷つけません。",
           "カタカナとひらがな、そして漢字が混ざった文章です。ｶﾀｶﾅ（半角）も。"],
    "ko": ["나는 유리를 먹을 수 있어요. 그래도 아프지 않아요.", "한국어 문장에는 띄어쓰기가 있습니다."],
    "mn": ["Сайн байна уу, өнөөдөр цаг агаар сайхан байна."],
    "am": ["ሰላም ለዓለም፤ እንዴት ነህ?"],
    "yo": ["Ẹ kú àárọ̀, ṣé dáadáa ni?"],
    "sw": ["Habari ya asubuhi, rafiki yangu."],
    "chr": ["ᏣᎳᎩ ᎦᏬᏂᎯᏍᏗ"],
    "iu": ["ᐊᐃᖓᐃ, ᖃᓄᐃᑉᐱᑦ?"],
}

CODE = [
    "def fib(n):\n\tif n < 2:\n\t\treturn n\n\treturn fib(n - 1) + fib(n - 2)\n",
    "int main(int argc, char** argv) {\r\n    printf(\"%d\\n\", argc);\r\n    return 0;\r\n}\r\n",
    "const f = (x) => { return x ?? 0; };\n// TODO: fix   this\n\n\n",
    "fn main() {\n    let v: Vec<u32> = (0..10).map(|x| x * 2).collect();\n    println!(\"{:?}\", v);\n}\n",
    "for f in *.txt; do\n  echo \"$f\" | tr '[:upper:]' '[:lower:]' >> out.log 2>&1\ndone\n",
    "{\"name\": \"x\", \"values\": [1, 2.5, -3e10, true, null], \"nested\": {\"a\": \"\\u00e9\\n\"}}",
    "<div class=\"a b\">\n  <p>Hello&nbsp;<b>world</b></p>\n</div>\n",
    "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%son' ORDER BY id DESC;",
    "    if (x) {\n\t\t  // mixed tabs and spaces   \n    }\n",
    "\\begin{equation} \\int_0^\\infty e^{-x^2} dx = \\frac{\\sqrt{\\pi}}{2} \\end{equation}",
    "| a | b |\n|---|---|\n| 1 | 2 |\n\n> quote\n\n```python\nprint('x')\n```\n",
    "x+=1;y-=2;z*=3;w/=4;a%=5;b**=6;c//=7;d>>=8;e<<=9;f&=10;g|=11;h^=12;",
]

EMOJI = [
    "👩\u200d👩\u200d👧\u200d👦", "👨🏽\u200d💻", "🏳️\u200d🌈", "🇫🇷🇩🇪🇯🇵🇺🇸", "1️⃣2️⃣#️⃣*️⃣",
    "🏴\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f", "👍🏻👍🏼👍🏽👍🏾👍🏿", "❤️❤︎☺️",
    "🧑\u200d🤝\u200d🧑", "😀😃😄😁😆😅🤣😂", "🫠🫨🩷", "👁️\u200d🗨️", "🤷🏾\u200d♀️",
]

WHITESPACE = [" ", "  ", "   ", "\t", "\n", "\r\n", "\r", "\n\n", "\n\n\n", " \n", "\n ", "\t\n", "\u00a0",
              "\u3000", "\u2028", "\u2029", "\u0085", "\u180e", "\u200b", "\ufeff", "\u2003", "\u202f",
              "\x0b", "\x0c", "\u1680", "\u205f"]

CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d"]

# Characters some Unicode library does not know (added after Unicode 10..15),
# and characters whose normalization changed meaning across versions.
NEWER = ("\u0898\u0899\u089c\u08ca\u0c3c\u0cf3\u1ac1\u1ac5\u1dfa\U00010d24\U00010d27\U00010eab"
         "\U00010f48\U00011938\U00011935\U00011930\u32ff\ua7f2\ua7f3\u1c89\u1c8a\ua7cb\ua7dc\U000105c0\U00011380\U00011f02\U0001e4d0"
         "\U0001e5d0\U00016d40\U0002ebf0\U00031350\U0001fae8\U0001fa77\U00011de0\U00016ff4")
NORMALIZATION = ["\u212b", "\u2126", "\u1e9b\u0323", "\uf900\uf9ff\ufa2e", "\u00c5", "A\u030a", "\ufb01\ufb02",
                 "\u2460\u2461\u2473", "\u00b2\u00b3\u00b9", "\u2160\u216b", "\u00bd\u2153", "\uff21\uff22\uff41",
                 "\u3300\u33ff", "\u1100\u1161\u11a8", "\u1100\u1161", "\uac00\u11a8", "\u0344", "\u0f73\u0f75",
                 "e\u0301\u0316", "e\u0316\u0301", "a\u0328\u0301", "a\u0301\u0328", "\u0301a", "\u0958",
                 "\u2000\u2001", "\u1fc1\u1fee", "\u01c4\u01c5\u01c6", "\u0130\u0131", "ﬃ", "㋿", "\u00a8\u00b4"]


def special_strings(tokenizers_dir):
    """Every added-token content of the test tokenizers (if present)."""
    out = set()
    if tokenizers_dir and os.path.isdir(tokenizers_dir):
        for name in sorted(os.listdir(tokenizers_dir)):
            path = os.path.join(tokenizers_dir, name, "tokenizer.json")
            if os.path.exists(path):
                with open(path, encoding="utf-8") as f:
                    for t in json.load(f).get("added_tokens", []):
                        out.add(t["content"])
    out.update(["<|endoftext|>", "<think>", "</think>", "<minimax:tool_call>", "]~!b[", "]~b]", "[e~["])
    return sorted(out)


class Gen:
    def __init__(self, seed, specials):
        self.r = random.Random(seed)
        self.specials = specials
        self.sentences = [s for group in SEEDS.values() for s in group]

    def pick(self, seq):
        return seq[self.r.randrange(len(seq))]

    def case(self, s):
        return self.pick([s, s, s.upper(), s.lower(), s.title(), s.swapcase()])

    def random_cp(self, lo, hi):
        while True:
            c = self.r.randint(lo, hi)
            if not 0xD800 <= c <= 0xDFFF:
                return chr(c)

    def mixed_text(self, n):
        parts = []
        for _ in range(n):
            kind = self.r.random()
            if kind < 0.45:
                parts.append(self.case(self.pick(self.sentences)))
            elif kind < 0.55:
                parts.append(self.pick(EMOJI))
            elif kind < 0.65:
                parts.append(self.pick(self.specials))
            elif kind < 0.75:
                parts.append(str(self.r.randint(0, 10 ** self.r.randint(1, 25))))
            elif kind < 0.85:
                parts.append(self.pick(CODE))
            else:
                parts.append(self.pick(NORMALIZATION))
            parts.append(self.pick(WHITESPACE + ["", "", " ", " "]))
        return "".join(parts)


def sweep_documents(seed=1234):
    """Every code point once, in blocks of 512 (plain, and spaced / glued to
    letters); the big uniform ranges (CJK, Hangul, private use, unassigned
    planes) sampled at 2%."""
    r = random.Random(seed)
    sweep = []
    for c in range(1, 0x110000):
        big = 0x3400 <= c < 0xA000 or 0xAC00 <= c < 0xD7A4 or 0xE000 <= c < 0xF900 or 0x20000 <= c < 0x3134B \
            or 0x32000 <= c < 0xE0000 or c >= 0xF0000
        if not (0xD800 <= c < 0xE000) and (not big or r.random() < 0.02):
            sweep.append(chr(c))
    docs = []
    for i in range(0, len(sweep), 512):
        chunk = sweep[i:i + 512]
        docs.append("".join(chunk))
        docs.append(" ".join(chunk[::3]) + " a" + "a".join(chunk[1::7]))
    return docs


def build_corpus(seed=1234, scale=1.0, tokenizers_dir=None, with_sweep=True):
    """Returns the list of documents (str); the sweep blocks come last."""
    specials = special_strings(tokenizers_dir)
    g = Gen(seed, specials)
    r = g.r
    n = lambda k: max(1, int(k * scale))
    docs = ["", " ", "\n", "a", "A", "'", "''", "0", "é", "😀", "\t", "\r\n", "\x00", "\ufeff", "\u0301"]

    # Sentences, alone, normalized both ways, in every case.
    for s in g.sentences:
        for form in ("NFC", "NFD", "NFKC", "NFKD"):
            docs.append(unicodedata.normalize(form, s))
        docs += [s.upper(), s.lower(), s.swapcase(), s.replace(" ", "  "), s.replace(" ", "\n"), s.replace(" ", "\t")]
    # Mixed documents.
    for _ in range(n(1200)):
        docs.append(g.mixed_text(r.randint(1, 12)))
    # Contractions in all cases and contexts.
    for _ in range(n(300)):
        parts = []
        for _ in range(r.randint(1, 10)):
            c = g.pick(CONTRACTIONS)
            c = "".join(ch.upper() if r.random() < 0.5 else ch for ch in c)
            if r.random() < 0.1:
                c = c.replace("'", "\u2019")
            if r.random() < 0.05:
                c = c.replace("s", "\u017f").replace("k", "\u212a")
            left = g.pick(["I", "we", "THEY", "it", "", " ", "x1", "é", "ß", "3", ".", "Ǆ", "ǅ", "你", "Ω", "\n"])
            parts.append(left + c + g.pick(["", " ", "s", "S", "!", "'", "ll", "\n", "2"]))
        docs.append(g.pick(["", " "]).join(parts))
    # Added-token strings whole, adjacent, partial, spaced, cased.
    for _ in range(n(400)):
        parts = []
        for _ in range(r.randint(1, 8)):
            t = g.pick(specials)
            mode = r.random()
            if mode < 0.15 and len(t) > 1:
                t = t[:r.randint(1, len(t) - 1)]
            elif mode < 0.25 and len(t) > 1:
                t = t[r.randint(1, len(t) - 1):]
            elif mode < 0.3:
                t = t.upper()
            parts.append(t)
            parts.append(g.pick(["", "", "", " ", "  ", "\n", "x", "system\n", "é", "<", "[", "]", "~", " \n "]))
        docs.append("".join(parts))
    # Whitespace, control, format, private use, noncharacters.
    for _ in range(n(200)):
        parts = []
        for _ in range(r.randint(1, 20)):
            k = r.random()
            if k < 0.4:
                parts.append(g.pick(WHITESPACE) * r.randint(1, 12))
            elif k < 0.55:
                parts.append(chr(r.choice(list(range(0, 32)) + [127] + list(range(0x80, 0xA0)))))
            elif k < 0.65:
                parts.append(g.pick(["\u200e", "\u200f", "\u202a", "\u202e", "\u2066", "\u2069", "\u00ad", "\u200c",
                                     "\u200d", "\u2060", "\u061c", "\ufe0f", "\U000e0001"]))
            elif k < 0.75:
                parts.append(g.random_cp(0xE000, 0xF8FF) if r.random() < 0.5 else g.random_cp(0xF0000, 0x10FFFF))
            elif k < 0.82:
                parts.append(g.pick(["\ufdd0", "\ufdef", "\ufffe", "\uffff", "\U0001fffe", "\U0010ffff", "\ufffd"]))
            else:
                parts.append(g.pick(["word", "Word", "WORD", "123", "...", "!!", "a'b", "x_y", "日本"]))
        docs.append("".join(parts))
    # Digits of every script, long runs.
    digit_sets = ["0123456789", "٠١٢٣٤٥٦٧٨٩", "०१२३४५६७८९", "০১২৩৪৫৬৭৮৯", "๐๑๒๓๔๕๖๗๘๙", "０１２３４５６７８９",
                  "¹²³⁴⁵", "①②③④⑩⑳", "ⅠⅡⅢⅣⅫ", "½¼¾⅓", "𝟎𝟏𝟐𝟑", "〇一二三"]
    for _ in range(n(250)):
        ds = g.pick(digit_sets)
        run = "".join(g.pick(ds) for _ in range(r.choice([1, 2, 3, 4, 5, 7, 10, 33, 100, 301])))
        docs.append(g.pick(["", "x", " ", "$", "v", "-", "3.", "A"]) + run + g.pick(["", " ", ".5", "%", "th", "元"]))
    # Numbers in text.
    for _ in range(n(100)):
        docs.append(" ".join(g.pick(["3.14159", "1,000,000", "1e-10", "0x1F", "2024-01-31", "12:30:45", "+33 1 23 45",
                                     "v1.2.3", "100%", "$4.99", "¥500", "№7"]) for _ in range(r.randint(1, 8))))
    # Emoji and combining-mark soups.
    for _ in range(n(200)):
        base = "".join(g.pick(EMOJI + ["a", "é", "ก", "क", " "]) for _ in range(r.randint(1, 10)))
        marks = "".join(chr(r.choice([0x300, 0x301, 0x308, 0x316, 0x323, 0x328, 0x334, 0x345, 0x35C, 0x361, 0x489,
                                      0x5B4, 0x64B, 0x93C, 0x94D, 0xE31, 0x1AB0, 0x20D7, 0xFE20]))
                        for _ in range(r.randint(0, 6)))
        docs.append(base + marks + g.pick(["", "a", " b"]))
    # Characters newer than PCRE2's / utf8proc's / HF normalizer's Unicode data.
    for _ in range(n(150)):
        docs.append("".join(g.pick(NEWER + "aéA 1") for _ in range(r.randint(1, 30))))
    # Random code points from the whole space and from busy blocks.
    blocks = [(0x20, 0x7E), (0xA0, 0x24F), (0x300, 0x36F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x6FF),
              (0x900, 0x97F), (0xE00, 0xE7F), (0x1100, 0x11FF), (0x1E00, 0x1FFF), (0x2000, 0x2BFF), (0x3000, 0x30FF),
              (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0xF900, 0xFFFF), (0x10000, 0x1FFFF), (0x20000, 0x3FFFF),
              (0xE0000, 0xE01EF), (0x0, 0x10FFFF)]
    for _ in range(n(500)):
        lo, hi = g.pick(blocks)
        docs.append("".join(g.random_cp(lo, hi) if r.random() < 0.8 else g.pick(WHITESPACE + ["'s", "1"])
                            for _ in range(r.randint(1, 60))))
    # Code.
    for _ in range(n(200)):
        docs.append("".join(g.pick(CODE) for _ in range(r.randint(1, 5))))
    # Very long words and runs (tens of KB).
    long_units = ["a", "Z", "é", "你", "😀", "1", " ", "\n", "\t", "!", "-", "ab", "Ab", "'s", "\u0301", "ก", "\r\n"]
    for _ in range(n(24)):
        unit = g.pick(long_units)
        docs.append(unit * (r.randint(5000, 40000) // len(unit.encode())))
    for _ in range(n(6)):
        docs.append("".join(g.pick("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/")
                            for _ in range(r.randint(10000, 50000))))
    if with_sweep:
        docs += sweep_documents(seed)
    return docs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--tokenizers", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data",
                                                         "tokenizers"))
    args = ap.parse_args()
    docs = build_corpus(args.seed, args.scale, args.tokenizers)
    with open(args.out, "w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps(d) + "\n")
    size = sum(len(d.encode()) for d in docs)
    print(f"{len(docs)} documents, {size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
