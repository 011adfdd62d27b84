#include "server/thinking_request.h"

#include <limits>

#include "server/json_fields.h"

namespace m2::server {

Result<ThinkingRequest> parse_thinking_request(const OrderedJson& body, OrderedJson& request) {
  ThinkingRequest out;
  M2_ASSIGN_OR_RETURN(std::optional<std::string> effort, opt_string(body, "reasoning_effort"));
  if (effort) {
    if (*effort == "none") {
      OrderedJson& kwargs = request["chat_template_kwargs"];
      if (kwargs.is_null()) kwargs = OrderedJson::object();
      if (kwargs.is_object() && !kwargs.contains("enable_thinking")) kwargs["enable_thinking"] = false;
    } else {
      bool known = false;
      for (const EffortBudget& e : kEffortBudgets) {
        if (e.effort == *effort) out.budget = e.budget, known = true;
      }
      if (!known)
        return errorf("'reasoning_effort' must be none, minimal, low, medium, high, xhigh or max, got '{}'", *effort);
    }
  }
  M2_ASSIGN_OR_RETURN(std::optional<int64_t> budget, opt_int(body, "thinking_token_budget"));
  if (budget) {
    if (*budget < 0 || *budget > std::numeric_limits<int>::max())
      return errorf("'thinking_token_budget' must be a non-negative token count, got {}", *budget);
    out.budget = static_cast<int>(*budget);
  }
  return out;
}

}  // namespace m2::server
