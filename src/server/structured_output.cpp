#include "server/structured_output.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <set>
#include <vector>

#include "server/json_fields.h"

namespace m2::server {
namespace {

using Kind = ConstraintSource::Kind;

// obj[key] when it is a string, else "".
std::string string_field(const OrderedJson& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// A JSON Schema given as an object (or, as vLLM also takes it, as a string
// holding one).
Result<std::string> schema_text(const OrderedJson& v, const std::string& field) {
  if (v.is_object() || v.is_boolean()) return v.dump();
  if (v.is_string()) {
    OrderedJson parsed = OrderedJson::parse(v.get<std::string>(), nullptr, false);
    if (parsed.is_discarded() || !(parsed.is_object() || parsed.is_boolean()))
      return errorf("'{}' must be a JSON schema (an object, or a string holding one)", field);
    return parsed.dump();
  }
  return errorf("'{}' must be a JSON schema object, got {}", field, json_type(v));
}

Result<std::string> nonempty_string(const OrderedJson& v, const std::string& field) {
  if (!v.is_string() || v.get<std::string>().empty())
    return errorf("'{}' must be a non-empty string, got {}", field, v.is_string() ? "an empty string" : json_type(v));
  return v.get<std::string>();
}

Result<ConstraintSource> choice_grammar(const OrderedJson& v, const std::string& field) {
  if (!v.is_array() || v.empty()) return errorf("'{}' must be a non-empty array of strings", field);
  std::string g = "root ::= ";
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string()) return errorf("'{}[{}]' must be a string, got {}", field, i, json_type(v[i]));
    if (i) g += " | ";
    g += ebnf_literal(v[i].get<std::string>());
  }
  return ConstraintSource{Kind::kGrammar, g};
}

// Built as a named value: GCC 12 warns (-Wmaybe-uninitialized, a false
// positive) on a braced temporary moved into the Result.
Result<OutputFormat> json_format(std::string schema, const char* field) {
  OutputFormat f;
  f.source.kind = Kind::kJsonSchema;
  f.source.text = std::move(schema);
  f.field = field;
  return f;
}

Result<OutputFormat> response_format(const OrderedJson& rf) {
  if (!rf.is_object()) return errorf("'response_format' must be an object, got {}", json_type(rf));
  const std::string type = string_field(rf, "type");
  if (type == "json_object") return json_format(R"({"type":"object"})", "response_format");
  if (type != "json_schema")
    return errorf("'response_format.type' must be 'text', 'json_object' or 'json_schema', got '{}'", type);
  auto js = rf.find("json_schema");
  if (js == rf.end() || !js->is_object()) return errorf("'response_format.json_schema' must be an object");
  if (auto strict = js->find("strict"); strict != js->end() && !strict->is_boolean() && !strict->is_null())
    return errorf("'response_format.json_schema.strict' must be a boolean");
  auto schema = js->find("schema");
  if (schema == js->end() || schema->is_null())  // OpenAI's default: any JSON
    return json_format("{}", "response_format.json_schema");
  M2_ASSIGN_OR_RETURN(std::string text, schema_text(*schema, "response_format.json_schema.schema"));
  return json_format(std::move(text), "response_format.json_schema.schema");
}

// One of vLLM's `structured_outputs` keys (or its `guided_*` twin) -> a source.
Result<ConstraintSource> vllm_field(const std::string& key, const OrderedJson& v, const std::string& field) {
  if (key == "json") {
    M2_ASSIGN_OR_RETURN(std::string text, schema_text(v, field));
    return ConstraintSource{Kind::kJsonSchema, std::move(text)};
  }
  if (key == "regex") {
    M2_ASSIGN_OR_RETURN(std::string text, nonempty_string(v, field));
    return ConstraintSource{Kind::kRegex, std::move(text)};
  }
  if (key == "grammar") {
    M2_ASSIGN_OR_RETURN(std::string text, nonempty_string(v, field));
    return ConstraintSource{Kind::kGrammar, std::move(text)};
  }
  if (key == "choice") return choice_grammar(v, field);
  // json_object
  if (!v.is_boolean()) return errorf("'{}' must be a boolean", field);
  return ConstraintSource{Kind::kJsonSchema, R"({"type":"object"})"};
}

Result<std::optional<OutputFormat>> structured_outputs(const OrderedJson& so) {
  if (!so.is_object()) return errorf("'structured_outputs' must be an object, got {}", json_type(so));
  std::optional<OutputFormat> out;
  for (const auto& [key, v] : so.items()) {
    const std::string field = "structured_outputs." + key;
    if (v.is_null()) continue;
    if (key != "json" && key != "regex" && key != "choice" && key != "grammar" && key != "json_object")
      return errorf("'{}' is not supported (json, regex, choice, grammar and json_object are)", field);
    if (key == "json_object" && v.is_boolean() && !v.get<bool>()) continue;
    if (out) return errorf("'structured_outputs' must give one of json, regex, choice, grammar, json_object");
    M2_ASSIGN_OR_RETURN(ConstraintSource s, vllm_field(key, v, field));
    out = OutputFormat{std::move(s), field};
  }
  return out;
}

// The grammar of one parameter's value as the parser reads it
// (text/tool_schema.h, vLLM's rule): a string is the raw text up to
// `</parameter>`, anything else JSON. `defs`: the tool schema's $defs, for
// the $refs of a JSON value.
OrderedJson xml_value_format(const OrderedJson& schema, const OrderedJson& defs) {
  const OrderedJson any_text = {{"type", "any_text"}, {"excludes", {"</parameter>"}}};
  if (!schema.is_object() || schema.empty()) return any_text;  // any value: raw text is one
  auto all_strings = [](const OrderedJson& list) {
    return list.is_array() && !list.empty() &&
           std::all_of(list.begin(), list.end(), [](const OrderedJson& v) { return v.is_string(); });
  };
  if (auto c = schema.find("const"); c != schema.end() && c->is_string())
    return {{"type", "const_string"}, {"value", *c}};
  if (auto e = schema.find("enum"); e != schema.end() && all_strings(*e)) {
    OrderedJson options = OrderedJson::array();
    for (const auto& v : *e) options.push_back({{"type", "const_string"}, {"value", v}});
    return options.size() == 1 ? options[0] : OrderedJson{{"type", "or"}, {"elements", options}};
  }
  auto type = schema.find("type");
  const bool string_type = type != schema.end() && *type == "string";
  // A union with string (["string", "null"], anyOf): the parser keeps the raw
  // text for it, so no JSON grammar can describe it; left free.
  const bool string_union = type != schema.end() && type->is_array() &&
                            std::find(type->begin(), type->end(), "string") != type->end();
  if (string_union || (type == schema.end() && (schema.contains("anyOf") || schema.contains("oneOf"))))
    return any_text;
  if (string_type) {
    if (auto pattern = schema.find("pattern"); pattern != schema.end() && pattern->is_string())
      return {{"type", "regex"}, {"pattern", *pattern}};
    // A length bound counts characters: a regex over code points (valid
    // UTF-8 only, which any_text does not ensure), as xgrammar's own XML
    // converter bounds a string.
    auto bound = [&](const char* key) -> std::optional<uint64_t> {
      auto it = schema.find(key);
      if (it == schema.end() || !it->is_number_unsigned()) return std::nullopt;
      return it->get<uint64_t>();
    };
    const auto min = bound("minLength"), max = bound("maxLength");
    if (min || max) {
      const std::string reps = fmt::format("{{{},{}}}", min.value_or(0), max ? std::to_string(*max) : "");
      return {{"type", "regex"}, {"pattern", "[\\s\\S]" + reps}};
    }
    return any_text;
  }
  OrderedJson s = schema;
  if (defs.is_object() && !s.contains("$defs")) s["$defs"] = defs;
  return {{"type", "json_schema"}, {"json_schema", s}, {"max_whitespace_cnt", 16}};
}

// One `<invoke name="T">` of a tool as the template renders it (m2-spec
// §5): `<invoke name="T">\n`, then `<parameter name="k">v</parameter>\n`
// for each parameter in the schema's order (the required ones always, the
// others optional), then `</invoke>`. `strict` false: any parameters.
OrderedJson invoke_tag(const OrderedJson& function, bool strict, const char* begin_prefix, const char* end_suffix) {
  const std::string name = function["name"].get<std::string>();
  const OrderedJson begin = std::string(begin_prefix) + "<invoke name=\"" + name + "\">\n";
  const OrderedJson end = std::string("</invoke>") + end_suffix;
  OrderedJson params;
  if (auto p = function.find("parameters"); p != function.end() && p->is_object()) params = *p;
  auto props = params.is_object() ? params.find("properties") : params.end();
  if (!strict || !params.is_object() || props == params.end() || !props->is_object()) {
    // Free parameters: xgrammar's own minimax_xml form of "any object".
    return {{"type", "tag"}, {"begin", begin},
            {"content", {{"type", "json_schema"}, {"json_schema", {{"type", "object"}}}, {"style", "minimax_xml"}}},
            {"end", end}};
  }
  const OrderedJson defs = params.contains("$defs") ? params["$defs"] : OrderedJson();
  std::set<std::string> required;
  if (auto r = params.find("required"); r != params.end() && r->is_array())
    for (const auto& k : *r)
      if (k.is_string()) required.insert(k.get<std::string>());
  OrderedJson elements = OrderedJson::array();
  for (const auto& [key, sub] : props->items()) {
    OrderedJson tag = {{"type", "tag"}, {"begin", "<parameter name=\"" + key + "\">"},
                       {"content", xml_value_format(sub, defs)}, {"end", "</parameter>\n"}};
    elements.push_back(required.count(key) ? tag : OrderedJson{{"type", "optional"}, {"content", tag}});
  }
  OrderedJson content = elements.empty() ? OrderedJson{{"type", "const_string"}, {"value", ""}}
                                         : OrderedJson{{"type", "sequence"}, {"elements", elements}};
  return {{"type", "tag"}, {"begin", begin}, {"content", content}, {"end", end}};
}

std::vector<const OrderedJson*> callable(const ToolRequest& tools) {
  std::vector<const OrderedJson*> out;
  for (const auto& t : tools.tools) {
    const OrderedJson& fn = t["function"];
    const std::string name = fn["name"].get<std::string>();
    if (tools.choice == ToolRequest::Choice::kNamed && name != tools.forced_name) continue;
    if (tools.allowed && !tools.allowed->count(name)) continue;
    out.push_back(&fn);
  }
  return out;
}

std::string structural_tag(OrderedJson format) {
  return OrderedJson{{"type", "structural_tag"}, {"format", std::move(format)}}.dump();
}

}  // namespace

std::string ebnf_literal(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);  // UTF-8 bytes pass as they are
    }
  }
  return out + "\"";
}

Result<std::optional<OutputFormat>> read_output_format(const OrderedJson& body) {
  std::optional<OutputFormat> out;
  std::string first;
  auto take = [&](OutputFormat f, const std::string& top) -> Status {
    if (out) return errorf("'{}' and '{}' both constrain the output: give one of them", first, top);
    first = top;
    out = std::move(f);
    return Status();
  };
  auto present = [&](const char* key) { return body.contains(key) && !body[key].is_null(); };
  if (present("response_format")) {
    const OrderedJson& rf = body["response_format"];
    if (!(rf.is_object() && string_field(rf, "type") == "text")) {
      M2_ASSIGN_OR_RETURN(OutputFormat f, response_format(rf));
      M2_RETURN_IF_ERROR(take(std::move(f), "response_format"));
    }
  }
  if (present("structured_outputs")) {
    M2_ASSIGN_OR_RETURN(std::optional<OutputFormat> f, structured_outputs(body["structured_outputs"]));
    if (f) M2_RETURN_IF_ERROR(take(std::move(*f), "structured_outputs"));
  }
  for (const char* key : {"json", "regex", "choice", "grammar"}) {
    const std::string guided = std::string("guided_") + key;
    if (!present(guided.c_str())) continue;
    M2_ASSIGN_OR_RETURN(ConstraintSource s, vllm_field(key, body[guided], guided));
    M2_RETURN_IF_ERROR(take({std::move(s), guided}, guided));
  }
  if (present("guided_whitespace_pattern")) return errorf("'guided_whitespace_pattern' is not supported");
  if (present("guided_decoding_backend") && !body["guided_decoding_backend"].is_string())
    return errorf("'guided_decoding_backend' must be a string");
  // llama.cpp's server fields.
  if (present("grammar")) {
    M2_ASSIGN_OR_RETURN(std::string g, nonempty_string(body["grammar"], "grammar"));
    OutputFormat f;
    f.source = {Kind::kGrammar, std::move(g)};
    f.field = "grammar";
    M2_RETURN_IF_ERROR(take(std::move(f), "grammar"));
  }
  if (present("json_schema")) {
    M2_ASSIGN_OR_RETURN(std::string text, schema_text(body["json_schema"], "json_schema"));
    M2_ASSIGN_OR_RETURN(OutputFormat f, json_format(std::move(text), "json_schema"));
    M2_RETURN_IF_ERROR(take(std::move(f), "json_schema"));
  }
  return out;
}

Result<std::shared_ptr<const Constraint>> compile_constraint(const ServerContext& ctx, const ConstraintSource& source,
                                                             const std::string& field) {
  if (!ctx.constraints) return errorf("'{}': constrained decoding is not available for this model", field);
  auto c = ctx.constraints->compile(source);
  if (!c.ok()) return errorf("'{}' cannot be used: {}", field, c.status().message());
  return *c;
}

std::optional<ConstraintSource> forced_tool_call_grammar(const ToolRequest& tools) {
  using Choice = ToolRequest::Choice;
  if (tools.choice != Choice::kRequired && tools.choice != Choice::kNamed) return std::nullopt;
  OrderedJson invokes = OrderedJson::array();
  for (const OrderedJson* fn : callable(tools)) invokes.push_back(invoke_tag(*fn, true, "", "\n"));
  if (invokes.empty()) return std::nullopt;
  OrderedJson one = invokes.size() == 1 ? invokes[0] : OrderedJson{{"type", "or"}, {"elements", invokes}};
  OrderedJson calls = tools.parallel ? OrderedJson{{"type", "plus"}, {"content", one}} : one;
  OrderedJson seq = {{"type", "sequence"},
                     {"elements",
                      {{{"type", "const_string"}, {"value", "\n\n<minimax:tool_call>\n"}},
                       calls,
                       {{"type", "const_string"}, {"value", "</minimax:tool_call>"}}}}};
  return ConstraintSource{Kind::kStructuralTag, structural_tag(std::move(seq))};
}

Result<std::optional<ConstraintSource>> strict_tool_call_grammar(const ToolRequest& tools) {
  bool any_strict = false;
  OrderedJson tags = OrderedJson::array();
  for (size_t i = 0; i < tools.tools.size(); ++i) {
    const OrderedJson& fn = tools.tools[i]["function"];
    auto strict = fn.find("strict");
    if (strict != fn.end() && !strict->is_null() && !strict->is_boolean())
      return errorf("'tools[{}].function.strict' must be a boolean, got {}", i, json_type(*strict));
  }
  if (tools.choice != ToolRequest::Choice::kAuto) return std::optional<ConstraintSource>();
  for (const OrderedJson* fn : callable(tools)) {
    auto strict = fn->find("strict");
    const bool is_strict = strict != fn->end() && strict->is_boolean() && strict->get<bool>();
    any_strict = any_strict || is_strict;
    tags.push_back(invoke_tag(*fn, is_strict, "<minimax:tool_call>\n", "\n</minimax:tool_call>"));
  }
  if (!any_strict) return std::optional<ConstraintSource>();
  OrderedJson format = {{"type", "triggered_tags"}, {"triggers", {"<minimax:tool_call>"}}, {"tags", tags}};
  return std::optional<ConstraintSource>(ConstraintSource{Kind::kStructuralTag, structural_tag(std::move(format))});
}

}  // namespace m2::server
