#include "text/tokenizer/unicode_sets.h"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>

#include "text/tokenizer/utf8.h"

namespace m2::text::tok {

GeneralCategory general_category(char32_t c) {
  const auto runs = unicode_data::kCategoryRuns;
  // Last run whose start <= c (runs[0].start == 0).
  auto it = std::upper_bound(runs.begin(), runs.end(), c, [](char32_t v, const CategoryRun& r) { return v < r.start; });
  return std::prev(it)->category;
}

CodepointSet::CodepointSet(std::vector<CodepointRange> ranges) : ranges_(std::move(ranges)) {
  for (const auto& r : ranges_) {
    if (r.first >= 128) break;
    for (char32_t c = r.first; c <= std::min<char32_t>(r.last, 127); ++c) ascii_[c >> 6] |= uint64_t{1} << (c & 63);
  }
}

CodepointSet CodepointSet::from_ranges(std::span<const CodepointRange> ranges) {
  std::vector<CodepointRange> sorted(ranges.begin(), ranges.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<CodepointRange> merged;
  for (const auto& r : sorted) {
    if (!merged.empty() && r.first <= merged.back().last + 1) {
      merged.back().last = std::max(merged.back().last, r.last);
    } else {
      merged.push_back(r);
    }
  }
  return CodepointSet(std::move(merged));
}

CodepointSet CodepointSet::of_categories(CategoryMask mask) {
  std::vector<CodepointRange> out;
  const auto runs = unicode_data::kCategoryRuns;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!(mask & category_bit(runs[i].category))) continue;
    char32_t last = i + 1 < runs.size() ? runs[i + 1].start - 1 : 0x10FFFF;
    out.push_back({runs[i].start, last});
  }
  return from_ranges(out);
}

bool CodepointSet::contains_slow(char32_t c) const {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), c,
                             [](char32_t v, const CodepointRange& r) { return v < r.first; });
  return it != ranges_.begin() && c <= std::prev(it)->last;
}

CodepointSet CodepointSet::unite(const CodepointSet& other) const {
  std::vector<CodepointRange> all = ranges_;
  all.insert(all.end(), other.ranges_.begin(), other.ranges_.end());
  return from_ranges(all);
}

CodepointSet CodepointSet::complement() const {
  std::vector<CodepointRange> out;
  char32_t next = 0;
  for (const auto& r : ranges_) {
    if (r.first > next) out.push_back({next, r.first - 1});
    next = r.last + 1;
  }
  if (next <= 0x10FFFF) out.push_back({next, 0x10FFFF});
  return CodepointSet(std::move(out));
}

CodepointSet CodepointSet::subtract(const CodepointSet& other) const {
  // A \ B = complement(complement(A) u B)
  return complement().unite(other).complement();
}

size_t CodepointSet::size() const {
  size_t n = 0;
  for (const auto& r : ranges_) n += r.last - r.first + 1;
  return n;
}

const CodepointSet& white_space_set() {
  static const CodepointSet s = CodepointSet::from_ranges(unicode_data::kWhiteSpace);
  return s;
}

const CodepointSet& rust_numeric_set() {
  using enum GeneralCategory;
  static const CodepointSet s = CodepointSet::of_categories(category_bit(kNd) | category_bit(kNl) | category_bit(kNo))
                                    .unite(CodepointSet::from_ranges(unicode_data::kRustNumericExtra));
  return s;
}

const CodepointSet& regex_word_set() {
  static const CodepointSet s = CodepointSet::from_ranges(unicode_data::kRegexWord);
  return s;
}

const CodepointSet& onig_word_set() {
  static const CodepointSet s = CodepointSet::from_ranges(unicode_data::kOnigWord);
  return s;
}

const CodepointSet& category_set(CategoryMask mask) {
  static std::mutex mu;
  static std::map<CategoryMask, std::unique_ptr<CodepointSet>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = cache[mask];
  if (!slot) slot = std::make_unique<CodepointSet>(CodepointSet::of_categories(mask));
  return *slot;
}

void append_lowercase(char32_t c, std::string& out) {
  if (c == 0x130) {  // LATIN CAPITAL LETTER I WITH DOT ABOVE -> "i" + COMBINING DOT ABOVE
    out += "i\xCC\x87";
    return;
  }
  const auto table = unicode_data::kLowercase;
  auto it =
      std::lower_bound(table.begin(), table.end(), c, [](const LowercasePair& p, char32_t v) { return p.from < v; });
  append_utf8(out, it != table.end() && it->from == c ? it->to : c);
}

}  // namespace m2::text::tok
