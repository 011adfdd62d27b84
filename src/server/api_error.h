// Errors as each API spells them: OpenAI's {"error": {message, type, param,
// code}} on the OpenAI routes, Anthropic's {"type": "error", "error": {type,
// message}} on /v1/messages. The HTTP status decides the error type, as the
// official SDKs map statuses to exception classes.
#pragma once

#include <string>

#include "server/http_server.h"
#include "util/json.h"

namespace m2::server {

enum class ApiFlavor { kOpenAI, kAnthropic };

struct ApiError {
  int status = 400;
  std::string message;
  std::string param;        // OpenAI's `param`: the request field at fault ("" -> null)
  std::string code;         // OpenAI's `code` ("" -> null)
  int retry_after_s = 0;    // > 0: sent as Retry-After (429, 503)
  std::string request_id;   // the request's id (request_headers.h), as `request_id` in the body
};

ApiError bad_request(std::string message, std::string param = {});

// The error object (also the payload of a streamed error event).
OrderedJson error_json(const ApiError& error, ApiFlavor flavor);
HttpResponse error_response(const ApiError& error, ApiFlavor flavor);

// JSON text for the wire: invalid UTF-8 (never expected) is replaced, not thrown.
std::string dump_json(const OrderedJson& j);

}  // namespace m2::server
