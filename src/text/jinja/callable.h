// Callable values and variable scopes of the evaluator.
//
// Scopes follow Jinja's rules: the template body, each for-loop iteration,
// each macro call and each {% with %}/{% set %}-block/{% filter %} body get
// their own frame; {% if %} does not. A macro keeps a reference to the frame
// it was defined in and resolves free names there at call time, so it sees
// later assignments of the template but not the caller's loop variables —
// what Jinja's compiled closures do.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/builtins.h"
#include "text/jinja/value.h"

namespace m2::text::jinja {

struct Frame {
  std::shared_ptr<Frame> parent;

  Value* find_local(int slot) {
    for (size_t i = 0; i < inline_count_; ++i) {
      if (inline_[i].first == slot) return &inline_[i].second;
    }
    for (auto& [s, v] : more_) {
      if (s == slot) return &v;
    }
    return nullptr;
  }
  void set(int slot, Value v) {
    if (Value* p = find_local(slot)) {
      *p = std::move(v);
    } else if (inline_count_ < kInline) {
      inline_[inline_count_++] = {slot, std::move(v)};
    } else {
      more_.emplace_back(slot, std::move(v));
    }
  }
  void clear() {
    for (size_t i = 0; i < inline_count_; ++i) inline_[i].second = Value();
    inline_count_ = 0;
    more_.clear();
  }

 private:
  // Most frames hold one to three variables (a loop's `loop` and target, a
  // macro's parameters): those live inside the frame, without allocating.
  static constexpr size_t kInline = 4;
  std::array<std::pair<int, Value>, kInline> inline_;
  size_t inline_count_ = 0;
  std::vector<std::pair<int, Value>> more_;
};

struct Callable {
  enum class Type : uint8_t { kMacro, kGlobal, kMethod };
  Type type = Type::kGlobal;
  std::string name;
  const ast::Macro* macro = nullptr;  // kMacro
  std::shared_ptr<Frame> closure;     // kMacro: the defining frame
  GlobalFn global = nullptr;          // kGlobal
  Value receiver;                     // kMethod
};

}  // namespace m2::text::jinja
