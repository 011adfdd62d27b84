// The HTTP layer and router on a real loopback socket, before any model is
// loaded: /health answers 503 with Retry-After until the server is ready,
// generation routes 503, unknown routes 404; keep-alive, chunked streaming
// and the body limit of HttpServer itself.
#include "server/server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

namespace m2::server {
namespace {

// One request on a fresh connection; returns everything the server sent.
std::string roundtrip(int port, const std::string& request) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return "";
  }
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  (void)!write(fd, request.data(), request.size());
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  close(fd);
  return out;
}

std::string get(int port, const std::string& path) {
  return roundtrip(port, "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
}

std::string post(int port, const std::string& path, const std::string& body) {
  return roundtrip(port, "POST " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: " +
                            std::to_string(body.size()) + "\r\n\r\n" + body);
}

TEST(ServerBeforeReady, HealthIs503AndGenerationWaits) {
  ServerContext ctx;
  ctx.options.served_model_names = {"m"};
  ctx.options.access_log = false;
  HttpServerConfig http;
  http.port = 0;
  auto server = Server::create(http, ctx);
  ASSERT_TRUE(server.ok()) << server.status().message();
  (*server)->start();
  const int port = (*server)->port();
  const std::string health = get(port, "/health");
  EXPECT_EQ(health.rfind("HTTP/1.1 503", 0), 0u) << health;
  EXPECT_NE(health.find("Retry-After: 1"), std::string::npos);
  const std::string chat = post(port, "/v1/chat/completions", "{}");
  EXPECT_EQ(chat.rfind("HTTP/1.1 503", 0), 0u) << chat;
  EXPECT_NE(chat.find("\"type\":\"service_unavailable_error\""), std::string::npos);
  EXPECT_EQ(get(port, "/metrics").rfind("HTTP/1.1 200", 0), 0u);
  EXPECT_EQ(get(port, "/nope").rfind("HTTP/1.1 503", 0), 0u);  // nothing is routed before the model loads
  (*server)->http().stop();
}

TEST(HttpServer, KeepAliveStreamingAndBodyLimit) {
  HttpServerConfig config;
  config.port = 0;
  config.max_body_bytes = 100;
  auto server = HttpServer::create(config, [](HttpRequest&& r, std::shared_ptr<ResponseWriter> w) {
    if (r.body_too_large) {
      HttpResponse resp;
      resp.status = 413;
      return w->respond(std::move(resp));
    }
    if (r.path == "/stream") {
      w->begin_stream(200, "text/event-stream", {});
      // Written from another thread, as the engine's outputs are.
      std::thread([w] {
        w->write("data: 1\n\n");
        w->write("data: 2\n\n");
        w->end();
      }).detach();
      return;
    }
    HttpResponse resp;
    resp.body = r.method + " " + r.target + " " + r.body + " " + std::string(r.header("x-test"));
    w->respond(std::move(resp));
  });
  ASSERT_TRUE(server.ok());
  (*server)->start();
  const int port = (*server)->port();
  // Two requests on one connection (keep-alive).
  const std::string two = roundtrip(port,
                                   "POST /a?q=1 HTTP/1.1\r\nHost: x\r\nX-Test: yes\r\nContent-Length: 2\r\n\r\nhi"
                                   "GET /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_NE(two.find("POST /a?q=1 hi yes"), std::string::npos) << two;
  EXPECT_NE(two.find("GET /b  "), std::string::npos) << two;
  const std::string s = get(port, "/stream");
  EXPECT_NE(s.find("Transfer-Encoding: chunked"), std::string::npos);
  EXPECT_NE(s.find("9\r\ndata: 1\n\n\r\n9\r\ndata: 2\n\n\r\n0\r\n\r\n"), std::string::npos) << s;
  const std::string big = post(port, "/x", std::string(1000, 'a'));
  EXPECT_EQ(big.rfind("HTTP/1.1 413", 0), 0u) << big;
  EXPECT_NE(big.find("Connection: close"), std::string::npos);
  (*server)->stop();
}

}  // namespace
}  // namespace m2::server
