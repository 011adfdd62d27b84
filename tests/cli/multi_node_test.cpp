// `m2cpp ... -tp N --nnodes M` as M processes on loopback, as they run on M
// nodes: node 0 runs the command, the others follow its steps. The logits
// and greedy ids of the split equal the unsharded run's (2e-4:
// tests/model/tensor_parallel_test.cpp says why); mismatched nodes are
// refused on every node; a node killed mid-job ends the job on every other
// node with a message, never a hang.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

#include "io/npy.h"
#include "util/json.h"
#include "util/tcp.h"

namespace m2 {
namespace {

std::string src(const std::string& rel) { return std::string(M2CPP_SOURCE_DIR) + "/" + rel; }

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// A free loopback port (bound, then released for the process to take).
int free_port() {
  Result<TcpListener> l = TcpListener::listen("127.0.0.1", 0);
  EXPECT_TRUE(l.ok());
  return l.ok() ? l->port() : 0;
}

// m2cpp as a child process: `env` (VAR=value ...) before it, stdout and
// stderr to files.
struct Process {
  pid_t pid = -1;
  std::string out_path, err_path;
  int code = -1;  // once finished: the exit status (-2: killed by finish's timeout)
  std::string out() const { return read_file(out_path); }
  std::string err() const { return read_file(err_path); }
};

Process spawn(const std::string& args, const std::string& env = "") {
  static int calls = 0;
  Process p;
  const std::string base = ::testing::TempDir() + "m2cpp_node_" + std::to_string(getpid()) + "_" + std::to_string(calls++);
  p.out_path = base + ".out", p.err_path = base + ".err";
  const std::string cmd = "exec env " + env + " " + M2CPP_BINARY + " " + args + " >" + p.out_path + " 2>" + p.err_path;
  p.pid = fork();
  if (p.pid == 0) {
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return p;
}

// Waits up to timeout_s for p to end (then kills it: code -2).
void finish(Process& p, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  int status = 0;
  for (;;) {
    if (waitpid(p.pid, &status, WNOHANG) == p.pid) {
      p.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      return;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      kill(p.pid, SIGKILL);
      waitpid(p.pid, &status, 0);
      p.code = -2;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// Whether p's stderr says `text` within timeout_s.
bool wait_for_log(const Process& p, const std::string& text, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    if (p.err().find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

std::string ids(const char* key) {
  auto j = read_json_file(src("tests/data/reference/m2-tiny-bf16/prompt.json"));
  std::string s;
  for (int id : (*j)[key]) {
    if (!s.empty()) s += ',';
    s += std::to_string(id);
  }
  return s;
}

std::string nodes(int nnodes, int rank, int port) {
  return " --nnodes " + std::to_string(nnodes) + " --node-rank " + std::to_string(rank) + " --master-port " +
         std::to_string(port) + " --dist-timeout 60";
}

TEST(MultiNode, TwoProcessesOnLoopbackGiveTheUnshardedLogitsAndIds) {
  const std::string logits = "logits -m " + src("tests/data/m2-tiny-bf16") + " --ids " + ids("prompt_ids");
  const std::string one = ::testing::TempDir() + "m2cpp_nodes_tp1.npy", split = ::testing::TempDir() + "m2cpp_nodes_tp.npy";
  Process ref = spawn(logits + " --out " + one);
  finish(ref, 120);
  ASSERT_EQ(ref.code, 0) << ref.err();
  // tp 2 over 2 nodes (a rank each), then tp 4 (two each), node 1 started first.
  for (int tp : {2, 4}) {
    const int port = free_port();
    const std::string flags = " -tp " + std::to_string(tp);
    Process n1 = spawn(logits + " --out /dev/null" + flags + nodes(2, 1, port));
    Process n0 = spawn(logits + " --out " + split + flags + nodes(2, 0, port));
    finish(n0, 120), finish(n1, 30);
    ASSERT_EQ(n0.code, 0) << n0.err();
    ASSERT_EQ(n1.code, 0) << n1.err();
    EXPECT_NE(n1.err().find("node 1: node 0 ended the job"), std::string::npos) << n1.err();
    auto want = read_npy(one), got = read_npy(split);
    ASSERT_TRUE(want.ok() && got.ok());
    ASSERT_EQ(got->shape, want->shape);
    for (size_t i = 0; i < want->values.size(); ++i) ASSERT_NEAR(got->values[i], want->values[i], 2e-4) << "tp " << tp;
  }
  // Greedy ids, node 1 placed by LeaderWorkerSet's variables instead of flags.
  const std::string gen =
      "generate -m " + src("tests/data/m2-tiny-bf16") + " --ids " + ids("greedy_prompt_ids") + " --max-tokens 12 --ignore-eos --json";
  Process a = spawn(gen);
  finish(a, 120);
  ASSERT_EQ(a.code, 0) << a.err();
  const int port = free_port();
  Process n1 = spawn(gen + " -tp 2 --enable-expert-parallel --master-port " + std::to_string(port),
                     "LWS_GROUP_SIZE=2 LWS_WORKER_INDEX=1 LWS_LEADER_ADDRESS=127.0.0.1");
  Process n0 = spawn(gen + " -tp 2 --enable-expert-parallel" + nodes(2, 0, port));
  finish(n0, 120), finish(n1, 30);
  ASSERT_EQ(n0.code, 0) << n0.err();
  ASSERT_EQ(n1.code, 0) << n1.err();
  EXPECT_EQ(n0.out(), a.out());
  EXPECT_EQ(n1.out(), "");  // node 1 prints nothing of node 0's command
}

TEST(MultiNode, MismatchedNodesAreRefusedOnBothWithTheValues) {
  const std::string gen = "generate -m " + src("tests/data/m2-tiny-bf16") + " --ids 1,2,3 -tp 2";
  const int port = free_port();
  Process n1 = spawn(gen + " --num-layers 2" + nodes(2, 1, port));
  Process n0 = spawn(gen + nodes(2, 0, port));
  finish(n0, 60), finish(n1, 60);
  EXPECT_EQ(n0.code, 1) << n0.err();
  EXPECT_EQ(n1.code, 1) << n1.err();
  EXPECT_NE(n0.err().find("node 1 loads another model than node 0: [2 layers"), std::string::npos) << n0.err();
  EXPECT_NE(n1.err().find("node 0 refused the group: node 1 loads another model"), std::string::npos) << n1.err();
  Process bad = spawn(gen + " --master-port " + std::to_string(free_port()), "LWS_GROUP_SIZE=2 LWS_WORKER_INDEX=x");
  finish(bad, 30);
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err().find("LWS_WORKER_INDEX=x: not a non-negative integer"), std::string::npos) << bad.err();
}

// A serving job: killing node 1 ends node 0 (its graceful shutdown, exit 1,
// naming the node), and killing node 0 ends node 1.
TEST(MultiNode, AKilledNodeEndsTheJobOnEveryOtherNode) {
  for (int killed : {1, 0}) {
    const int port = free_port();
    const std::string serve = "serve -m " + src("tests/data/m2-tiny-chat") + " -tp 2 --port 0 --kv-cache-memory 8388608";
    Process n1 = spawn(serve + nodes(2, 1, port));
    Process n0 = spawn(serve + nodes(2, 0, port));
    ASSERT_TRUE(wait_for_log(n0, "m2cpp serve: ready", 60)) << n0.err() << "\n" << n1.err();
    EXPECT_EQ(n1.err().find("listening on"), std::string::npos) << "node 1 serves no HTTP:\n" << n1.err();
    Process& victim = killed == 1 ? n1 : n0;
    Process& other = killed == 1 ? n0 : n1;
    kill(victim.pid, SIGKILL);
    finish(victim, 10);
    finish(other, 30);
    EXPECT_EQ(other.code, 1) << other.err();
    EXPECT_NE(other.err().find(killed == 1 ? "node 1 of 2 lost" : "node 0 lost"), std::string::npos) << other.err();
  }
}

}  // namespace
}  // namespace m2
