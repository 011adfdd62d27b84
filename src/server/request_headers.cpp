#include "server/request_headers.h"

#include "server/api_error.h"
#include "server/json_fields.h"

namespace m2::server {
namespace {

bool id_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("._:/+=-").find(c) != std::string_view::npos;
}

// What a preflight may ask to send: header names only (RFC 9110 tokens and
// list separators), so nothing but names is echoed into the answer.
bool header_list_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("!#$%&'*+-.^_`|~, ").find(c) != std::string_view::npos;
}

}  // namespace

std::string choose_request_id(const HttpRequest& request) {
  const std::string_view given = request.header("x-request-id");
  bool ok = !given.empty() && given.size() <= 128;
  for (char c : given) ok = ok && id_char(c);
  return ok ? std::string(given) : "req_" + random_hex(16);
}

std::string allowed_origin(const std::vector<std::string>& allowed, std::string_view origin) {
  if (origin.empty()) return "";
  for (const auto& a : allowed) {
    if (a == "*") return "*";
    if (a == origin) return std::string(origin);
  }
  return "";
}

bool is_preflight(const HttpRequest& request) {
  return request.method == "OPTIONS" && !request.header("origin").empty() &&
         !request.header("access-control-request-method").empty();
}

HttpResponse preflight_response(const HttpRequest& request, const std::vector<std::string>& allowed) {
  const std::string_view origin = request.header("origin");
  const std::string allow = allowed_origin(allowed, origin);
  if (allow.empty()) {
    ApiError e;
    e.status = 403;
    e.message = "CORS: the origin '" + std::string(origin) + "' is not allowed (see --allowed-origins)";
    e.param = "Origin";
    e.request_id = request.request_id;
    return error_response(e, ApiFlavor::kOpenAI);
  }
  HttpResponse r;
  r.status = 204;
  r.content_type = "";
  r.headers.emplace_back("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
  std::string_view asked = request.header("access-control-request-headers");
  bool names_only = asked.size() <= 4096;
  for (char c : asked) names_only = names_only && header_list_char(c);
  r.headers.emplace_back("Access-Control-Allow-Headers", names_only && !asked.empty()
                                                             ? std::string(asked)
                                                             : "authorization, content-type, x-api-key, x-request-id");
  r.headers.emplace_back("Access-Control-Max-Age", "600");
  return r;
}

Headers answer_headers(const HttpRequest& request, const std::vector<std::string>& allowed) {
  Headers h;
  h.emplace_back("x-request-id", request.request_id);
  h.emplace_back("request-id", request.request_id);
  const std::string allow = allowed_origin(allowed, request.header("origin"));
  if (!allow.empty()) {
    h.emplace_back("Access-Control-Allow-Origin", allow);
    h.emplace_back("Access-Control-Expose-Headers", "x-request-id, request-id, retry-after");
    h.emplace_back("Vary", "Origin");
  }
  return h;
}

void HeaderWriter::respond(HttpResponse response) {
  for (const auto& h : headers_) response.headers.push_back(h);
  inner_->respond(std::move(response));
}

void HeaderWriter::begin_stream(int status, std::string content_type, Headers headers) {
  for (const auto& h : headers_) headers.push_back(h);
  inner_->begin_stream(status, std::move(content_type), std::move(headers));
}

}  // namespace m2::server
