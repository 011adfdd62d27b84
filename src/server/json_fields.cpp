#include "server/json_fields.h"

#include <cmath>
#include <random>

namespace m2::server {
namespace {

const OrderedJson* field(const OrderedJson& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

Status wrong_type(const char* key, const char* want, const OrderedJson& got) {
  return errorf("'{}' must be {}, got {}", key, want, json_type(got));
}

Result<int64_t> as_int(const OrderedJson& v, const char* key) {
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      return errorf("'{}' is out of range", key);
    return v.get<int64_t>();
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) return static_cast<int64_t>(d);
  }
  return wrong_type(key, "an integer", v);
}

}  // namespace

const char* json_type(const OrderedJson& j) {
  switch (j.type()) {
    case OrderedJson::value_t::null: return "null";
    case OrderedJson::value_t::boolean: return "a boolean";
    case OrderedJson::value_t::string: return "a string";
    case OrderedJson::value_t::array: return "an array";
    case OrderedJson::value_t::object: return "an object";
    case OrderedJson::value_t::number_float: return "a number";
    default: return j.is_number() ? "an integer" : "a value";
  }
}

Result<std::optional<double>> opt_number(const OrderedJson& obj, const char* key) {
  const OrderedJson* v = field(obj, key);
  if (!v) return std::optional<double>();
  if (!v->is_number()) return wrong_type(key, "a number", *v);
  return std::optional<double>(v->get<double>());
}

Result<std::optional<int64_t>> opt_int(const OrderedJson& obj, const char* key) {
  const OrderedJson* v = field(obj, key);
  if (!v) return std::optional<int64_t>();
  auto i = as_int(*v, key);
  if (!i.ok()) return i.status();
  return std::optional<int64_t>(*i);
}

Result<std::optional<bool>> opt_bool(const OrderedJson& obj, const char* key) {
  const OrderedJson* v = field(obj, key);
  if (!v) return std::optional<bool>();
  if (!v->is_boolean()) return wrong_type(key, "a boolean", *v);
  return std::optional<bool>(v->get<bool>());
}

Result<bool> stream_include_usage(const OrderedJson& body) {
  const OrderedJson* so = field(body, "stream_options");
  if (!so) return false;
  if (!so->is_object()) return errorf("'stream_options' must be an object");
  M2_ASSIGN_OR_RETURN(std::optional<bool> iu, opt_bool(*so, "include_usage"));
  return iu.value_or(false);
}

Result<std::optional<std::string>> opt_string(const OrderedJson& obj, const char* key) {
  const OrderedJson* v = field(obj, key);
  if (!v) return std::optional<std::string>();
  if (!v->is_string()) return wrong_type(key, "a string", *v);
  return std::optional<std::string>(v->get<std::string>());
}

Result<std::vector<std::string>> opt_string_list(const OrderedJson& obj, const char* key) {
  std::vector<std::string> out;
  const OrderedJson* v = field(obj, key);
  if (!v) return out;
  if (v->is_string()) {
    out.push_back(v->get<std::string>());
    return out;
  }
  if (!v->is_array()) return wrong_type(key, "a string or a list of strings", *v);
  for (const auto& s : *v) {
    if (!s.is_string()) return errorf("'{}' must hold only strings, got {}", key, json_type(s));
    out.push_back(s.get<std::string>());
  }
  return out;
}

Result<std::vector<int64_t>> opt_int_list(const OrderedJson& obj, const char* key) {
  std::vector<int64_t> out;
  const OrderedJson* v = field(obj, key);
  if (!v) return out;
  if (!v->is_array()) return wrong_type(key, "a list of integers", *v);
  for (const auto& x : *v) {
    auto i = as_int(x, key);
    if (!i.ok()) return errorf("'{}' must hold only integers, got {}", key, json_type(x));
    out.push_back(*i);
  }
  return out;
}

std::string random_hex(size_t bytes) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < bytes; ++i) {
    const auto b = static_cast<unsigned>(rng() & 0xff);
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

}  // namespace m2::server
