#include "server/api_error.h"

namespace m2::server {
namespace {

const char* openai_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "invalid_request_error";
    case 429: return "rate_limit_error";
    case 503: return "service_unavailable_error";
    default: return status >= 500 ? "internal_server_error" : "invalid_request_error";
  }
}

// https://docs.anthropic.com/en/api/errors
const char* anthropic_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503:
    case 529: return "overloaded_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

OrderedJson null_if_empty(const std::string& s) { return s.empty() ? OrderedJson(nullptr) : OrderedJson(s); }

}  // namespace

ApiError bad_request(std::string message, std::string param) {
  ApiError e;
  e.status = 400;
  e.message = std::move(message);
  e.param = std::move(param);
  return e;
}

OrderedJson error_json(const ApiError& error, ApiFlavor flavor) {
  if (flavor == ApiFlavor::kAnthropic) {
    OrderedJson j = {{"type", "error"}, {"error", {{"type", anthropic_type(error.status)}, {"message", error.message}}}};
    if (!error.request_id.empty()) j["request_id"] = error.request_id;  // where Anthropic puts it
    return j;
  }
  OrderedJson e = OrderedJson::object();
  e["message"] = error.message;
  e["type"] = openai_type(error.status);
  e["param"] = null_if_empty(error.param);
  e["code"] = error.code.empty() ? OrderedJson(error.status) : OrderedJson(error.code);
  OrderedJson j = {{"error", std::move(e)}};
  if (!error.request_id.empty()) j["request_id"] = error.request_id;  // beside the error, as Anthropic's
  return j;
}

HttpResponse error_response(const ApiError& error, ApiFlavor flavor) {
  HttpResponse r;
  r.status = error.status;
  r.body = dump_json(error_json(error, flavor));
  if (error.retry_after_s > 0) r.headers.emplace_back("Retry-After", std::to_string(error.retry_after_s));
  return r;
}

std::string dump_json(const OrderedJson& j) { return j.dump(-1, ' ', false, OrderedJson::error_handler_t::replace); }

}  // namespace m2::server
