#include "text/tool_call_parser.h"

#include "text/python_json.h"
#include "text/tool_call_syntax.h"

namespace m2::text {
namespace {

using namespace tool_syntax;

constexpr size_t npos = std::string_view::npos;

bool starts_with_at(std::string_view text, size_t pos, std::string_view tag) {
  return text.substr(pos, tag.size()) == tag;
}

size_t skip_tag_space(std::string_view text, size_t pos) {
  while (pos < text.size() && is_tag_space(text[pos])) ++pos;
  return pos;
}

std::string_view rstrip_tag_space(std::string_view text) {
  size_t end = text.size();
  while (end > 0 && is_tag_space(text[end - 1])) --end;
  return text.substr(0, end);
}

enum class InvokeStatus { kComplete, kMalformed, kTruncated };

struct Invoke {
  std::string name;
  OrderedJson args = OrderedJson::object();
};

// The next occurrence of a tag at or after a moving position, searched again
// only when the position passes the last answer: keeps the scan of one
// invoke linear in its length.
class NextTag {
 public:
  NextTag(std::string_view text, std::string_view tag, size_t from)
      : text_(text), tag_(tag), at_(text.find(tag, from)) {}
  size_t from(size_t pos) {
    if (at_ != npos && at_ < pos) at_ = text_.find(tag_, pos);
    return at_;
  }

 private:
  std::string_view text_, tag_;
  size_t at_;
};

// Offset of the `</parameter>` that ends the value starting at `pos`, or
// npos if the text ends before one is confirmed.
size_t find_value_end(std::string_view text, size_t pos) {
  for (size_t e = text.find(kParamClose, pos); e != npos; e = text.find(kParamClose, e + 1)) {
    switch (classify_after_param_close(text.substr(e + kParamClose.size()))) {
      case Scan::kFound: return e;
      case Scan::kNeedMore: return npos;
      case Scan::kMalformed: break;  // part of the value
    }
  }
  return npos;
}

// `text` at `pos` starts with kInvokeOpen. On kComplete, *end is the offset
// just past `</invoke>`.
InvokeStatus parse_invoke(std::string_view text, size_t pos, const ToolSchemas& schemas, Invoke* out,
                          size_t* end) {
  const size_t name_pos = pos + kInvokeOpen.size();
  size_t name_len = 0;
  Scan scan = scan_name(text.substr(name_pos), &name_len);
  if (scan == Scan::kNeedMore) return InvokeStatus::kTruncated;
  if (scan == Scan::kMalformed) return InvokeStatus::kMalformed;
  out->name = unquote_name(text.substr(name_pos, name_len));
  if (out->name.empty()) return InvokeStatus::kMalformed;

  size_t body = name_pos + name_len + 1;
  NextTag next_param(text, kParamOpen, body), next_close(text, kInvokeClose, body);
  while (true) {
    const size_t p = next_param.from(body);
    const size_t c = next_close.from(body);
    if (c != npos && (p == npos || c < p)) {
      *end = c + kInvokeClose.size();
      return InvokeStatus::kComplete;
    }
    if (p == npos) return InvokeStatus::kTruncated;
    // Text between `body` and `p` is ignored, as in vLLM.
    const size_t pname_pos = p + kParamOpen.size();
    size_t pname_len = 0;
    scan = scan_name(text.substr(pname_pos), &pname_len);
    if (scan == Scan::kNeedMore) return InvokeStatus::kTruncated;
    std::string pname;
    if (scan == Scan::kFound) pname = unquote_name(text.substr(pname_pos, pname_len));
    if (pname.empty()) {  // malformed parameter tag: skip it as ignored text
      body = pname_pos;
      continue;
    }
    const size_t value_pos = pname_pos + pname_len + 1;
    const size_t value_end = find_value_end(text, value_pos);
    if (value_end == npos) return InvokeStatus::kTruncated;
    std::string_view raw = text.substr(value_pos, value_end - value_pos);
    if (!raw.empty() && raw.front() == '\n') raw.remove_prefix(1);
    if (!raw.empty() && raw.back() == '\n') raw.remove_suffix(1);
    out->args[pname] = convert_param_value(raw, schemas.param_types(out->name, pname));
    body = value_end + kParamClose.size();
  }
}

// The invokes of the block whose opening tag ends at `pos`, and how it ends.
struct BlockScan {
  std::vector<Invoke> invokes;
  enum class End { kClosed, kJunk, kTruncated } how = End::kJunk;
  size_t end = 0;  // past the closing tag (kClosed), else where the junk or the unfinished invoke starts
};

BlockScan scan_block(std::string_view text, size_t pos, const ToolSchemas& schemas, const ToolNameSet* allowed) {
  BlockScan block;
  while (true) {
    pos = skip_tag_space(text, pos);
    block.end = pos;
    if (starts_with_at(text, pos, kBlockClose)) {
      block.end = pos + kBlockClose.size();
      block.how = BlockScan::End::kClosed;
      return block;
    }
    if (!starts_with_at(text, pos, kInvokeOpen)) return block;  // junk, or the end of the text
    Invoke invoke;
    const InvokeStatus status = parse_invoke(text, pos, schemas, &invoke, &pos);
    if (status == InvokeStatus::kTruncated && !invoke.name.empty() && !tool_allowed(allowed, invoke.name)) {
      // A dropped call cut off: it and the rest of the text are dropped.
      block.invokes.push_back(std::move(invoke));
      block.end = text.size();
      return block;
    }
    if (status != InvokeStatus::kComplete) {
      if (status == InvokeStatus::kTruncated) block.how = BlockScan::End::kTruncated;
      return block;
    }
    block.invokes.push_back(std::move(invoke));
  }
}

}  // namespace

ToolCallParseResult parse_tool_calls(std::string_view text, const ToolSchemas& schemas,
                                     ToolCallIdGenerator* ids, const ToolNameSet* allowed) {
  using End = BlockScan::End;
  ToolCallParseResult result;
  size_t pos = 0;
  bool after_block = false;  // pos follows a block with calls
  while (pos < text.size()) {
    const size_t open = text.find(kBlockOpen, pos);
    if (open == npos) {
      const std::string_view tail = text.substr(pos);
      if (!after_block || !rstrip_tag_space(tail).empty()) result.content.append(tail);
      break;
    }
    const std::string_view before = text.substr(pos, open - pos);
    const size_t after_open = open + kBlockOpen.size();
    BlockScan block = scan_block(text, after_open, schemas, allowed);
    if (block.invokes.empty()) {
      // No call: the block is text. A cut-off block is text to the end; after
      // junk, scanning resumes right after the opening tag.
      result.content.append(before);
      if (block.how == End::kTruncated) {
        result.content.append(text.substr(open));
        break;
      }
      const size_t text_end = block.how == End::kClosed ? block.end : after_open;
      result.content.append(text.substr(open, text_end - open));
      pos = text_end;
      after_block = false;
      continue;
    }
    result.content.append(rstrip_tag_space(before));
    for (Invoke& invoke : block.invokes) {
      if (!tool_allowed(allowed, invoke.name)) continue;
      result.calls.push_back({ids->next(), std::move(invoke.name), python_json_dumps(invoke.args)});
    }
    if (block.how == End::kTruncated) {  // an unfinished invoke and the rest are text
      result.content.append(text.substr(block.end));
      break;
    }
    pos = block.end;
    after_block = block.how == End::kClosed;
  }
  return result;
}

}  // namespace m2::text
