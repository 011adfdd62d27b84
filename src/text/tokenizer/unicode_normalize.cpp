#include "text/tokenizer/unicode_normalize.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <unordered_map>
#include <vector>

#include "text/tokenizer/unicode_sets.h"
#include "text/tokenizer/utf8.h"

namespace m2::text::tok {
namespace {

constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr int kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

const CodepointSet& no_decomposition() {
  static const CodepointSet s = CodepointSet::from_ranges(unicode_data::kNoDecomposition);
  return s;
}

// Characters HF does not know are starters to it.
const CodepointSet& zero_class() {
  static const CodepointSet s = CodepointSet::from_ranges(unicode_data::kZeroCombiningClass).unite(no_decomposition());
  return s;
}

int combining_class(char32_t c) {
  if (c < 0x300) return 0;
  const int cc = utf8proc_get_property(static_cast<utf8proc_int32_t>(c))->combining_class;
  return cc && zero_class().contains(c) ? 0 : cc;
}

std::u32string utf8proc_form(std::u32string_view cps, utf8proc_option_t options) {
  std::string in;
  for (char32_t c : cps) append_utf8(in, c);
  utf8proc_uint8_t* out = nullptr;
  utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(in.c_str()), static_cast<utf8proc_ssize_t>(in.size()), &out,
               options);
  std::u32string result;
  if (!out) return result;
  std::string_view view(reinterpret_cast<const char*>(out));
  for (size_t i = 0; i < view.size();) result += next_codepoint(view, i);
  std::free(out);
  return result;
}

uint64_t pair_key(char32_t a, char32_t b) { return (uint64_t{a} << 32) | b; }

// Primary composites HF forms: pair (first, second) -> composite.
const std::unordered_map<uint64_t, char32_t>& composition_pairs() {
  static const auto table = [] {
    std::unordered_map<uint64_t, char32_t> pairs;
    const CodepointSet blocked = CodepointSet::from_ranges(unicode_data::kNoComposition).unite(no_decomposition());
    const auto nfd = static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE);
    const auto nfc = static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    for (char32_t c = 0xC0; c < 0x110000; ++c) {
      if ((c >= 0xD800 && c <= 0xDFFF) || (c >= kSBase && c < kSBase + kSCount)) continue;
      const utf8proc_property_t* p = utf8proc_get_property(static_cast<utf8proc_int32_t>(c));
      if (p->decomp_seqindex == UINT16_MAX || p->decomp_type != 0 || p->comp_exclusion) continue;
      if (blocked.contains(c)) continue;
      const std::u32string full = utf8proc_form(std::u32string(1, c), nfd);
      if (full.size() < 2) continue;
      const std::u32string first = utf8proc_form(std::u32string_view(full).substr(0, full.size() - 1), nfc);
      if (first.size() != 1) continue;
      const char32_t second = full.back();
      const std::u32string pair = {first[0], second};
      if (utf8proc_form(pair, nfc) != std::u32string(1, c)) continue;  // excluded / non-starter
      pairs.emplace(pair_key(first[0], second), c);
    }
    return pairs;
  }();
  return table;
}

// Composite of (a, b), or 0.
char32_t compose_pair(char32_t a, char32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount) {
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  }
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount) {
    return a + (b - kTBase);
  }
  const auto& pairs = composition_pairs();
  auto it = pairs.find(pair_key(a, b));
  return it == pairs.end() ? 0 : it->second;
}

void decompose(std::string_view text, bool compat, std::vector<char32_t>& out) {
  const auto options = static_cast<utf8proc_option_t>(UTF8PROC_DECOMPOSE | (compat ? UTF8PROC_COMPAT : 0));
  utf8proc_int32_t buf[32];
  int boundclass = 0;
  for (size_t i = 0; i < text.size();) {
    const char32_t c = next_codepoint(text, i);
    if (c < 0xA0 || no_decomposition().contains(c)) {
      out.push_back(c);
      continue;
    }
    const utf8proc_ssize_t n = utf8proc_decompose_char(static_cast<utf8proc_int32_t>(c), buf, 32, options, &boundclass);
    if (n <= 0 || n > 32) {
      out.push_back(c);
      continue;
    }
    for (utf8proc_ssize_t k = 0; k < n; ++k) out.push_back(static_cast<char32_t>(buf[k]));
  }
}

// Canonical ordering: stable sort of each run of non-starters by class.
void reorder(std::vector<char32_t>& cps) {
  size_t i = 0;
  while (i < cps.size()) {
    if (combining_class(cps[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < cps.size() && combining_class(cps[j]) != 0) ++j;
    if (j - i > 1) {
      std::stable_sort(cps.begin() + i, cps.begin() + j,
                       [](char32_t a, char32_t b) { return combining_class(a) < combining_class(b); });
    }
    i = j;
  }
}

// Canonical composition (UAX #15 reference algorithm).
void compose(std::vector<char32_t>& cps) {
  if (cps.empty()) return;
  size_t starter_pos = 0;
  char32_t starter = cps[0];
  int last_class = combining_class(starter);
  if (last_class != 0) last_class = 256;  // a leading non-starter never composes
  size_t out = 1;
  for (size_t i = 1; i < cps.size(); ++i) {
    const char32_t c = cps[i];
    const int cls = combining_class(c);
    const char32_t composite = compose_pair(starter, c);
    if (composite && (last_class < cls || last_class == 0)) {
      cps[starter_pos] = composite;
      starter = composite;
      continue;
    }
    if (cls == 0) {
      starter_pos = out;
      starter = c;
    }
    last_class = cls;
    cps[out++] = c;
  }
  cps.resize(out);
}

// True if no code point of `text` can change under `form`: below U+00A0
// nothing has a compatibility decomposition, below U+00C0 nothing a canonical
// one, and below U+0300 nothing composes with a neighbour.
bool is_unchanged(std::string_view text, NormalForm form) {
  const bool compat = form == NormalForm::kNFKC || form == NormalForm::kNFKD;
  const unsigned char first_changing_lead = form == NormalForm::kNFC ? 0xCC : 0xC3;  // U+0300 / U+00C0
  for (size_t i = 0; i < text.size(); ++i) {
    const auto b = static_cast<unsigned char>(text[i]);
    if (b < 0x80) continue;
    if (b >= first_changing_lead) return false;
    // U+00A0..U+00BF (C2 A0..C2 BF) have compatibility decompositions.
    if (compat && b == 0xC2 && static_cast<unsigned char>(text[i + 1]) >= 0xA0) return false;
    if (compat && b > 0xC2) return false;
  }
  return true;
}

}  // namespace

std::string normalize_unicode(std::string_view text, NormalForm form) {
  const bool compat = form == NormalForm::kNFKC || form == NormalForm::kNFKD;
  const bool composed = form == NormalForm::kNFC || form == NormalForm::kNFKC;
  if (is_unchanged(text, form)) return std::string(text);
  std::vector<char32_t> cps;
  cps.reserve(text.size());
  decompose(text, compat, cps);
  reorder(cps);
  if (composed) compose(cps);
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  for (char32_t c : cps) append_utf8(out, c);
  return out;
}

}  // namespace m2::text::tok
