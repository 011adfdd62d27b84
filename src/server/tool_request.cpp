#include "server/tool_request.h"

#include "server/json_fields.h"

namespace m2::server {
namespace {

// obj[key] when it is a string, else "".
std::string string_field(const OrderedJson& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

Status check_function(const OrderedJson& fn, const std::string& where) {
  if (!fn.is_object()) return errorf("'{}' must be an object, got {}", where, json_type(fn));
  auto name = fn.find("name");
  if (name == fn.end() || !name->is_string() || name->get<std::string>().empty())
    return errorf("'{}.name' must be a non-empty string", where);
  if (auto p = fn.find("parameters"); p != fn.end() && !p->is_null() && !p->is_object())
    return errorf("'{}.parameters' must be an object (a JSON schema), got {}", where, json_type(*p));
  return Status();
}

Result<OrderedJson> read_tools(const OrderedJson& body) {
  const auto tools = body.find("tools");
  const auto functions = body.find("functions");
  const bool have_tools = tools != body.end() && !tools->is_null();
  const bool have_functions = functions != body.end() && !functions->is_null();
  if (have_tools && have_functions) return errorf("'functions' is the legacy form of 'tools': give one of them");
  OrderedJson out = OrderedJson::array();
  if (have_functions) {
    if (!functions->is_array()) return errorf("'functions' must be an array, got {}", json_type(*functions));
    for (size_t i = 0; i < functions->size(); ++i) {
      M2_RETURN_IF_ERROR(check_function((*functions)[i], "functions[" + std::to_string(i) + "]"));
      out.push_back({{"type", "function"}, {"function", (*functions)[i]}});
    }
    return out;
  }
  if (!have_tools) return out;
  if (!tools->is_array()) return errorf("'tools' must be an array, got {}", json_type(*tools));
  for (size_t i = 0; i < tools->size(); ++i) {
    const OrderedJson& t = (*tools)[i];
    const std::string where = "tools[" + std::to_string(i) + "]";
    if (!t.is_object()) return errorf("'{}' must be an object, got {}", where, json_type(t));
    if (auto type = t.find("type"); type != t.end() && *type != "function")
      return errorf("'{}.type' must be 'function' (custom tools are not supported)", where);
    auto fn = t.find("function");
    if (fn == t.end()) return errorf("'{}' needs a 'function' object", where);
    M2_RETURN_IF_ERROR(check_function(*fn, where + ".function"));
    out.push_back(t);
  }
  return out;
}

bool declares(const OrderedJson& tools, const std::string& name) {
  for (const auto& t : tools)
    if (t["function"]["name"] == name) return true;
  return false;
}

// {"type": "function", "function": {"name": N}} (or, legacy, {"name": N}) -> N.
Result<std::string> named_function(const OrderedJson& choice, const char* field, bool legacy) {
  const OrderedJson* holder = &choice;
  if (!legacy) {
    if (string_field(choice, "type") != "function")
      return errorf("'{}.type' must be 'function' or 'allowed_tools'", field);
    auto fn = choice.find("function");
    if (fn == choice.end() || !fn->is_object()) return errorf("'{}' needs a 'function' object with a 'name'", field);
    holder = &*fn;
  }
  auto name = holder->find("name");
  if (name == holder->end() || !name->is_string() || name->get<std::string>().empty())
    return errorf("'{}{}.name' must be a non-empty string", field, legacy ? "" : ".function");
  return name->get<std::string>();
}

Status read_allowed_tools(const OrderedJson& choice, ToolRequest& r) {
  auto at = choice.find("allowed_tools");
  if (at == choice.end() || !at->is_object()) return errorf("'tool_choice.allowed_tools' must be an object");
  const std::string mode = string_field(*at, "mode");
  if (mode != "auto" && mode != "required")
    return errorf("'tool_choice.allowed_tools.mode' must be 'auto' or 'required'");
  auto list = at->find("tools");
  if (list == at->end() || !list->is_array()) return errorf("'tool_choice.allowed_tools.tools' must be an array");
  r.allowed.emplace();
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string where = "tool_choice.allowed_tools.tools[" + std::to_string(i) + "]";
    const OrderedJson& t = (*list)[i];
    if (!t.is_object()) return errorf("'{}' must be an object", where);
    M2_ASSIGN_OR_RETURN(std::string name, named_function(t, where.c_str(), false));
    if (!declares(r.tools, name)) return errorf("'{}' names the function '{}', which is not in 'tools'", where, name);
    r.allowed->insert(std::move(name));
  }
  if (r.allowed->empty()) return errorf("'tool_choice.allowed_tools.tools' must not be empty");
  r.choice = mode == "required" ? ToolRequest::Choice::kRequired : ToolRequest::Choice::kAuto;
  return Status();
}

Status read_choice(const OrderedJson& body, ToolRequest& r) {
  const auto tc = body.find("tool_choice");
  const auto fc = body.find("function_call");
  const bool have_tc = tc != body.end() && !tc->is_null();
  const bool have_fc = fc != body.end() && !fc->is_null();
  if (have_tc && have_fc) return errorf("'function_call' is the legacy form of 'tool_choice': give one of them");
  if (have_fc && !r.legacy_functions) return errorf("'function_call' needs 'functions'");
  const bool have_tools = !r.tools.empty();
  r.choice = have_tools ? ToolRequest::Choice::kAuto : ToolRequest::Choice::kNone;
  if (!have_tc && !have_fc) return Status();
  const OrderedJson& choice = have_tc ? *tc : *fc;
  const char* field = have_tc ? "tool_choice" : "function_call";
  if (choice.is_string()) {
    const std::string s = choice.get<std::string>();
    if (s == "none") {
      r.choice = ToolRequest::Choice::kNone;
    } else if (s == "auto") {
      r.choice = have_tools ? ToolRequest::Choice::kAuto : ToolRequest::Choice::kNone;
    } else if (s == "required" && have_tc) {
      if (!have_tools) return errorf("'tool_choice' is 'required' but no 'tools' are given");
      r.choice = ToolRequest::Choice::kRequired;
    } else {
      return errorf("'{}' must be {} or an object, got '{}'", field,
                    have_tc ? "none, auto, required" : "none, auto", s);
    }
    return Status();
  }
  if (!choice.is_object()) return errorf("'{}' must be a string or an object, got {}", field, json_type(choice));
  if (have_tc && string_field(choice, "type") == "allowed_tools") return read_allowed_tools(choice, r);
  M2_ASSIGN_OR_RETURN(r.forced_name, named_function(choice, field, have_fc));
  if (!declares(r.tools, r.forced_name))
    return errorf("'{}' names the function '{}', which is not in '{}'", field, r.forced_name,
                  have_fc ? "functions" : "tools");
  r.choice = ToolRequest::Choice::kNamed;
  r.allowed = text::ToolNameSet{r.forced_name};
  return Status();
}

}  // namespace

Result<ToolRequest> parse_tool_request(const OrderedJson& body) {
  ToolRequest r;
  M2_ASSIGN_OR_RETURN(r.tools, read_tools(body));
  r.legacy_functions = body.contains("functions") && !body["functions"].is_null();
  M2_RETURN_IF_ERROR(read_choice(body, r));
  M2_ASSIGN_OR_RETURN(std::optional<bool> parallel, opt_bool(body, "parallel_tool_calls"));
  r.parallel = r.legacy_functions ? false : parallel.value_or(true);
  if (r.choice == ToolRequest::Choice::kNone) {
    r.allowed = text::ToolNameSet{};
    r.rendered = nullptr;
  } else if (r.allowed && r.choice != ToolRequest::Choice::kNamed) {
    r.rendered = OrderedJson::array();  // allowed_tools: only those are shown
    for (const auto& t : r.tools)
      if (r.allowed->count(t["function"]["name"].get<std::string>())) r.rendered.push_back(t);
  } else {
    r.rendered = r.tools;
  }
  return r;
}

}  // namespace m2::server
