// Blocking TCP sockets with deadlines, for the links between the nodes of a
// multi-node model (model/node_group.h). Every wait takes a timeout in
// seconds (< 0: none) and every failure is a Status naming the peer
// ("127.0.0.1:29500: connection refused"), never an exception or a signal
// (writes use MSG_NOSIGNAL: a closed peer is an error, not SIGPIPE).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "util/status.h"

namespace m2 {

class TcpSocket {
 public:
  TcpSocket() = default;
  TcpSocket(int fd, std::string peer) : fd_(fd), peer_(std::move(peer)) {}
  TcpSocket(TcpSocket&& o) noexcept;
  TcpSocket& operator=(TcpSocket&& o) noexcept;
  TcpSocket(const TcpSocket&) = delete;
  TcpSocket& operator=(const TcpSocket&) = delete;
  ~TcpSocket();

  bool is_open() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  const std::string& peer() const { return peer_; }  // "host:port"

  // Writes all of data[0, bytes).
  Status send_all(const void* data, size_t bytes);
  // Reads exactly `bytes` into data within `timeout_s` (< 0: no limit). A
  // peer that closes its end is an error "...: connection closed".
  Status recv_all(void* data, size_t bytes, double timeout_s);
  // Whether the peer has closed its end (or the link has failed) while no
  // data is expected: a readable socket at rest is an end-of-file.
  bool closed_at_rest() const;
  void close();

 private:
  int fd_ = -1;
  std::string peer_;
};

class TcpListener {
 public:
  TcpListener() = default;
  TcpListener(TcpListener&& o) noexcept;
  TcpListener& operator=(TcpListener&& o) noexcept;
  TcpListener(const TcpListener&) = delete;
  TcpListener& operator=(const TcpListener&) = delete;
  ~TcpListener();

  // Listens on host:port (port 0: one the system picks, port() tells).
  static Result<TcpListener> listen(const std::string& host, int port);
  int port() const { return port_; }
  // The next connection within `timeout_s` (< 0: no limit).
  Result<TcpSocket> accept(double timeout_s);

 private:
  int fd_ = -1;
  int port_ = 0;
  std::string where_;
};

// Connects to host:port, retrying a refused or unreachable address until
// `timeout_s` has passed (the listener may not be up yet).
Result<TcpSocket> tcp_connect(const std::string& host, int port, double timeout_s);

}  // namespace m2
