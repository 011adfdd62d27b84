#include "util/json.h"

#include <fstream>
#include <sstream>

namespace m2 {

std::string json_error_text(const nlohmann::json::exception& e) {
  std::string_view text = e.what();
  if (text.rfind("[json.exception.", 0) == 0) {
    const size_t end = text.find("] ");
    if (end != std::string_view::npos) text.remove_prefix(end + 2);
  }
  return std::string(text);
}

Result<Json> parse_json(std::string_view text, std::string_view what) {
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& e) {
    return errorf("{}: invalid JSON at byte {}: {}", what, e.byte, json_error_text(e));
  } catch (const Json::exception& e) {  // e.g. out_of_range for 1e400
    return errorf("{}: invalid JSON: {}", what, json_error_text(e));
  }
}

Result<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return errorf("{}: cannot open", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return errorf("{}: read error", path);
  return ss.str();
}

Result<Json> read_json_file(const std::string& path) {
  M2_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  return parse_json(text, path);
}

const char* json_type_name(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::object: return "object";
    case Json::value_t::array: return "array";
    case Json::value_t::string: return "string";
    case Json::value_t::boolean: return "boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "integer";
    case Json::value_t::number_float: return "number";
    default: return "value";
  }
}

}  // namespace m2
