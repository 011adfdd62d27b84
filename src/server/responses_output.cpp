#include "server/responses_output.h"

#include "server/json_fields.h"

namespace m2::server {
namespace {

bool all_space(const std::string& s) { return s.find_first_not_of(" \t\r\n") == std::string::npos; }

OrderedJson output_text(const std::string& text) {
  return {{"type", "output_text"},
          {"text", text},
          {"annotations", OrderedJson::array()},
          {"logprobs", OrderedJson::array()}};
}

}  // namespace

void ResponsesOutput::emit(const char* type, OrderedJson fields) {
  if (!sink_) return;
  OrderedJson e = {{"type", type}};
  for (auto& [k, v] : fields.items()) e[k] = std::move(v);
  sink_(std::move(e));
}

OrderedJson ResponsesOutput::where() const {
  return {{"item_id", items_.back()["id"]}, {"output_index", items_.size() - 1}};
}

void ResponsesOutput::open(Open kind, OrderedJson item) {
  close("completed");
  items_.push_back(item);
  open_ = kind;
  text_.clear();
  emit("response.output_item.added", {{"output_index", items_.size() - 1}, {"item", std::move(item)}});
  OrderedJson at = where();
  if (kind == Open::kReasoning) {
    if (summary_) {
      OrderedJson e = at;
      e["summary_index"] = 0;
      e["part"] = {{"type", "summary_text"}, {"text", ""}};
      emit("response.reasoning_summary_part.added", std::move(e));
    }
    OrderedJson e = at;
    e["content_index"] = 0;
    e["part"] = {{"type", "reasoning_text"}, {"text", ""}};
    emit("response.content_part.added", std::move(e));
  } else if (kind == Open::kMessage) {
    OrderedJson e = at;
    e["content_index"] = 0;
    e["part"] = output_text("");
    emit("response.content_part.added", std::move(e));
  }
}

void ResponsesOutput::close(const char* status) {
  if (open_ == Open::kNone) return;
  OrderedJson at = where();
  OrderedJson& item = current();
  if (open_ == Open::kReasoning) {
    // The text's done event, its part's done event, and the part in the item:
    // for the reasoning text, and for its summary when one was asked for.
    auto finish = [&](const char* index_key, const char* text_done, const char* part_done, const char* part_type,
                      const char* field) {
      OrderedJson e = at;
      e[index_key] = 0;
      e["text"] = text_;
      emit(text_done, e);
      e.erase("text");
      e["part"] = {{"type", part_type}, {"text", text_}};
      emit(part_done, std::move(e));
      item[field] = OrderedJson::array({{{"type", part_type}, {"text", text_}}});
    };
    finish("content_index", "response.reasoning_text.done", "response.content_part.done", "reasoning_text", "content");
    if (summary_)
      finish("summary_index", "response.reasoning_summary_text.done", "response.reasoning_summary_part.done",
             "summary_text", "summary");
    if (sealer_) item["encrypted_content"] = sealer_->seal(text_);
  } else if (open_ == Open::kMessage) {
    OrderedJson e = at;
    e["content_index"] = 0;
    e["text"] = text_;
    e["logprobs"] = OrderedJson::array();
    emit("response.output_text.done", e);
    e.erase("text");
    e.erase("logprobs");
    e["part"] = output_text(text_);
    emit("response.content_part.done", std::move(e));
    item["content"] = OrderedJson::array({output_text(text_)});
  } else {
    OrderedJson e = at;
    e["name"] = item["name"];
    e["arguments"] = text_;
    emit("response.function_call_arguments.done", std::move(e));
    item["arguments"] = text_;
  }
  item["status"] = status;
  emit("response.output_item.done", {{"output_index", items_.size() - 1}, {"item", item}});
  open_ = Open::kNone;
}

void ResponsesOutput::add(const text::AssistantDelta& d) {
  if (!d.reasoning_content.empty()) {
    if (open_ != Open::kReasoning)
      open(Open::kReasoning, {{"id", "rs_" + random_hex(12)},
                              {"type", "reasoning"},
                              {"summary", OrderedJson::array()},
                              {"status", "in_progress"}});
    text_ += d.reasoning_content;
    OrderedJson e = where();
    e["content_index"] = 0;
    e["delta"] = d.reasoning_content;
    emit("response.reasoning_text.delta", std::move(e));
    if (summary_) {
      OrderedJson s = where();
      s["summary_index"] = 0;
      s["delta"] = d.reasoning_content;
      emit("response.reasoning_summary_text.delta", std::move(s));
    }
  }
  if (!d.content.empty()) {
    std::string piece = d.content;
    if (open_ != Open::kMessage) {
      // The blank lines between `</think>` and a tool call are no message.
      if (all_space(piece)) {
        piece.clear();
      } else {
        open(Open::kMessage, {{"id", "msg_" + random_hex(12)},
                              {"type", "message"},
                              {"status", "in_progress"},
                              {"role", "assistant"},
                              {"content", OrderedJson::array()}});
        // Leading whitespace of the answer (after `</think>`) is not part of it.
        piece = piece.substr(piece.find_first_not_of(" \t\r\n"));
      }
    }
    if (!piece.empty()) {
      text_ += piece;
      OrderedJson e = where();
      e["content_index"] = 0;
      e["delta"] = piece;
      e["logprobs"] = OrderedJson::array();
      emit("response.output_text.delta", std::move(e));
    }
  }
  for (const text::ToolCallDelta& t : d.tool_calls) {
    if (!t.id.empty()) {
      ++calls_;
      open(Open::kCall, {{"id", "fc_" + random_hex(12)},
                         {"type", "function_call"},
                         {"status", "in_progress"},
                         {"arguments", ""},
                         {"call_id", t.id},
                         {"name", t.name}});
    }
    if (!t.arguments.empty() && open_ == Open::kCall) {
      text_ += t.arguments;
      OrderedJson e = where();
      e["delta"] = t.arguments;
      emit("response.function_call_arguments.delta", std::move(e));
    }
  }
}

void ResponsesOutput::finish(bool incomplete) { close(incomplete ? "incomplete" : "completed"); }

OrderedJson ResponsesOutput::chat_message() const {
  OrderedJson m = {{"role", "assistant"}, {"content", ""}};
  for (const auto& item : items_) {
    const std::string type = item["type"];
    if (type == "reasoning") {
      m["reasoning_content"] = item["content"][0]["text"];
    } else if (type == "message") {
      m["content"] = item["content"][0]["text"];
    } else {
      if (!m.contains("tool_calls")) m["tool_calls"] = OrderedJson::array();
      m["tool_calls"].push_back({{"id", item["call_id"]},
                                 {"type", "function"},
                                 {"function", {{"name", item["name"]}, {"arguments", item["arguments"]}}}});
    }
  }
  return m;
}

}  // namespace m2::server
