#include "server/http_framing.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

namespace m2::server {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

size_t count(const RequestHead& head, std::string_view name) {
  return static_cast<size_t>(std::count_if(head.headers.begin(), head.headers.end(),
                                           [&](const auto& h) { return h.first == name; }));
}

const std::string* first(const RequestHead& head, std::string_view name) {
  for (const auto& [k, v] : head.headers)
    if (k == name) return &v;
  return nullptr;
}

// RFC 3986 reg-name / IP-literal / IPv4 and an optional port: letters,
// digits, unreserved and sub-delims, ':', '[', ']', '%'. No whitespace, '/',
// '@', '?', '#' or controls.
bool valid_host(std::string_view host) {
  return std::all_of(host.begin(), host.end(), [](unsigned char c) {
    return std::isalnum(c) || std::string_view("-._~!$&'()*+,;=:[]%").find(static_cast<char>(c)) != std::string_view::npos;
  });
}

FramingVerdict refuse(int status, std::string message) {
  FramingVerdict v;
  v.status = status;
  v.message = std::move(message);
  return v;
}

}  // namespace

std::vector<std::string> transfer_codings(const std::vector<std::pair<std::string, std::string>>& headers) {
  std::vector<std::string> out;
  for (const auto& [name, value] : headers) {
    if (name != "transfer-encoding") continue;
    std::string_view rest = value;
    while (true) {
      const size_t comma = rest.find(',');
      std::string_view item = trim(rest.substr(0, comma));
      item = trim(item.substr(0, item.find(';')));  // transfer-parameters are not used
      if (!item.empty()) out.push_back(lower(item));
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  return out;
}

int refused_version_status(std::string_view line) {
  line = line.substr(0, line.find_first_of("\r\n"));
  const size_t space = line.rfind(' ');
  if (space == std::string_view::npos) return 400;
  const std::string_view v = line.substr(space + 1);
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  return v.size() == 8 && v.substr(0, 5) == "HTTP/" && digit(v[5]) && v[6] == '.' && digit(v[7]) ? 505 : 400;
}

FramingVerdict check_request_head(const RequestHead& head) {
  if (head.version != 10 && head.version != 11)
    return refuse(505, fmt::format("HTTP/{}.{} is not supported (HTTP/1.0 and HTTP/1.1 are)", head.version / 10,
                                   head.version % 10));
  const size_t hosts = count(head, "host");
  if (hosts > 1) return refuse(400, fmt::format("the request has {} Host headers (one is allowed)", hosts));
  if (hosts == 0 && head.version >= 11) return refuse(400, "an HTTP/1.1 request needs a Host header");
  if (hosts == 1 && !valid_host(*first(head, "host")))
    return refuse(400, "the Host header is not a valid host[:port]");

  if (count(head, "transfer-encoding") > 0) {
    if (head.version < 11) return refuse(400, "Transfer-Encoding is not allowed in an HTTP/1.0 request");
    if (count(head, "content-length") > 0)
      return refuse(400, "the request has both Transfer-Encoding and Content-Length (its length is ambiguous)");
    const std::vector<std::string> codings = transfer_codings(head.headers);
    if (codings.empty()) return refuse(400, "Transfer-Encoding names no coding");
    if (codings.back() != "chunked")
      return refuse(400, fmt::format("Transfer-Encoding's final coding must be chunked, got '{}' (the body's length "
                                     "cannot be determined)",
                                     codings.back()));
    if (std::find(codings.begin(), codings.end() - 1, "chunked") != codings.end() - 1)
      return refuse(400, "Transfer-Encoding applies chunked more than once");
    if (codings.size() > 1)
      return refuse(501, fmt::format("transfer coding '{}' is not implemented (chunked only)", codings.front()));
  } else if ((head.method == "POST" || head.method == "PUT" || head.method == "PATCH") &&
             count(head, "content-length") == 0) {
    return refuse(411, fmt::format("a {} request needs a Content-Length (or Transfer-Encoding: chunked)", head.method));
  }

  FramingVerdict v;
  if (const std::string* expect = first(head, "expect")) {
    if (lower(trim(*expect)) != "100-continue")
      return refuse(417, fmt::format("Expect: '{}' cannot be met (100-continue only)", *expect));
    v.expects_continue = head.version >= 11;  // an HTTP/1.0 client does not wait for it
  }

  // origin-form "/path?query", absolute-form "http://authority/path?query",
  // asterisk-form "*" (OPTIONS only); authority-form is CONNECT's, not served.
  std::string_view target = head.target;
  if (!target.empty() && target.front() != '/' && target != "*") {
    const std::string scheme = lower(target.substr(0, target.find("://")));
    if (target.find("://") == std::string_view::npos || (scheme != "http" && scheme != "https"))
      return refuse(400, "the request target must be a path (/...) or an absolute http URI");
    target.remove_prefix(scheme.size() + 3);
    const size_t slash = target.find_first_of("/?");
    target = slash == std::string_view::npos ? std::string_view() : target.substr(slash);
    v.target = target.empty() || target.front() == '?' ? "/" + std::string(target) : std::string(target);
  } else if (target == "*" && head.method != "OPTIONS") {
    return refuse(400, "the request target '*' is for OPTIONS only");
  } else if (target.empty()) {
    return refuse(400, "the request has no target");
  } else {
    v.target = std::string(target);
  }
  v.path = v.target.substr(0, v.target.find('?'));

  // Accepted so far: chunked if it has a Transfer-Encoding (its only coding),
  // else sized by a Content-Length if it has one. The parser must agree, or
  // it would end the body elsewhere and read the rest as the next request.
  const bool chunked = count(head, "transfer-encoding") > 0;
  const bool has_length = !chunked && count(head, "content-length") > 0;
  if ((head.parser_chunked && *head.parser_chunked != chunked) ||
      (head.parser_has_length && *head.parser_has_length != has_length))
    return refuse(400, "the request's Transfer-Encoding or Content-Length line cannot be read unambiguously (folded "
                       "or malformed)");
  return v;
}

}  // namespace m2::server
