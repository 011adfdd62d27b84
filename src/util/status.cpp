#include "util/status.h"

namespace m2 {

const std::string& Status::message() const {
  static const std::string kOk = "ok";
  return message_ ? *message_ : kOk;
}

Status Status::with_context(std::string_view context) const {
  if (ok()) return *this;
  return Status::error(fmt::format("{}: {}", context, *message_));
}

}  // namespace m2
