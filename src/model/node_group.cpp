#include "model/node_group.h"

#include <chrono>
#include <cstring>

#include "util/json.h"
#include "util/log.h"

namespace m2 {
namespace {

enum class Msg : uint32_t {
  kHello = 1,  // node r -> 0: its NodeIdentity and rank (JSON)
  kWelcome,    // 0 -> r: every node has joined
  kRefused,    // 0 -> r: the rendezvous failed (why)
  kCall,       // 0 -> r: a call to run
  kStatus,     // r -> 0: the call's status (StatusCode, message)
  kCollective, // r -> 0: CollectiveHeader + this node's contribution
  kResult,     // 0 -> r: the combined result
  kAbort,      // 0 -> r: the job failed (why)
  kShutdown,   // 0 -> r: the job ended
};

const char* msg_name(Msg m) {
  switch (m) {
    case Msg::kHello: return "hello";
    case Msg::kWelcome: return "welcome";
    case Msg::kRefused: return "refused";
    case Msg::kCall: return "call";
    case Msg::kStatus: return "status";
    case Msg::kCollective: return "collective";
    case Msg::kResult: return "result";
    case Msg::kAbort: return "abort";
    case Msg::kShutdown: return "shutdown";
  }
  return "unknown";
}

enum StatusCode : uint8_t { kOk = 0, kFailed = 1, kStoppedByPeer = 2 };

struct FrameHeader {
  uint32_t type = 0;
  uint32_t magic = 0x4d324e44;  // "M2ND": a stray connection is refused, not parsed
  uint64_t bytes = 0;
};
constexpr uint64_t kMaxFrame = uint64_t{1} << 36;  // 64 GiB: a corrupt length is refused, not allocated

struct Frame {
  Msg type{};
  std::vector<uint8_t> payload;
  std::string text() const { return std::string(payload.begin(), payload.end()); }
};

Status send_frame(TcpSocket& s, Msg type, std::span<const uint8_t> a, std::span<const uint8_t> b = {}) {
  FrameHeader h;
  h.type = static_cast<uint32_t>(type);
  h.bytes = a.size() + b.size();
  M2_RETURN_IF_ERROR(s.send_all(&h, sizeof(h)));
  if (!a.empty()) M2_RETURN_IF_ERROR(s.send_all(a.data(), a.size()));
  if (!b.empty()) M2_RETURN_IF_ERROR(s.send_all(b.data(), b.size()));
  return Status();
}

Status send_text(TcpSocket& s, Msg type, const std::string& text) {
  return send_frame(s, type, {reinterpret_cast<const uint8_t*>(text.data()), text.size()});
}

Result<Frame> recv_frame(TcpSocket& s, double timeout_s) {
  FrameHeader h;
  M2_RETURN_IF_ERROR(s.recv_all(&h, sizeof(h), timeout_s));
  if (h.magic != FrameHeader{}.magic || h.bytes > kMaxFrame)
    return errorf("{}: not an m2cpp node message (magic {:#x}, {} bytes)", s.peer(), h.magic, h.bytes);
  Frame f;
  f.type = static_cast<Msg>(h.type);
  f.payload.resize(h.bytes);
  // (the header came: the body follows at once, within the same limit)
  M2_RETURN_IF_ERROR(s.recv_all(f.payload.data(), f.payload.size(), timeout_s < 0 ? -1 : timeout_s));
  return f;
}

Json identity_json(const NodeIdentity& id, const NodeConfig& c) {
  return Json{{"protocol", id.protocol},       {"version", id.version},
              {"nnodes", c.nnodes},            {"node_rank", c.node_rank},
              {"tensor_parallel_size", id.tensor_parallel_size}, {"expert_parallel", id.expert_parallel},
              {"model", id.model}};
}

// Why node `theirs` may not join node 0's group (empty: it may).
std::string mismatch(const Json& theirs, const NodeIdentity& mine, const NodeConfig& c) {
  const int r = theirs.value("node_rank", -1);
  const std::string who = fmt::format("node {}", r);
  if (theirs.value("protocol", -1) != mine.protocol || theirs.value("version", "") != mine.version)
    return fmt::format("{} runs m2cpp {} (node protocol {}) and node 0 m2cpp {} (protocol {}): run the same m2cpp "
                       "on every node",
                       who, theirs.value("version", "?"), theirs.value("protocol", -1), mine.version, mine.protocol);
  if (theirs.value("nnodes", -1) != c.nnodes)
    return fmt::format("{} was started with --nnodes {} and node 0 with --nnodes {}", who, theirs.value("nnodes", -1),
                       c.nnodes);
  if (r < 1 || r >= c.nnodes)
    return fmt::format("--node-rank {} is outside 1..{} (--nnodes {}; node 0 is this one)", r, c.nnodes - 1, c.nnodes);
  if (theirs.value("tensor_parallel_size", -1) != mine.tensor_parallel_size)
    return fmt::format("{} was started with --tensor-parallel-size {} and node 0 with {}", who,
                       theirs.value("tensor_parallel_size", -1), mine.tensor_parallel_size);
  if (theirs.value("expert_parallel", false) != mine.expert_parallel)
    return fmt::format("{} was started {} --enable-expert-parallel and node 0 {}", who,
                       theirs.value("expert_parallel", false) ? "with" : "without", mine.expert_parallel ? "with" : "without");
  if (theirs.value("model", "") != mine.model)
    return fmt::format("{} loads another model than node 0: [{}] vs [{}]", who, theirs.value("model", ""), mine.model);
  return "";
}

std::span<const uint8_t> bytes_of(const void* p, size_t n) { return {static_cast<const uint8_t*>(p), n}; }

}  // namespace

struct NodeGroup::Link {
  TcpSocket socket;
  int node = 0;
  // The current call (node 0's view of node `node`):
  bool replied = false;  // its status has come
  bool aborted = false;  // it was told to stop
  Status status;
  bool stopped_by_peer = false;
  bool lost = false;  // the link failed: nothing more is read or sent
};

void NodeGroup::take_status(Link& l, std::span<const uint8_t> payload) {
  l.replied = true;
  l.stopped_by_peer = payload[0] == kStoppedByPeer;
  l.status = payload[0] == kOk ? Status()
                               : errorf("node {}: {}", l.node, std::string(payload.begin() + 1, payload.end()));
}

NodeGroup::~NodeGroup() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_watch_ = true;
  }
  cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
  shutdown();
}

Result<std::unique_ptr<NodeGroup>> NodeGroup::rendezvous(const NodeConfig& config, const NodeIdentity& mine) {
  if (config.nnodes < 2) return errorf("--nnodes {}: a node group has at least 2 nodes", config.nnodes);
  if (config.node_rank < 0 || config.node_rank >= config.nnodes)
    return errorf("--node-rank {} is outside 0..{} (--nnodes {})", config.node_rank, config.nnodes - 1, config.nnodes);
  if (config.node_rank == 0) {
    Result<TcpListener> l = TcpListener::listen(config.master_addr, config.master_port);
    if (!l.ok()) return errorf("node 0 (--master-addr/--master-port): {}", l.status().message());
    return lead(std::move(*l), config, mine);
  }
  std::unique_ptr<NodeGroup> g(new NodeGroup());
  g->config_ = config;
  log_info("node {} of {}: joining node 0 at {}:{}", config.node_rank, config.nnodes, config.master_addr,
           config.master_port);
  Result<TcpSocket> s = tcp_connect(config.master_addr, config.master_port, config.timeout_s);
  if (!s.ok()) return errorf("node {}: node 0 not reached: {}", config.node_rank, s.status().message());
  auto link = std::make_unique<Link>();
  link->socket = std::move(*s);
  M2_RETURN_IF_ERROR(send_text(link->socket, Msg::kHello, identity_json(mine, config).dump()));
  // Node 0 welcomes everyone once the last node has joined (within its own
  // timeout, after which it refuses those waiting): wait longer than that.
  Result<Frame> f = recv_frame(link->socket, 2 * config.timeout_s + 10);
  if (!f.ok()) return errorf("node {}: no answer from node 0: {}", config.node_rank, f.status().message());
  if (f->type == Msg::kRefused) return errorf("node {}: node 0 refused the group: {}", config.node_rank, f->text());
  if (f->type != Msg::kWelcome)
    return errorf("node {}: node 0 answered '{}' to its hello", config.node_rank, msg_name(f->type));
  g->links_.push_back(std::move(link));
  log_info("node {} of {}: joined", config.node_rank, config.nnodes);
  return g;
}

Result<std::unique_ptr<NodeGroup>> NodeGroup::lead(TcpListener listener, const NodeConfig& config,
                                                   const NodeIdentity& mine) {
  std::unique_ptr<NodeGroup> g(new NodeGroup());
  g->config_ = config;
  g->config_.node_rank = 0;
  log_info("node 0 of {}: waiting for {} node(s) on {}:{} (--dist-timeout {} s)", config.nnodes, config.nnodes - 1,
           config.master_addr, listener.port(), config.timeout_s);
  std::vector<std::unique_ptr<Link>> joined(config.nnodes);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(config.timeout_s);
  auto left_s = [&] {
    return std::max(0.0, std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count());
  };
  // Refuses the group: every node that joined is told why.
  auto refuse = [&](const std::string& why) -> Status {
    for (auto& l : joined)
      if (l) (void)send_text(l->socket, Msg::kRefused, why);
    return errorf("node 0: {}", why);
  };
  for (int missing = config.nnodes - 1; missing > 0;) {
    Result<TcpSocket> s = listener.accept(left_s());
    if (!s.ok()) {
      std::string which;
      for (int r = 1; r < config.nnodes; ++r)
        if (!joined[r]) which += (which.empty() ? "" : ", ") + std::to_string(r);
      return refuse(fmt::format("node(s) {} of {} did not join within {} s (--dist-timeout) at {}:{}", which,
                                config.nnodes, config.timeout_s, config.master_addr, listener.port()));
    }
    auto link = std::make_unique<Link>();
    link->socket = std::move(*s);
    Result<Frame> f = recv_frame(link->socket, std::min(left_s(), 30.0));
    if (!f.ok() || f->type != Msg::kHello) {  // not a node: a port scan, or another program
      log_warn("node 0: ignoring a connection from {}: {}", link->socket.peer(),
               f.ok() ? fmt::format("sent '{}', not a hello", msg_name(f->type)) : f.status().message());
      continue;
    }
    Result<Json> hello = parse_json(f->text(), "a node's hello");
    if (!hello.ok()) return refuse(fmt::format("{}: {}", link->socket.peer(), hello.status().message()));
    std::string why;
    try {
      why = mismatch(*hello, mine, config);
    } catch (const nlohmann::json::exception& e) {
      why = fmt::format("{}: a malformed hello: {}", link->socket.peer(), json_error_text(e));
    }
    if (!why.empty()) {
      (void)send_text(link->socket, Msg::kRefused, why);
      return refuse(why);
    }
    const int r = (*hello)["node_rank"].get<int>();
    if (joined[r]) {
      const std::string why = fmt::format("two nodes were started with --node-rank {} ({} and {})", r,
                                          joined[r]->socket.peer(), link->socket.peer());
      (void)send_text(link->socket, Msg::kRefused, why);
      return refuse(why);
    }
    link->node = r;
    log_info("node 0: node {} joined from {}", r, link->socket.peer());
    joined[r] = std::move(link);
    --missing;
  }
  for (int r = 1; r < config.nnodes; ++r) {
    M2_RETURN_IF_ERROR(send_frame(joined[r]->socket, Msg::kWelcome, {}));
    g->links_.push_back(std::move(joined[r]));
  }
  log_info("node 0: all {} nodes joined", config.nnodes);
  return g;
}

Status NodeGroup::lost(int node, const Status& why) {
  return errorf("node {} of {} lost: {}", node, config_.nnodes, why.message());
}

void NodeGroup::abort_others(const std::string& why) {
  for (auto& l : links_)
    if (!l->lost && !l->replied && !l->aborted) {
      l->aborted = true;
      if (!send_text(l->socket, Msg::kAbort, why).ok()) l->lost = true;
    }
}

Status NodeGroup::fail(Status why, bool from_peer) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_.ok()) broken_ = why, broken_by_peer_ = from_peer;
  }
  if (config_.node_rank == 0) abort_others(why.message());
  for (auto& l : links_)
    if (l->lost) {
      report_lost(why);
      break;
    }
  return why;
}

void NodeGroup::report_lost(const Status& why) {
  std::function<void(const Status&)> f;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (lost_reported_ || !on_lost_) return;
    lost_reported_ = true;
    f = on_lost_;
  }
  f(why);
}

Status NodeGroup::failure() const {
  std::lock_guard<std::mutex> lock(mu_);
  return broken_;
}

void NodeGroup::watch(std::function<void(const Status&)> on_lost) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    on_lost_ = std::move(on_lost);
  }
  if (watcher_.joinable() || config_.node_rank != 0) return;
  watcher_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_watch_) {
      cv_.wait_for(lock, std::chrono::milliseconds(250));
      if (stop_watch_ || shut_down_ || !broken_.ok()) continue;
      if (in_call_) continue;  // the call's own reads see a loss
      Status s = check_alive_locked();
      if (!s.ok()) {
        lock.unlock();
        fail(s, true);
        lock.lock();
      }
    }
  });
}

Status NodeGroup::begin_call(std::span<const uint8_t> call) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!broken_.ok()) return errorf("the node group failed earlier: {}", broken_.message());
    in_call_ = true;
  }
  M2_RETURN_IF_ERROR(check_alive());
  for (auto& l : links_) {
    l->replied = l->aborted = l->stopped_by_peer = false;
    l->status = Status();
    if (Status s = send_frame(l->socket, Msg::kCall, call); !s.ok()) {
      l->lost = true;
      return fail(lost(l->node, s), true);
    }
  }
  return Status();
}

Status NodeGroup::check_alive_locked() {
  for (auto& l : links_)
    if (l->lost || l->socket.closed_at_rest()) {
      l->lost = true;
      return lost(l->node, errorf("{}: connection closed (the process ended or was killed)", l->socket.peer()));
    }
  return Status();
}

Status NodeGroup::check_alive() {
  Status s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    s = check_alive_locked();
  }
  return s.ok() ? s : fail(s, true);
}

Status NodeGroup::end_call(const Status& local) {
  if (!local.ok()) fail(local, false);
  for (auto& l : links_) {
    while (!l->replied && !l->lost) {  // (collectives a stopping node still sends are dropped)
      Result<Frame> f = recv_frame(l->socket, config_.timeout_s);
      if (!f.ok()) {
        l->lost = true;
        fail(lost(l->node, f.status()), true);
      } else if (f->type == Msg::kStatus && !f->payload.empty()) {
        take_status(*l, f->payload);
        if (!l->status.ok()) fail(l->status, true);
      }
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_call_ = false;
  }
  const Status broken = failure();
  if (broken.ok()) return Status();
  // The failure that started it: this node's own, a node's own, then any.
  if (!local.ok() && !broken_by_peer_) return local;
  for (auto& l : links_)
    if (!l->status.ok() && !l->stopped_by_peer) return l->status;
  return broken;
}

void NodeGroup::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_ || config_.node_rank != 0) return;
    shut_down_ = true;
  }
  const Status broken = failure();  // the job failed: the others end with its message
  for (auto& l : links_)
    if (!l->lost)
      (void)(broken.ok() ? send_frame(l->socket, Msg::kShutdown, {}) : send_text(l->socket, Msg::kAbort, broken.message()));
}

Result<std::optional<std::vector<uint8_t>>> NodeGroup::next_call() {
  Link& l = *links_[0];
  Result<Frame> f = recv_frame(l.socket, -1);
  if (!f.ok()) return errorf("node 0 lost: {}", f.status().message());
  switch (f->type) {
    case Msg::kCall: return std::optional<std::vector<uint8_t>>(std::move(f->payload));
    case Msg::kShutdown: return std::optional<std::vector<uint8_t>>();
    case Msg::kAbort: return errorf("node 0 stopped the job: {}", f->text());
    default: return errorf("node 0 sent '{}' where a call was due", msg_name(f->type));
  }
}

Status NodeGroup::reply(const Status& status, bool stopped_by_peer) {
  const uint8_t code = status.ok() ? kOk : stopped_by_peer ? kStoppedByPeer : kFailed;
  const std::string text = status.ok() ? "" : status.message();
  return send_frame(links_[0]->socket, Msg::kStatus, bytes_of(&code, 1), bytes_of(text.data(), text.size()));
}

Result<std::vector<uint8_t>> NodeGroup::exchange(const CollectiveHeader& header, std::span<const uint8_t> mine,
                                                 const Combine& combine) {
  if (Status broken = failure(); !broken.ok()) return broken;
  if (config_.node_rank != 0) {
    Link& l = *links_[0];
    Status sent = send_frame(l.socket, Msg::kCollective, bytes_of(&header, sizeof(header)), mine);
    if (!sent.ok()) return fail(errorf("node 0 lost: {}", sent.message()), true);
    Result<Frame> f = recv_frame(l.socket, config_.timeout_s);
    if (!f.ok()) return fail(errorf("node 0 lost: {}", f.status().message()), true);
    if (f->type == Msg::kResult) return std::move(f->payload);
    if (f->type == Msg::kAbort) return fail(errorf("{}", f->text()), true);
    return fail(errorf("node 0 sent '{}' where a collective's result was due", msg_name(f->type)), false);
  }
  std::vector<std::vector<uint8_t>> theirs(links_.size());
  for (size_t i = 0; i < links_.size(); ++i) {
    Link& l = *links_[i];
    Result<Frame> f = recv_frame(l.socket, config_.timeout_s);
    if (!f.ok()) {
      l.lost = true;
      return fail(lost(l.node, f.status()), true);
    }
    if (f->type == Msg::kStatus && !f->payload.empty()) {  // it left the step: its ranks failed
      take_status(l, f->payload);
      return fail(l.status.ok() ? errorf("node {} ended the step before a collective", l.node) : l.status, true);
    }
    CollectiveHeader h;
    if (f->type != Msg::kCollective || f->payload.size() < sizeof(h))
      return fail(errorf("node {} sent '{}' where a collective was due", l.node, msg_name(f->type)), false);
    std::memcpy(&h, f->payload.data(), sizeof(h));
    if (h.op != header.op || h.root != header.root || h.bytes != header.bytes)
      return fail(errorf("node {} called collective {} (root {}, {} bytes) where node 0 called {} (root {}, {} bytes)",
                         l.node, h.op, h.root, h.bytes, header.op, header.root, header.bytes),
                  false);
    theirs[i].assign(f->payload.begin() + sizeof(h), f->payload.end());
  }
  std::vector<std::span<const uint8_t>> per_node{mine};
  for (const auto& t : theirs) per_node.emplace_back(t);
  std::vector<uint8_t> result = combine(per_node);
  for (auto& l : links_)
    if (Status s = send_frame(l->socket, Msg::kResult, result); !s.ok()) {
      l->lost = true;
      return fail(lost(l->node, s), true);
    }
  return result;
}

}  // namespace m2
