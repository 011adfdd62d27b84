// Several nodes of a multi-node model (model/node_group.h), each a thread of
// this test linked to node 0 over loopback TCP, as separate processes are:
// the rendezvous and its refusals, the node communicators against the
// in-process communicator's bits, the sharded forward across nodes against
// the unsharded one (tests/model/tensor_parallel_test.cpp says why 2e-4),
// and failures that must end every node with a message instead of a hang.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <thread>

#include "model/greedy.h"
#include "model/minimax_m2.h"
#include "model/node_group.h"
#include "test_paths.h"

namespace m2 {
namespace {

NodeIdentity identity() {
  NodeIdentity id;
  id.version = "test";
  id.tensor_parallel_size = 4;
  id.model = "a model";
  return id;
}

// nnodes nodes joined on a free loopback port: node r's group, or its error.
// tweak(r, config, identity) changes what node r > 0 says or is started with.
std::vector<Result<std::unique_ptr<NodeGroup>>> join(
    int nnodes, double timeout_s = 20,
    const std::function<void(int, NodeConfig&, NodeIdentity&)>& tweak = {}, int joining = -1) {
  Result<TcpListener> listener = TcpListener::listen("127.0.0.1", 0);
  EXPECT_TRUE(listener.ok()) << listener.status().message();
  NodeConfig base;
  base.nnodes = nnodes, base.master_addr = "127.0.0.1", base.master_port = listener->port(), base.timeout_s = timeout_s;
  std::vector<Result<std::unique_ptr<NodeGroup>>> out;
  for (int r = 0; r < nnodes; ++r) out.emplace_back(errorf("not run"));
  std::vector<std::thread> threads;
  for (int r = 1; r < (joining < 0 ? nnodes : joining + 1); ++r)
    threads.emplace_back([&, r] {
      NodeConfig c = base;
      c.node_rank = r;
      NodeIdentity id = identity();
      if (tweak) tweak(r, c, id);
      out[r] = NodeGroup::rendezvous(c, id);
    });
  out[0] = NodeGroup::lead(std::move(*listener), base, identity());
  for (auto& t : threads) t.join();
  return out;
}

std::string message(const Result<std::unique_ptr<NodeGroup>>& r) { return r.ok() ? "ok" : r.status().message(); }

TEST(NodeGroup, RefusesMismatchedNodesNamingTheValueOnEveryNode) {
  struct Case {
    std::function<void(int, NodeConfig&, NodeIdentity&)> tweak;
    std::string says;
  };
  const Case cases[] = {
      {[](int, NodeConfig&, NodeIdentity& id) { id.version = "0.0.9"; }, "node 1 runs m2cpp 0.0.9"},
      {[](int, NodeConfig&, NodeIdentity& id) { id.protocol = 99; }, "(node protocol 99)"},
      {[](int, NodeConfig&, NodeIdentity& id) { id.tensor_parallel_size = 8; },
       "node 1 was started with --tensor-parallel-size 8 and node 0 with 4"},
      {[](int, NodeConfig&, NodeIdentity& id) { id.expert_parallel = true; }, "started with --enable-expert-parallel"},
      {[](int, NodeConfig&, NodeIdentity& id) { id.model = "another"; }, "node 1 loads another model than node 0"},
      {[](int, NodeConfig& c, NodeIdentity&) { c.nnodes = 3; }, "node 1 was started with --nnodes 3 and node 0 with --nnodes 2"},
  };
  for (const Case& c : cases) {
    auto nodes = join(2, 20, c.tweak);
    ASSERT_FALSE(nodes[0].ok()) << c.says;
    ASSERT_FALSE(nodes[1].ok()) << c.says;
    EXPECT_NE(message(nodes[0]).find(c.says), std::string::npos) << message(nodes[0]);
    EXPECT_NE(message(nodes[1]).find("node 1: node 0 refused the group: "), std::string::npos) << message(nodes[1]);
    EXPECT_NE(message(nodes[1]).find(c.says), std::string::npos) << message(nodes[1]);
  }
  // Two nodes with one rank: both refused, node 0 names the rank.
  auto dup = join(3, 20, [](int, NodeConfig& c, NodeIdentity&) { c.node_rank = 1; });
  EXPECT_NE(message(dup[0]).find("two nodes were started with --node-rank 1"), std::string::npos) << message(dup[0]);
  for (int r = 1; r < 3; ++r) EXPECT_FALSE(dup[r].ok());
}

TEST(NodeGroup, ANodeThatNeverComesEndsTheRendezvousAfterItsTimeout) {
  auto nodes = join(3, 1.0, {}, /*joining=*/1);  // node 2 is never started
  EXPECT_NE(message(nodes[0]).find("node(s) 2 of 3 did not join within 1 s (--dist-timeout)"), std::string::npos)
      << message(nodes[0]);
  EXPECT_NE(message(nodes[1]).find("did not join"), std::string::npos) << message(nodes[1]);
  // And a node whose node 0 never listens.
  Result<TcpListener> l = TcpListener::listen("127.0.0.1", 0);
  ASSERT_TRUE(l.ok());
  NodeConfig c;
  c.nnodes = 2, c.node_rank = 1, c.master_port = l->port(), c.timeout_s = 0.5;
  *l = TcpListener();  // closed: nobody listens there
  auto alone = NodeGroup::rendezvous(c, identity());
  EXPECT_NE(message(alone).find("node 1: node 0 not reached"), std::string::npos) << message(alone);
  EXPECT_NE(message(alone).find("cannot connect within 0.5 s"), std::string::npos) << message(alone);
}

// Every collective over nodes x local ranks equals the in-process
// communicator's result over as many ranks, bit for bit.
TEST(NodeGroup, NodeCommunicatorsGiveTheInProcessCommunicatorsBits) {
  for (auto [nnodes, local] : {std::pair{2, 2}, std::pair{4, 1}, std::pair{2, 3}}) {
    const int G = nnodes * local;
    const int64_t n = 1031;  // not a multiple of any rank count
    std::vector<std::vector<float>> in(G, std::vector<float>(n));
    std::mt19937 rng(G);
    std::uniform_real_distribution<float> u(-1, 1);
    for (int r = 0; r < G; ++r)
      for (int64_t i = 0; i < n; ++i) in[r][i] = u(rng) * std::pow(10.0f, static_cast<float>(r % 5) - 2);
    // What each rank ends with: all_reduce, all_gather, broadcasts from the last and from rank 1.
    auto run = [&](std::vector<std::unique_ptr<Communicator>>& comms, std::vector<std::vector<float>>& out) {
      std::vector<std::thread> threads;
      for (auto& c : comms)
        threads.emplace_back([&, comm = c.get()] {
          const int r = comm->rank();
          std::vector<float> sum = in[r], all(static_cast<size_t>(G * n)), b1 = in[r], b2 = in[r];
          comm->all_reduce_sum(sum.data(), n);
          comm->all_gather(in[r].data(), n, all.data());
          comm->broadcast(b1.data(), b1.size() * sizeof(float), G - 1);
          comm->broadcast(b2.data(), b2.size() * sizeof(float), 1);
          comm->barrier();
          out[r] = sum;
          out[r].insert(out[r].end(), all.begin(), all.end());
          out[r].insert(out[r].end(), b1.begin(), b1.end());
          out[r].insert(out[r].end(), b2.begin(), b2.end());
        });
      for (auto& t : threads) t.join();
    };
    std::vector<std::vector<float>> want(G), got(G);
    auto local_comms = make_local_communicators(G);
    run(local_comms, want);
    auto nodes = join(nnodes);
    std::vector<std::unique_ptr<Communicator>> comms;
    std::vector<std::shared_ptr<NodeGroup>> groups;
    for (auto& g : nodes) {
      ASSERT_TRUE(g.ok()) << g.status().message();
      groups.emplace_back(std::move(*g));
      for (auto& c : make_node_communicators(groups.back(), G)) comms.push_back(std::move(c));
    }
    for (int r = 0; r < G; ++r) ASSERT_EQ(comms[r]->rank(), r);
    run(comms, got);
    for (int r = 0; r < G; ++r) {
      ASSERT_EQ(got[r].size(), want[r].size());
      EXPECT_EQ(std::memcmp(got[r].data(), want[r].data(), want[r].size() * sizeof(float)), 0)
          << nnodes << " nodes of " << local << ", rank " << r;
    }
  }
}

// A node whose ranks fail within a call: node 0's ranks stop with its
// message instead of waiting, and every later call is refused with it; and
// the other way round, node 0 failing stops the other node's ranks.
TEST(NodeGroup, AFailingNodeStopsEveryNodesRanksWithItsMessage) {
  for (int failing : {1, 0}) {
    auto nodes = join(2);
    ASSERT_TRUE(nodes[0].ok() && nodes[1].ok());
    std::shared_ptr<NodeGroup> g0 = std::move(*nodes[0]), g1 = std::move(*nodes[1]);
    auto c0 = make_node_communicators(g0, 2), c1 = make_node_communicators(g1, 2);
    Status node1_ranks, node1_reply;
    std::thread node1([&] {
      auto call = g1->next_call();
      ASSERT_TRUE(call.ok() && *call);
      if (failing == 1) {  // its rank fails before the collective: its status goes instead
        node1_reply = g1->reply(errorf("boom on node 1"), false);
        return;
      }
      float x = 1;
      try {
        c1[0]->all_reduce_sum(&x, 1);
        node1_ranks = Status();
      } catch (const CollectiveAborted& e) {
        node1_ranks = errorf("{}", e.what());
      }
      node1_reply = g1->reply(node1_ranks, true);
    });
    const uint8_t call[] = {1, 2, 3};
    ASSERT_TRUE(g0->begin_call(call).ok());
    Status local;
    if (failing == 1) {
      float x = 1;
      try {
        c0[0]->all_reduce_sum(&x, 1);
        local = errorf("the collective returned");
      } catch (const CollectiveAborted& e) {
        local = errorf("{}", e.what());
      }
    } else {
      local = errorf("boom on node 0");
    }
    const Status s = g0->end_call(local);
    node1.join();
    const std::string own = failing == 1 ? "node 1: boom on node 1" : "boom on node 0";
    EXPECT_NE(s.message().find(own), std::string::npos) << s.message();
    const std::string& stopped = failing == 1 ? local.message() : node1_ranks.message();
    EXPECT_NE(stopped.find(failing == 1 ? "boom on node 1" : "boom on node 0"), std::string::npos) << stopped;
    EXPECT_TRUE(node1_reply.ok()) << node1_reply.message();
    const Status later = g0->begin_call(call);
    EXPECT_NE(later.message().find("the node group failed earlier"), std::string::npos) << later.message();
  }
}

Result<std::unique_ptr<MiniMaxM2>> node_model(const ModelWeights& w, int tp, bool ep, std::unique_ptr<NodeGroup> g) {
  ParallelConfig p;
  p.tensor_parallel_size = tp, p.expert_parallel = ep;
  return MiniMaxM2::tensor_parallel(
      w, p, [](int) -> Result<std::unique_ptr<Backend>> { return make_cpu_backend(1); }, {},
      std::shared_ptr<NodeGroup>(std::move(g)));
}

// The sharded forward over 2 nodes (2 ranks each, and 1 each with experts
// split whole) gives the unsharded logits and greedy ids; node 1 ends when
// node 0's model does.
TEST(NodeGroup, TheShardedForwardAcrossNodesEqualsTheUnsharded) {
  auto w = load_model(test::data_path("m2-tiny-bf16"), LoadOptions{});
  ASSERT_TRUE(w.ok()) << w.status().message();
  auto backend = make_cpu_backend();
  ASSERT_TRUE(backend->prepare_weights(**w).ok());
  MiniMaxM2 single(**w, *backend);
  const std::vector<int32_t> prompt = test::load_reference("m2-tiny-bf16").prompt;
  auto want = all_logits(single, prompt, DType::kF32);
  GreedyOptions o;
  o.max_tokens = 10, o.ignore_eos = true, o.prefill_chunk = 5;
  auto want_ids = generate_greedy(single, std::span(prompt).first(12), o);
  ASSERT_TRUE(want.ok() && want_ids.ok());
  for (auto [tp, ep] : {std::pair{4, false}, std::pair{2, true}}) {
    auto nodes = join(2);
    ASSERT_TRUE(nodes[0].ok() && nodes[1].ok()) << message(nodes[0]) << " / " << message(nodes[1]);
    Status followed = errorf("not run");
    std::thread node1([&, tp = tp, ep = ep] {
      auto m = node_model(**w, tp, ep, std::move(*nodes[1]));
      followed = m.ok() ? (*m)->follow_node_zero() : m.status();
    });
    {
      auto m = node_model(**w, tp, ep, std::move(*nodes[0]));
      ASSERT_TRUE(m.ok()) << m.status().message();
      EXPECT_EQ((*m)->parallel_size(), tp);
      auto got = all_logits(**m, prompt, DType::kF32);
      ASSERT_TRUE(got.ok()) << got.status().message();
      ASSERT_EQ(got->size(), want->size());
      double d = 0;
      for (size_t i = 0; i < got->size(); ++i) d = std::max(d, static_cast<double>(std::abs((*got)[i] - (*want)[i])));
      std::printf("tp %d%s over 2 nodes: max |logit delta| %.3g\n", tp, ep ? " ep" : "", d);
      EXPECT_LE(d, 2e-4);
      auto ids = generate_greedy(**m, std::span(prompt).first(12), o);
      ASSERT_TRUE(ids.ok()) << ids.status().message();
      EXPECT_EQ(*ids, *want_ids);
    }  // node 0's model ends: node 1's loop returns
    node1.join();
    EXPECT_TRUE(followed.ok()) << followed.message();
  }
}

// A node that dies (its links close) fails node 0's next step with a
// message naming it, and the watcher reports it between steps.
TEST(NodeGroup, ALostNodeFailsTheNextStepAndIsReported) {
  auto w = load_model(test::data_path("m2-tiny-bf16"), LoadOptions{});
  ASSERT_TRUE(w.ok());
  auto nodes = join(2);
  ASSERT_TRUE(nodes[0].ok() && nodes[1].ok());
  auto m1 = node_model(**w, 2, false, std::move(*nodes[1]));
  auto m0 = node_model(**w, 2, false, std::move(*nodes[0]));
  ASSERT_TRUE(m0.ok() && m1.ok());
  std::mutex mu;
  std::condition_variable cv;
  std::string reported;
  (*m0)->node_group()->watch([&](const Status& why) {
    std::lock_guard<std::mutex> lock(mu);
    reported = why.message();
    cv.notify_all();
  });
  m1->reset();  // node 1 dies: its sockets close
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return !reported.empty(); }));
  }
  EXPECT_NE(reported.find("node 1 of 2 lost"), std::string::npos) << reported;
  auto got = all_logits(**m0, std::vector<int32_t>{1, 2, 3}, DType::kF32);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("node 1 of 2 lost"), std::string::npos) << got.status().message();
}

}  // namespace
}  // namespace m2
