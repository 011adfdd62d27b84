// libFuzzer harness: the HTTP request parser as the server runs it
// (http_session.cpp: Beast's request_parser with the server's head and body
// limits, then the RFC 9112 checks of http_framing.h on the head before the
// body is read), over a byte stream of pipelined requests. Input: a byte
// seeding the read sizes, then the stream.
//
// Property, the one request smuggling breaks: where each request ends, its
// verdict and its body do not depend on how the bytes arrive. The stream is
// parsed once whole and once in reads of 1 to 64 bytes; both must give the
// same sequence of outcomes. And an accepted head has an origin-form target
// and a path that starts with '/' (or is "*").
#include <boost/asio/buffer.hpp>
#include <boost/beast/http.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "server/http_framing.h"

namespace m2::server {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;

constexpr size_t kHeaderLimit = 64 * 1024;  // http_session.cpp kHeaderLimitBytes
constexpr size_t kBodyLimit = 4096;         // small, so that 413 paths are reached

struct Outcome {
  std::string what;  // "incomplete", "http-error <ec>", "refused <status>", "body-limit", "done"
  std::string path, target, body;
  size_t consumed = 0;  // bytes of the stream this request took
  bool operator==(const Outcome&) const = default;
};

template <typename View>
std::string str(const View& v) {
  return std::string(v.data(), v.size());
}

// One request from `stream`, delivered in reads whose sizes come from `seed`
// (0: all at once), as Session::read_request/on_header/read_body do.
Outcome parse_one(std::string_view stream, uint32_t& seed) {
  http::request_parser<http::string_body> parser;
  parser.header_limit(kHeaderLimit);
  parser.body_limit(kBodyLimit);
  Outcome out;
  std::string pending;  // received, not yet consumed by the parser
  size_t delivered = 0;
  bool head_checked = false;
  bool stuck = false;  // the parser took nothing of what is pending
  for (;;) {
    if (delivered == stream.size() && (pending.empty() || stuck)) return out.what = "incomplete", out;
    size_t n = stream.size() - delivered;
    if (seed != 0) {
      seed = seed * 1103515245u + 12345u;
      n = std::min<size_t>(n, 1 + ((seed >> 16) % 64));
    }
    pending.append(stream.substr(delivered, n));
    delivered += n;
    for (;;) {
      beast::error_code ec;
      const size_t used = parser.put(boost::asio::buffer(pending), ec);
      stuck = used == 0;
      pending.erase(0, used);
      out.consumed += used;
      if (ec == http::error::need_more) break;
      if (ec == http::error::body_limit && !head_checked && parser.is_header_done()) {
        out.what = "body-limit";  // Content-Length alone over the limit: 413 before the body
        return out;
      }
      if (ec == http::error::bad_version) {
        out.what = "http-error version, refused " + std::to_string(refused_version_status(pending.substr(0, 1024)));
        return out;
      }
      if (ec) return out.what = "http-error " + ec.message(), out;
      if (parser.is_header_done() && !head_checked) {
        head_checked = true;
        const auto& msg = parser.get();
        RequestHead head;
        head.version = static_cast<int>(msg.version());
        head.method = str(msg.method_string());
        head.target = str(msg.target());
        for (const auto& field : msg) {
          std::string name = str(field.name_string());
          for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
          head.headers.emplace_back(std::move(name), str(field.value()));
        }
        head.parser_chunked = parser.chunked();
        head.parser_has_length = parser.content_length().has_value();
        const FramingVerdict verdict = check_request_head(head);
        if (!verdict.ok()) return out.what = "refused " + std::to_string(verdict.status), out;
        FUZZ_CHECK(!verdict.path.empty() && (verdict.path[0] == '/' || verdict.path == "*"), "accepted path '%s'",
                   verdict.path.c_str());
        FUZZ_CHECK(verdict.target.rfind(verdict.path, 0) == 0, "target '%s' does not start with its path '%s'",
                   verdict.target.c_str(), verdict.path.c_str());
        out.path = verdict.path;
        out.target = verdict.target;
      }
      if (parser.is_done()) {
        out.what = "done";
        out.body = parser.get().body();
        return out;
      }
      if (pending.empty() || used == 0) break;  // the parser wants more bytes
    }
  }
}

// Up to four pipelined requests; parsing stops at the first that does not
// end in "done" (the server closes the connection then).
std::vector<Outcome> parse_stream(std::string_view stream, uint32_t seed) {
  std::vector<Outcome> outcomes;
  while (outcomes.size() < 4) {
    Outcome o = parse_one(stream, seed);
    if (o.what != "done") {
      o.consumed = 0;  // the connection closes: how much was read does not matter
      outcomes.push_back(o);
      break;
    }
    outcomes.push_back(o);
    FUZZ_CHECK(o.consumed > 0 && o.consumed <= stream.size(), "a request of %zu bytes", o.consumed);
    stream.remove_prefix(o.consumed);
  }
  return outcomes;
}

}  // namespace
}  // namespace m2::server

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace m2::server;
  if (size < 1) return 0;
  const std::string_view stream(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::vector<Outcome> whole = parse_stream(stream, 0);
  const std::vector<Outcome> pieces = parse_stream(stream, 1u + data[0]);
  FUZZ_CHECK(whole.size() == pieces.size(), "%zu requests read whole, %zu in pieces", whole.size(), pieces.size());
  for (size_t i = 0; i < whole.size(); ++i) {
    // One exception, which serves nothing either way: Beast rejects some
    // malformed heads (a bare CR in a field, a bad version) as soon as it
    // sees the bad byte, so how much of the head it has then decides
    // between waiting for more (the server closes at its request timeout),
    // which error, and 505 or 400 for a bad version. None is a request.
    auto beast_refused = [](const Outcome& o) { return o.what == "incomplete" || o.what.rfind("http-error", 0) == 0; };
    const bool malformed_either_way = beast_refused(whole[i]) && beast_refused(pieces[i]);
    FUZZ_CHECK(whole[i] == pieces[i] || malformed_either_way,
               "request %zu: whole '%s' (%zu bytes), in pieces '%s' (%zu bytes)", i, whole[i].what.c_str(),
               whole[i].consumed, pieces[i].what.c_str(), pieces[i].consumed);
  }
  return 0;
}
