#include "util/tcp.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

namespace m2 {
namespace {

using Clock = std::chrono::steady_clock;

// Milliseconds left before `deadline` for poll() (-1: no deadline).
int poll_ms(bool limited, Clock::time_point deadline) {
  if (!limited) return -1;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
}

Clock::time_point deadline_after(double timeout_s) {
  return Clock::now() + std::chrono::microseconds(static_cast<int64_t>(std::max(0.0, timeout_s) * 1e6));
}

std::string errno_text() { return std::strerror(errno); }

void set_link_options(int fd) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));  // collectives are small messages
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));  // a vanished host ends the link
}

// host:port resolved to IPv4/IPv6 addresses.
Result<addrinfo*> resolve(const std::string& host, int port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res); rc != 0)
    return errorf("{}:{}: cannot resolve the address: {}", host, port, gai_strerror(rc));
  return res;
}

}  // namespace

TcpSocket::TcpSocket(TcpSocket&& o) noexcept : fd_(o.fd_), peer_(std::move(o.peer_)) { o.fd_ = -1; }

TcpSocket& TcpSocket::operator=(TcpSocket&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.fd_, peer_ = std::move(o.peer_);
    o.fd_ = -1;
  }
  return *this;
}

TcpSocket::~TcpSocket() { close(); }

void TcpSocket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Status TcpSocket::send_all(const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::send(fd_, p, bytes, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errorf("{}: send failed: {}", peer_, errno_text());
    }
    p += n, bytes -= static_cast<size_t>(n);
  }
  return Status();
}

Status TcpSocket::recv_all(void* data, size_t bytes, double timeout_s) {
  const bool limited = timeout_s >= 0;
  const Clock::time_point deadline = deadline_after(timeout_s);
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    pollfd pfd{fd_, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, poll_ms(limited, deadline));
    if (ready < 0) {
      if (errno == EINTR) continue;
      return errorf("{}: poll failed: {}", peer_, errno_text());
    }
    if (ready == 0) return errorf("{}: no message within {} s", peer_, timeout_s);
    const ssize_t n = ::recv(fd_, p, bytes, 0);
    if (n == 0) return errorf("{}: connection closed", peer_);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return errorf("{}: receive failed: {}", peer_, errno_text());
    }
    p += n, bytes -= static_cast<size_t>(n);
  }
  return Status();
}

bool TcpSocket::closed_at_rest() const {
  if (fd_ < 0) return true;
  pollfd pfd{fd_, POLLIN, 0};
  return ::poll(&pfd, 1, 0) != 0;  // readable, hung up or failed: nothing is due at rest
}

TcpListener::TcpListener(TcpListener&& o) noexcept : fd_(o.fd_), port_(o.port_), where_(std::move(o.where_)) {
  o.fd_ = -1;
}

TcpListener& TcpListener::operator=(TcpListener&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_, port_ = o.port_, where_ = std::move(o.where_);
    o.fd_ = -1;
  }
  return *this;
}

TcpListener::~TcpListener() {
  if (fd_ >= 0) ::close(fd_);
}

Result<TcpListener> TcpListener::listen(const std::string& host, int port) {
  M2_ASSIGN_OR_RETURN(addrinfo * res, resolve(host, port, true));
  std::string last = "no address";
  TcpListener l;
  for (addrinfo* a = res; a; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last = errno_text();
      continue;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 64) != 0) {
      last = errno_text();
      ::close(fd);
      continue;
    }
    sockaddr_storage bound{};
    socklen_t len = sizeof(bound);
    getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
    l.fd_ = fd;
    l.port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                                : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    break;
  }
  freeaddrinfo(res);
  if (l.fd_ < 0) return errorf("{}:{}: cannot listen: {}", host, port, last);
  l.where_ = fmt::format("{}:{}", host, l.port_);
  return l;
}

Result<TcpSocket> TcpListener::accept(double timeout_s) {
  const bool limited = timeout_s >= 0;
  const Clock::time_point deadline = deadline_after(timeout_s);
  for (;;) {
    pollfd pfd{fd_, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, poll_ms(limited, deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return errorf("{}: poll failed: {}", where_, errno_text());
    if (ready == 0) return errorf("{}: no connection within {} s", where_, timeout_s);
    sockaddr_storage from{};
    socklen_t len = sizeof(from);
    const int fd = ::accept4(fd_, reinterpret_cast<sockaddr*>(&from), &len, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return errorf("{}: accept failed: {}", where_, errno_text());
    }
    set_link_options(fd);
    char host[NI_MAXHOST] = "?", serv[NI_MAXSERV] = "?";
    getnameinfo(reinterpret_cast<sockaddr*>(&from), len, host, sizeof(host), serv, sizeof(serv),
                NI_NUMERICHOST | NI_NUMERICSERV);
    return TcpSocket(fd, fmt::format("{}:{}", host, serv));
  }
}

Result<TcpSocket> tcp_connect(const std::string& host, int port, double timeout_s) {
  const Clock::time_point deadline = deadline_after(timeout_s);
  const std::string where = fmt::format("{}:{}", host, port);
  std::string last;
  for (;;) {
    M2_ASSIGN_OR_RETURN(addrinfo * res, resolve(host, port, false));
    for (addrinfo* a = res; a; a = a->ai_next) {
      const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) {
        last = errno_text();
        continue;
      }
      if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
        freeaddrinfo(res);
        set_link_options(fd);
        return TcpSocket(fd, where);
      }
      last = errno_text();
      ::close(fd);
    }
    freeaddrinfo(res);
    if (Clock::now() >= deadline) return errorf("{}: cannot connect within {} s: {}", where, timeout_s, last);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the listener is not up yet
  }
}

}  // namespace m2
