// The RFC 9112 checks of a request head (server/http_framing.h), one rule
// at a time: what is accepted, and the status of what is not.
#include "server/http_framing.h"

#include <gtest/gtest.h>

namespace m2::server {
namespace {

RequestHead head(std::vector<std::pair<std::string, std::string>> headers, std::string method = "POST",
                 int version = 11, std::string target = "/v1/completions") {
  RequestHead h;
  h.version = version;
  h.method = std::move(method);
  h.target = std::move(target);
  h.headers = std::move(headers);
  return h;
}

int status(const RequestHead& h) { return check_request_head(h).status; }

TEST(HttpFraming, AcceptsContentLengthAndChunked) {
  EXPECT_EQ(status(head({{"host", "x"}, {"content-length", "5"}})), 0);
  EXPECT_EQ(status(head({{"host", "x"}, {"transfer-encoding", "chunked"}})), 0);
  EXPECT_EQ(status(head({{"host", "x"}, {"transfer-encoding", " Chunked ;x=1 "}})), 0);
  EXPECT_EQ(status(head({{"host", "localhost:8000"}}, "GET")), 0);
  EXPECT_EQ(status(head({{"host", "[::1]:8000"}}, "GET")), 0);
  EXPECT_EQ(status(head({}, "GET", 10)), 0);  // HTTP/1.0 needs no Host
  EXPECT_EQ(status(head({{"host", "x"}, {"content-length", "0"}}, "POST", 10)), 0);
}

TEST(HttpFraming, TransferEncodingNotEndingInChunkedIs400) {
  // RFC 9112 §6.3 item 4: the length cannot be determined; the body's bytes
  // would otherwise be read as the next request.
  for (const char* te : {"gzip", "chunked, gzip", "identity", "x"}) {
    const FramingVerdict v = check_request_head(head({{"host", "x"}, {"transfer-encoding", te}}));
    EXPECT_EQ(v.status, 400) << te;
    EXPECT_NE(v.message.find("final coding must be chunked"), std::string::npos) << v.message;
  }
  // Split over two lines, the codings are one list.
  EXPECT_EQ(status(head({{"host", "x"}, {"transfer-encoding", "chunked"}, {"transfer-encoding", "gzip"}})), 400);
  EXPECT_EQ(status(head({{"host", "x"}, {"transfer-encoding", ""}})), 400);
  EXPECT_EQ(status(head({{"host", "x"}, {"transfer-encoding", " , "}})), 400);
}

TEST(HttpFraming, OtherCodingsBeforeChunkedAre501) {
  const FramingVerdict v = check_request_head(head({{"host", "x"}, {"transfer-encoding", "gzip, chunked"}}));
  EXPECT_EQ(v.status, 501);
  EXPECT_NE(v.message.find("'gzip'"), std::string::npos) << v.message;
  EXPECT_EQ(status(head({{"host", "x"}, {"transfer-encoding", "gzip"}, {"transfer-encoding", "chunked"}})), 501);
  EXPECT_EQ(status(head({{"host", "x"}, {"transfer-encoding", "chunked, chunked"}})), 400);
  EXPECT_EQ(status(head({{"host", "x"}, {"transfer-encoding", "gzip, chunked, chunked"}})), 400);
}

TEST(HttpFraming, AmbiguousLengthsAre400) {
  EXPECT_EQ(status(head({{"host", "x"}, {"transfer-encoding", "chunked"}, {"content-length", "3"}})), 400);
  EXPECT_EQ(status(head({{"host", "x"}, {"content-length", "3"}, {"transfer-encoding", "gzip, chunked"}})), 400);
  // HTTP/1.0 knows no Transfer-Encoding: a 1.0 message that has one is faulty (§6.1).
  EXPECT_EQ(status(head({{"transfer-encoding", "chunked"}}, "POST", 10)), 400);
}

TEST(HttpFraming, HostIsRequiredOnceInHttp11) {
  const FramingVerdict v = check_request_head(head({{"content-length", "0"}}));
  EXPECT_EQ(v.status, 400);
  EXPECT_NE(v.message.find("Host"), std::string::npos);
  EXPECT_EQ(status(head({{"host", "a"}, {"host", "b"}, {"content-length", "0"}})), 400);
  EXPECT_EQ(status(head({{"host", "a"}, {"host", "a"}}, "GET", 10)), 400);
  EXPECT_EQ(status(head({{"host", "a b"}}, "GET")), 400);
  EXPECT_EQ(status(head({{"host", "a/b"}}, "GET")), 400);
  EXPECT_EQ(status(head({{"host", "user@a"}}, "GET")), 400);
  EXPECT_EQ(status(head({{"host", ""}}, "GET")), 0);  // allowed when the target has no authority
}

TEST(HttpFraming, VersionsLengthRequiredAndExpect) {
  EXPECT_EQ(status(head({{"host", "x"}}, "GET", 20)), 505);
  EXPECT_EQ(status(head({{"host", "x"}}, "GET", 9)), 505);
  EXPECT_EQ(status(head({{"host", "x"}}, "GET", 12)), 505);
  EXPECT_EQ(refused_version_status("GET / HTTP/2.0\r\nHost: x"), 505);
  EXPECT_EQ(refused_version_status("GET / HTTP/1.2"), 505);
  EXPECT_EQ(refused_version_status("GET / HTTP/1.x\r\n"), 400);
  EXPECT_EQ(refused_version_status("GET / FTP/1.0\r\n"), 400);
  EXPECT_EQ(refused_version_status("GARBAGE"), 400);
  EXPECT_EQ(status(head({{"host", "x"}})), 411);           // POST with no framing at all
  EXPECT_EQ(status(head({{"host", "x"}}, "PUT")), 411);
  EXPECT_EQ(status(head({{"host", "x"}}, "DELETE")), 0);
  const FramingVerdict go = check_request_head(head({{"host", "x"}, {"content-length", "2"}, {"expect", "100-Continue"}}));
  EXPECT_TRUE(go.ok());
  EXPECT_TRUE(go.expects_continue);
  EXPECT_FALSE(check_request_head(head({{"content-length", "2"}, {"expect", "100-continue"}}, "POST", 10))
                   .expects_continue);
  EXPECT_EQ(status(head({{"host", "x"}, {"content-length", "2"}, {"expect", "200-ok"}})), 417);
}

TEST(HttpFraming, TargetForms) {
  auto target = [](const char* t, const char* method = "GET") {
    return check_request_head(head({{"host", "x"}}, method, 11, t));
  };
  EXPECT_EQ(target("/v1/models?x=1").path, "/v1/models");
  EXPECT_EQ(target("/v1/models?x=1").target, "/v1/models?x=1");
  EXPECT_EQ(target("http://example.com:8000/v1/models?a").target, "/v1/models?a");
  EXPECT_EQ(target("HTTP://example.com/health").path, "/health");
  EXPECT_EQ(target("http://example.com").path, "/");
  EXPECT_EQ(target("http://example.com?q").target, "/?q");
  EXPECT_EQ(target("*", "OPTIONS").path, "*");
  EXPECT_EQ(target("*").status, 400);
  EXPECT_EQ(target("example.com:443", "CONNECT").status, 400);
  EXPECT_EQ(target("ftp://x/y").status, 400);
  EXPECT_EQ(target("v1/models").status, 400);
}

TEST(HttpFraming, TransferCodingsList) {
  EXPECT_EQ(transfer_codings({{"transfer-encoding", "gzip;q=1, Chunked"}, {"x", "chunked"}}),
            (std::vector<std::string>{"gzip", "chunked"}));
  EXPECT_EQ(transfer_codings({{"transfer-encoding", "a,,b"}, {"transfer-encoding", "c"}}),
            (std::vector<std::string>{"a", "b", "c"}));
}

TEST(HttpFraming, FramingTheParserReadsOtherwiseIs400) {
  // The rules read the framing headers one way, Beast (which reads the
  // body) another: the body would end where the rules do not expect, and
  // its rest be read as the next request. Refused whenever they differ,
  // whatever line makes them differ.
  RequestHead h = head({{"host", "x"}, {"transfer-encoding", "chunked"}});
  h.parser_chunked = false;
  h.parser_has_length = false;
  const FramingVerdict v = check_request_head(h);
  EXPECT_EQ(v.status, 400);
  EXPECT_NE(v.message.find("cannot be read unambiguously"), std::string::npos) << v.message;
  h.parser_chunked = true;
  EXPECT_EQ(status(h), 0);
  RequestHead sized = head({{"host", "x"}, {"content-length", "5"}});
  sized.parser_chunked = false;
  sized.parser_has_length = false;  // the parser saw no length: it would read no body
  EXPECT_EQ(status(sized), 400);
  sized.parser_has_length = true;
  EXPECT_EQ(status(sized), 0);
  RequestHead get = head({{"host", "x"}}, "GET");
  get.parser_chunked = false;
  get.parser_has_length = false;
  EXPECT_EQ(status(get), 0);
}

}  // namespace
}  // namespace m2::server
