#include "text/tokenizer/pcre2_classes.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <fmt/format.h>
#include <pcre2.h>

#include <array>
#include <map>
#include <mutex>

#include "text/tokenizer/utf8.h"
#include "util/log.h"

namespace m2::text::tok {
namespace {

using enum GeneralCategory;

constexpr std::array<const char*, kGeneralCategoryCount> kNames = {
    "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe",
    "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Co", "Cn", "Cs"};

struct Group {
  const char* name;
  CategoryMask members;
};
const std::array<Group, 6> kGroups = {{
    {"L", category_bit(kLu) | category_bit(kLl) | category_bit(kLt) | category_bit(kLm) | category_bit(kLo)},
    {"M", category_bit(kMn) | category_bit(kMc) | category_bit(kMe)},
    {"N", category_bit(kNd) | category_bit(kNl) | category_bit(kNo)},
    {"P", category_bit(kPc) | category_bit(kPd) | category_bit(kPs) | category_bit(kPe) | category_bit(kPi) |
              category_bit(kPf) | category_bit(kPo)},
    {"S", category_bit(kSm) | category_bit(kSc) | category_bit(kSk) | category_bit(kSo)},
    {"Z", category_bit(kZs) | category_bit(kZl) | category_bit(kZp)},
}};

// PCRE2's categories differ from the table's in known ways only for the
// PCRE2 Unicode version the tables were generated with.
bool pcre2_version_known() {
  static const bool known = [] {
    char buf[32] = {0};
    pcre2_config(PCRE2_CONFIG_UNICODE_VERSION, buf);
    const bool same = std::string_view(buf) == unicode_data::kPcre2UnicodeVersion;
    if (!same) {
      log_warn(
          "PCRE2 has Unicode {}, the tokenizer tables were generated with PCRE2's Unicode {}: regex classes "
          "use explicit ranges (exact, slower)",
          buf, unicode_data::kPcre2UnicodeVersion);
    }
    return same;
  }();
  return known;
}

// What PCRE2's properties for the categories of `mask` match beyond the table.
CodepointSet pcre2_removals(CategoryMask mask) {
  std::vector<CodepointRange> out;
  for (const auto& r : unicode_data::kPcre2Removals) {
    if (mask & category_bit(r.category)) out.push_back(r.range);
  }
  return CodepointSet::from_ranges(out);
}

// Code points of `set` that PCRE2's \p{name} does not match.
CodepointSet missing_from_pcre2(const CodepointSet& set, const char* name) {
  std::string text;
  std::vector<char32_t> cps;
  for (const auto& r : set.ranges()) {
    for (char32_t c = r.first; c <= r.last; ++c) {
      if (c >= 0xD800 && c <= 0xDFFF) continue;
      append_utf8(text, c);
      cps.push_back(c);
    }
  }
  const std::string pattern = fmt::format("\\P{{{}}}", name);
  int err = 0;
  PCRE2_SIZE err_off = 0;
  pcre2_code* re = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP,
                                 &err, &err_off, nullptr);
  pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
  pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
  std::vector<CodepointRange> missing;
  // Map byte offsets back to code points while scanning.
  size_t byte = 0, index = 0;
  PCRE2_SIZE start = 0;
  while (pcre2_match(re, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), start, PCRE2_NO_UTF_CHECK, md,
                     nullptr) > 0) {
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    while (byte < ov[0]) next_codepoint(text, byte), ++index;
    missing.push_back({cps[index], cps[index]});
    start = ov[1];
  }
  pcre2_match_data_free(md);
  pcre2_code_free(re);
  return CodepointSet::from_ranges(missing);
}

std::string build_category_body(CategoryMask mask) {
  const CodepointSet& table = category_set(mask);
  const bool has_unassigned = mask & (category_bit(kCn) | category_bit(kCs));
  if (has_unassigned || !pcre2_version_known()) return pcre2_ranges_body(table);
  // PCRE2 would match something the table does not: no property can be used.
  if (!pcre2_removals(mask).subtract(table).ranges().empty()) return pcre2_ranges_body(table);
  std::string body;
  CodepointSet extra;
  CategoryMask left = mask;
  for (const auto& g : kGroups) {
    if ((left & g.members) == g.members) {
      body += fmt::format("\\p{{{}}}", g.name);
      left &= ~g.members;
    }
  }
  for (int i = 0; i < kGeneralCategoryCount; ++i) {
    const CategoryMask bit = CategoryMask{1} << i;
    if (left & bit) body += fmt::format("\\p{{{}}}", kNames[i]);
  }
  // Extras per two-letter category (PCRE2's group sets are unions of them).
  for (int i = 0; i < kGeneralCategoryCount; ++i) {
    const CategoryMask bit = CategoryMask{1} << i;
    if (!(mask & bit)) continue;
    extra = extra.unite(missing_from_pcre2(category_set(bit), kNames[i]));
  }
  body += pcre2_ranges_body(extra);
  return body;
}

}  // namespace

std::string pcre2_codepoint(char32_t c) { return fmt::format("\\x{{{:X}}}", static_cast<uint32_t>(c)); }

std::string pcre2_ranges_body(const CodepointSet& set) {
  std::string body;
  auto emit = [&](char32_t a, char32_t b) {
    body += pcre2_codepoint(a);
    if (b != a) {
      body += '-';
      body += pcre2_codepoint(b);
    }
  };
  for (const auto& r : set.ranges()) {
    // UTF mode rejects surrogates: leave out [D800, DFFF].
    if (r.last < 0xD800 || r.first > 0xDFFF) {
      emit(r.first, r.last);
      continue;
    }
    if (r.first < 0xD800) emit(r.first, 0xD7FF);
    if (r.last > 0xDFFF) emit(0xE000, r.last);
  }
  return body;
}

const std::string& pcre2_category_body(CategoryMask mask) {
  static std::mutex mu;
  static std::map<CategoryMask, std::string> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(mask);
  if (it == cache.end()) it = cache.emplace(mask, build_category_body(mask)).first;
  return it->second;
}

}  // namespace m2::text::tok
