// What RFC 9112 asks of a request's head before its body may be read: the
// checks that keep a connection's byte stream and the server's idea of where
// each request ends the same (no request smuggling), and the answer to give
// when they fail. Pure functions over the parsed head, so every rule is
// tested without a socket; http_server.cpp applies them.
//
//   HTTP version other than 1.0 and 1.1                  505, close
//   HTTP/1.1 without Host, or more than one Host         400, close (§3.2)
//   Transfer-Encoding in an HTTP/1.0 request             400, close (§6.1)
//   Transfer-Encoding and Content-Length together        400, close (§6.3 item 3)
//   Transfer-Encoding whose final coding is not chunked  400, close (§6.3 item 4)
//   chunked applied more than once                       400, close (§6.1)
//   a coding other than chunked (gzip, chunked)          501, close (§6.1)
//   POST without Content-Length or Transfer-Encoding     411, close
//   Expect other than 100-continue                       417, close (RFC 9110 §10.1.1)
//   a target that is neither a path nor absolute-form    400, close (§3.2)
//   framing the body's parser reads otherwise          400, close
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace m2::server {

struct RequestHead {
  int version = 11;         // 10 * major + minor, as Beast reports it
  std::string method;
  std::string target;       // as sent
  // Every header line in order, names lowercased; repeated names repeat.
  std::vector<std::pair<std::string, std::string>> headers;
  // How the parser that reads the body frames it: its own reading of
  // Transfer-Encoding and Content-Length. Unset where no parser is involved
  // (tests of the rules alone). Where the rules and the parser read the
  // framing differently, the body would end where the rules do not expect
  // and its rest be taken for the next request: 400, whatever the cause.
  std::optional<bool> parser_chunked;
  std::optional<bool> parser_has_length;
};

struct FramingVerdict {
  int status = 0;               // 0: the head is acceptable
  std::string message;          // why not, for the response body
  std::string path;             // accepted: the target's path (absolute-form reduced to it), query excluded
  std::string target;           // accepted: origin-form target (path and query)
  bool expects_continue = false;  // "Expect: 100-continue": send 100 before reading the body
  bool ok() const { return status == 0; }
};

FramingVerdict check_request_head(const RequestHead& head);

// The parser refuses any version but 1.0 and 1.1 at the request line. The
// answer to that line (the bytes before its CRLF): 505 when it names a
// well-formed version ("HTTP/2.0", "HTTP/1.2"), else 400 (not HTTP at all).
int refused_version_status(std::string_view request_line);

// The codings of Transfer-Encoding header lines, in order, lowercased, with
// their parameters dropped ("gzip;q=1, Chunked" -> {"gzip", "chunked"}).
// An empty element ("chunked,,") is skipped, as RFC 9110 §5.6.1 allows.
std::vector<std::string> transfer_codings(const std::vector<std::pair<std::string, std::string>>& headers);

}  // namespace m2::server
