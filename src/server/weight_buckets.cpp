#include "server/weight_buckets.h"

#include <charconv>

namespace m2::server {

Result<WeightBuckets::Added> WeightBuckets::add(const BucketHeader& h, std::vector<UpdateTensor> tensors) {
  std::lock_guard<std::mutex> lock(mu_);
  Added out;
  auto reset = [&] {
    set_id_.clear();
    count_ = 0;
    received_.clear();
    names_.clear();
    tensors_.clear();
  };
  if (h.set_id.empty()) return errorf("bucket_set must not be empty");
  if (h.count < 1) return errorf("bucket_count must be at least 1, got {}", h.count);
  if (h.index < 0 || h.index >= h.count)
    return errorf("bucket_index {} is outside [0, bucket_count {})", h.index, h.count);
  if (!set_id_.empty() && set_id_ != h.set_id) {
    out.dropped_set = set_id_;  // a trainer sends one set at a time: the old one was abandoned
    reset();
  }
  if (set_id_.empty()) {
    set_id_ = h.set_id;
    count_ = h.count;
  }
  std::string fail;
  if (h.count != count_) {
    fail = fmt::format("bucket_count {} differs from the {} of set '{}'s first bucket", h.count, count_, h.set_id);
  } else if (received_.count(h.index)) {
    fail = fmt::format("bucket {} of set '{}' was already received", h.index, h.set_id);
  } else {
    for (const UpdateTensor& t : tensors)
      if (names_.count(t.name)) {
        fail = fmt::format("{}: tensor '{}' is already in another bucket of set '{}'", t.source, t.name, h.set_id);
        break;
      }
  }
  if (!fail.empty()) {
    reset();
    return errorf("{} (the set is dropped: send it again)", fail);
  }
  received_.insert(h.index);
  for (UpdateTensor& t : tensors) {
    names_.insert(t.name);
    tensors_.push_back(std::move(t));
  }
  out.received = static_cast<int64_t>(received_.size());
  if (out.received == count_) {
    out.complete = true;
    out.tensors = std::move(tensors_);
    reset();
  }
  return out;
}

void WeightBuckets::drop(const std::string& set_id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (set_id_ != set_id) return;
  set_id_.clear();
  count_ = 0;
  received_.clear();
  names_.clear();
  tensors_.clear();
}

std::optional<std::pair<std::string, int64_t>> WeightBuckets::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (set_id_.empty()) return std::nullopt;
  return std::make_pair(set_id_, static_cast<int64_t>(received_.size()));
}

namespace {

Result<int64_t> header_int(const std::string& key, const std::string& value) {
  int64_t v = 0;
  const char* end = value.data() + value.size();
  auto [p, ec] = std::from_chars(value.data(), end, v);
  if (ec != std::errc() || p != end || value.empty()) return errorf("{} must be an integer, got '{}'", key, value);
  return v;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string url_decode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out.push_back(' ');
    } else if (s[i] == '%' && i + 2 < s.size() && hex_value(s[i + 1]) >= 0 && hex_value(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2])));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

}  // namespace

std::map<std::string, std::string> parse_query(std::string_view target) {
  std::map<std::string, std::string> out;
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return out;
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    const size_t amp = rest.find('&');
    const std::string_view part = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    if (part.empty()) continue;
    const size_t eq = part.find('=');
    const std::string key = url_decode(part.substr(0, eq));
    const std::string value = eq == std::string_view::npos ? std::string() : url_decode(part.substr(eq + 1));
    out.emplace(key, value);
  }
  return out;
}

Result<BucketHeader> bucket_header(const std::map<std::string, std::string>& query,
                                   const std::map<std::string, std::string>& metadata) {
  const bool from_query = query.count("bucket_set") != 0;
  const auto& m = from_query ? query : metadata;
  const char* where = from_query ? "the query" : "the bucket's __metadata__";
  BucketHeader h;
  for (const char* key : {"bucket_set", "bucket_index", "bucket_count"}) {
    if (!m.count(key))
      return errorf("{} is missing: give bucket_set, bucket_index and bucket_count in the query string or in the "
                    "safetensors __metadata__",
                    key);
  }
  h.set_id = m.at("bucket_set");
  M2_ASSIGN_OR_RETURN(h.index, header_int(std::string("bucket_index (") + where + ")", m.at("bucket_index")));
  M2_ASSIGN_OR_RETURN(h.count, header_int(std::string("bucket_count (") + where + ")", m.at("bucket_count")));
  return h;
}

}  // namespace m2::server
