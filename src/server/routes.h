// The API routes. Each is called on a request thread (off the I/O threads:
// templating and tokenizing take CPU) with the body already parsed as JSON
// and the model name checked; it answers through the writer (thread-safe),
// now (errors) or as the engine produces (a Generation, on the strand).
#pragma once

#include <memory>

#include "server/api_error.h"
#include "server/http_server.h"
#include "server/server_context.h"
#include "util/json.h"

namespace m2::server {

void handle_chat_completions(ServerContext& ctx, const HttpRequest& request, const OrderedJson& body,
                             std::shared_ptr<ResponseWriter> writer);
void handle_completions(ServerContext& ctx, const HttpRequest& request, const OrderedJson& body,
                        std::shared_ptr<ResponseWriter> writer);
void handle_messages(ServerContext& ctx, const HttpRequest& request, const OrderedJson& body,
                     std::shared_ptr<ResponseWriter> writer);
void handle_responses(ServerContext& ctx, const HttpRequest& request, const OrderedJson& body,
                      std::shared_ptr<ResponseWriter> writer);
// GET / DELETE /v1/responses/{id}, GET .../input_items, POST .../cancel: a
// store lookup, answered on the I/O thread.
void handle_response_resource(ServerContext& ctx, const HttpRequest& request,
                              const std::shared_ptr<ResponseWriter>& writer);
void handle_count_tokens(ServerContext& ctx, const HttpRequest& request, const OrderedJson& body,
                         std::shared_ptr<ResponseWriter> writer);

// A whole response to a request that started no generation, counted in the
// metrics and the access log.
void respond_logged(ServerContext& ctx, const HttpRequest& request, ResponseWriter& writer, HttpResponse response);
void respond_error(ServerContext& ctx, const HttpRequest& request, ResponseWriter& writer, const ApiError& error,
                   ApiFlavor flavor);

// "data: {json}\n\n"
std::string sse_data(const OrderedJson& j);

}  // namespace m2::server
