// The m2cpp binary end to end: info, logits, generate, and their errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>

#include <unistd.h>

#include "io/npy.h"
#include "util/json.h"

namespace m2 {
namespace {

struct CmdResult {
  int code;
  std::string out, err;
};

CmdResult run(const std::string& args) {
  // One file per call: ctest runs these tests as concurrent processes.
  static int calls = 0;
  const std::string err_path =
      ::testing::TempDir() + "m2cpp_stderr_" + std::to_string(getpid()) + "_" + std::to_string(calls++) + ".txt";
  const std::string cmd = std::string(M2CPP_BINARY) + " " + args + " 2>" + err_path;
  CmdResult r{};
  FILE* p = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  {
    std::ifstream e(err_path);
    r.err.assign(std::istreambuf_iterator<char>(e), {});
  }
  std::remove(err_path.c_str());
  return r;
}

std::string src(const std::string& rel) { return std::string(M2CPP_SOURCE_DIR) + "/" + rel; }

std::string reference_ids(const std::string& variant, const char* key) {
  auto j = read_json_file(src("tests/data/reference/" + variant + "/prompt.json"));
  std::string s;
  for (int id : (*j)[key]) {
    if (!s.empty()) s += ',';
    s += std::to_string(id);
  }
  return s;
}

TEST(Cli, InfoOnDummyM27ReportsTheRealModelSize) {
  CmdResult r = run("info -m " + src("configs/minimax-m2.7.json") + " --load-format dummy --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = parse_json(r.out, "info");
  ASSERT_TRUE(j.ok()) << r.out;
  EXPECT_EQ((*j)["parameters"].get<uint64_t>(), 228703644928ull);  // 228.7 B, spec §1.2
  EXPECT_EQ((*j)["fp8_scale_elements"].get<uint64_t>(), 13880064ull);
  const double active = (*j)["active_parameters"].get<double>();
  EXPECT_GT(active, 10.35e9);
  EXPECT_LT(active, 10.45e9);  // ≈ 10.4 B
  EXPECT_EQ((*j)["kv_bytes_per_token_bf16"].get<uint64_t>(), 253952u);
  EXPECT_EQ((*j)["bytes_by_dtype"]["F8_E4M3"].get<uint64_t>(), 227410968576ull);

  CmdResult text = run("info -m " + src("configs/minimax-m2.7.json") + " --load-format dummy");
  ASSERT_EQ(text.code, 0);
  EXPECT_NE(text.out.find("228.70 B"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("253952 bytes in BF16"), std::string::npos) << text.out;
}

TEST(Cli, InfoPrintsTheExpertPlacement) {
  // --n-cpu-moe 20 at the M2.7 shape: 20 x 3.38 GiB on the host, the rest and
  // the two staging layers on the GPU (model/expert_placement.h's arithmetic,
  // checked against the config's numbers in expert_placement_test).
  CmdResult r = run("info -m " + src("configs/minimax-m2.7.json") + " --load-format dummy --n-cpu-moe 20");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("experts of layers 0-19 on the host (67.52 GiB pinned), of the other 42 layers on the GPU"),
            std::string::npos)
      << r.out;
  CmdResult a = run("info -m " + src("configs/minimax-m2.7.json") + " --load-format dummy --n-cpu-moe auto");
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_NE(a.out.find("auto on an H200"), std::string::npos) << a.out;
  // --threads sets the threads that compute them (as llama.cpp's -t).
  CmdResult t = run("info -m " + src("configs/minimax-m2.7.json") + " --load-format dummy --n-cpu-moe 20 --threads 6");
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("host experts computed by 6 CPU threads (--threads)"), std::string::npos) << t.out;
}

TEST(Cli, InfoOnCheckpointCountsStoredBytes) {
  CmdResult r = run("info -m " + src("tests/data/m2-tiny-fp8") + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = parse_json(r.out, "info");
  ASSERT_TRUE(j.ok());
  EXPECT_EQ((*j)["source"], "safetensors");
  EXPECT_GT((*j)["bytes_by_dtype"]["F8_E4M3"].get<uint64_t>(), 0u);
}

TEST(Cli, LogitsWritesNpyMatchingReference) {
  const std::string out = ::testing::TempDir() + "m2cpp_logits.npy";
  CmdResult r = run("logits -m " + src("tests/data/m2-tiny-bf16") + " --ids " + reference_ids("m2-tiny-bf16", "prompt_ids") +
              " --out " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  auto ours = read_npy(out);
  auto ref = read_npy(src("tests/data/reference/m2-tiny-bf16/logits.npy"));
  ASSERT_TRUE(ours.ok() && ref.ok());
  ASSERT_EQ(ours->shape, ref->shape);
  for (size_t i = 0; i < ref->values.size(); ++i) ASSERT_NEAR(ours->values[i], ref->values[i], 5e-3);
}

// -tp N (vLLM's flag): the model split over N CPU ranks gives the unsharded
// logits within fp32 reduction-order error (2e-4: tests/model/
// tensor_parallel_test.cpp says why) and the same greedy ids.
TEST(Cli, TensorParallelLogitsAndGreedyIdsMatchTp1) {
  const std::string m = src("tests/data/m2-tiny-bf16"), ids = reference_ids("m2-tiny-bf16", "prompt_ids");
  const std::string one = ::testing::TempDir() + "m2cpp_tp1.npy";
  ASSERT_EQ(run("logits -m " + m + " --ids " + ids + " --out " + one).code, 0);
  auto want = read_npy(one);
  ASSERT_TRUE(want.ok());
  for (const std::string flags : {"-tp 2", "--tensor-parallel-size 4", "-tp 4 --enable-expert-parallel"}) {
    const std::string out = ::testing::TempDir() + "m2cpp_tp.npy";
    CmdResult r = run("logits -m " + m + " --ids " + ids + " --out " + out + " " + flags);
    ASSERT_EQ(r.code, 0) << flags << "\n" << r.err;
    auto got = read_npy(out);
    ASSERT_TRUE(got.ok());
    ASSERT_EQ(got->shape, want->shape);
    for (size_t i = 0; i < want->values.size(); ++i) ASSERT_NEAR(got->values[i], want->values[i], 2e-4) << flags;
  }
  const std::string gen = "generate -m " + m + " --ids " + reference_ids("m2-tiny-bf16", "greedy_prompt_ids") +
                          " --max-tokens 12 --ignore-eos --json";
  CmdResult a = run(gen), b = run(gen + " -tp 2");
  ASSERT_EQ(a.code, 0);
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_EQ(a.out, b.out);
}

// --routing-capture writes int32 [rows, layers, top_k]; --routing-replay
// reads it back: tp 2 under tp 1's routing gives its ids, and a replayed
// file is what the run routes by (captured back unchanged).
TEST(Cli, GenerateCapturesAndReplaysTheRouting) {
  const std::string m = src("tests/data/m2-tiny-bf16");
  const std::string ids = reference_ids("m2-tiny-bf16", "greedy_prompt_ids");
  const std::string gen = "generate -m " + m + " --ids " + ids + " --max-tokens 8 --ignore-eos --json";
  const std::string one = ::testing::TempDir() + "m2cpp_routing_tp1.bin",
                    two = ::testing::TempDir() + "m2cpp_routing_tp2.bin";
  CmdResult a = run(gen + " --routing-capture " + one);
  ASSERT_EQ(a.code, 0) << a.err;
  auto bytes = [](const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  const int64_t prompt = std::count(ids.begin(), ids.end(), ',') + 1;
  const std::string captured = bytes(one);
  EXPECT_EQ(static_cast<int64_t>(captured.size()), (prompt + 8 - 1) * 3 * 3 * 4);  // 3 layers, top 3, int32
  CmdResult b = run(gen + " -tp 2 --routing-replay " + one + " --routing-capture " + two);
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_EQ(b.out, a.out);
  EXPECT_EQ(bytes(two), captured);
  // logits of the prompt and the generated ids but the last, under that
  // routing at tp 2: tp 1's greedy choice at every generated row.
  auto generated = parse_json(a.out, "generate");
  ASSERT_TRUE(generated.ok()) << a.out;
  std::string all = ids;
  for (size_t i = 0; i + 1 < (*generated)["ids"].size(); ++i) all += "," + std::to_string((*generated)["ids"][i].get<int>());
  const std::string npy = ::testing::TempDir() + "m2cpp_routing_logits.npy";
  CmdResult l = run("logits -m " + m + " --ids " + all + " --out " + npy + " -tp 2 --routing-replay " + one);
  ASSERT_EQ(l.code, 0) << l.err;
  auto logits = read_npy(npy);
  ASSERT_TRUE(logits.ok());
  ASSERT_EQ(logits->shape[0], prompt + 7);
  const int64_t V = logits->shape[1];
  for (int64_t i = 0; i < 8; ++i) {
    const auto* row = logits->values.data() + (prompt - 1 + i) * V;
    EXPECT_EQ(std::max_element(row, row + V) - row, (*generated)["ids"][i].get<int>()) << "generated token " << i;
  }
  std::remove(npy.c_str());
  {  // 5 bytes: not whole rows
    std::ofstream(two, std::ios::binary) << "12345";
  }
  CmdResult c = run(gen + " --routing-replay " + two);
  EXPECT_EQ(c.code, 1);
  EXPECT_NE(c.err.find("5 bytes is not rows of 9 int32 ids"), std::string::npos) << c.err;
  {  // expert 99 of 8
    const int32_t row[9] = {99, 1, 2, 0, 1, 2, 0, 1, 2};
    std::ofstream(two, std::ios::binary).write(reinterpret_cast<const char*>(row), sizeof(row));
  }
  c = run(gen + " --routing-replay " + two);
  EXPECT_EQ(c.code, 1);
  EXPECT_NE(c.err.find("--routing-replay: forward: forced expert id 99 outside [0, 8)"), std::string::npos) << c.err;
  std::remove(one.c_str());
  std::remove(two.c_str());
}

// info -tp: what one rank holds (the M2.7 shape, no files), and the split
// an FP8 checkpoint cannot take refused naming the value (I / 8 = 192 is
// not a multiple of the 128-wide scale blocks: TP8 needs EP, as vLLM's).
TEST(Cli, InfoReportsBytesPerRank) {
  CmdResult r = run("info -m " + src("configs/minimax-m2.7.json") + " --load-format dummy --json -tp 8 --enable-expert-parallel");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = parse_json(r.out, "info");
  ASSERT_TRUE(j.ok()) << r.out;
  const Json& p = (*j)["per_rank"];
  EXPECT_EQ(p["tensor_parallel_size"], 8);
  EXPECT_EQ(p["kv_bytes_per_token_bf16"], (*j)["kv_bytes_per_token_bf16"].get<int64_t>() / 8);
  uint64_t total = 0;
  for (const auto& [dtype, b] : (*j)["bytes_by_dtype"].items()) total += b.get<uint64_t>();
  EXPECT_GT(p["weight_bytes"].get<uint64_t>(), total / 8);       // the norms and routers replicated
  EXPECT_LT(p["weight_bytes"].get<uint64_t>(), total / 8 * 1.05);
  // What one H200 holds: tp 8 + EP leaves ~90 GiB of a 0.9 x 139.7 GiB budget for the cache. By hand from
  // the spec: 8 kv heads / 8 ranks x 128 dims x 62 layers x 2 (K, V) x 2 bytes = 31,744 BF16 bytes a token.
  const Json& g = (*j)["per_gpu_h200"];
  EXPECT_TRUE(g["fits"].get<bool>());
  EXPECT_EQ(g["weight_bytes"], p["weight_bytes"]);
  EXPECT_GT(g["kv_cache_bytes"].get<double>(), 85.0 * (1 << 30));
  EXPECT_LT(g["kv_cache_bytes"].get<double>(), 98.0 * (1 << 30));
  EXPECT_NEAR(g["kv_tokens_bf16"].get<double>(), g["kv_cache_bytes"].get<double>() / 31744, 16);
  EXPECT_GT(g["kv_tokens_fp8"].get<int64_t>(), g["kv_tokens_bf16"].get<int64_t>() * 19 / 10);  // half, + scales
  // One GPU cannot hold the 230 GB model: it says by how much (~214 GiB of weights against ~125.7).
  CmdResult one = run("info -m " + src("configs/minimax-m2.7.json") + " --load-format dummy --json");
  ASSERT_EQ(one.code, 0) << one.err;
  auto oj = parse_json(one.out, "info");
  ASSERT_TRUE(oj.ok()) << one.out;
  EXPECT_FALSE((*oj)["per_gpu_h200"]["fits"].get<bool>());
  EXPECT_GT((*oj)["per_gpu_h200"]["short_by_bytes"].get<double>(), 85.0 * (1 << 30));
  EXPECT_LT((*oj)["per_gpu_h200"]["short_by_bytes"].get<double>(), 95.0 * (1 << 30));
  CmdResult text = run("info -m " + src("configs/minimax-m2.7.json") + " --load-format dummy -tp 2");
  EXPECT_NE(text.out.find("per GPU (H200)   0.9 x 139.7 GiB: weights"), std::string::npos) << text.out;
  CmdResult bad = run("info -m " + src("configs/minimax-m2.7.json") + " --load-format dummy -tp 8");
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("rows of w1 is 192 wide, not a multiple of the FP8 scale block 128"), std::string::npos) << bad.err;
}

// --lm-head-dtype fp8 reaches the load (its numerics: tests/model/lm_head_fp8_test.cpp):
// the head is quantised, the logits move off the BF16 head's, and other values are refused.
TEST(Cli, LogitsWithAnFp8Head) {
  const std::string bf16 = ::testing::TempDir() + "m2cpp_logits_bf16_head.npy";
  const std::string fp8 = ::testing::TempDir() + "m2cpp_logits_fp8_head.npy";
  const std::string args = "logits -m " + src("tests/data/m2-tiny-bf16") + " --ids 1,5,9,200,17";
  ASSERT_EQ(run(args + " --out " + bf16).code, 0);
  CmdResult r = run(args + " --lm-head-dtype fp8 --out " + fp8);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("quantised to FP8 e4m3"), std::string::npos) << r.err;
  auto a = read_npy(bf16), b = read_npy(fp8);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->shape, b->shape);
  EXPECT_NE(a->values, b->values);
  CmdResult bad = run(args + " --lm-head-dtype int4 --out " + fp8);
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.err.find("--lm-head-dtype"), std::string::npos) << bad.err;
  // Split by vocabulary over ranks: 512 / 4 = 128 rows each fall on the scale blocks.
  CmdResult tp = run(args + " --lm-head-dtype fp8 -tp 4 --out " + fp8);
  EXPECT_EQ(tp.code, 0) << tp.err;
  // M2's 200,064 rows over 2 ranks, 100,032 each, do not: refused before the load.
  CmdResult split = run("logits -m " + src("configs/minimax-m2.7.json") +
                        " --load-format dummy --ids 1 --lm-head-dtype fp8 -tp 2 --out " + fp8);
  EXPECT_EQ(split.code, 1);
  EXPECT_NE(split.err.find("each rank's 100032 vocabulary rows"), std::string::npos) << split.err;
}

TEST(Cli, GenerateJsonMatchesReferenceGreedy) {
  for (const std::string v : {"m2-tiny-bf16", "m2-tiny-fp8"}) {
    auto j = read_json_file(src("tests/data/reference/" + v + "/prompt.json"));
    const size_t n = (*j)["greedy_ids"].size();
    CmdResult r = run("generate -m " + src("tests/data/" + v) + " --ids " + reference_ids(v, "greedy_prompt_ids") +
                " --max-tokens " + std::to_string(n) + " --temperature 0 --ignore-eos --json");
    ASSERT_EQ(r.code, 0) << r.err;
    auto got = parse_json(r.out, "generate");
    ASSERT_TRUE(got.ok()) << r.out;
    EXPECT_EQ((*got)["ids"], (*j)["greedy_ids"]) << v;
  }
}

// bench decode on the CPU: batch 1 (prefill FLOP/s beside the CPU's fp32 FMA
// peak; the FP8 peak is a GPU's) and --batch N (N sequences per step, sampled on the backend).
TEST(Cli, BenchDecodeReportsBatchOneAndBatchedRates) {
  const std::string one = ::testing::TempDir() + "m2cpp_decode1.json";
  CmdResult r = run("bench decode -m " + src("tests/data/m2-tiny-fp8") + " --context 20 --prefill-chunk 20 --tokens 3 --json " + one);
  ASSERT_EQ(r.code, 0) << r.err;
  auto j1 = read_json_file(one);
  ASSERT_TRUE(j1.ok());
  EXPECT_EQ((*j1)["context"], 20);
  EXPECT_GT((*j1)["tokens_per_s"].get<double>(), 0.0);
  EXPECT_GT((*j1)["bytes_per_token"].get<double>(), 0.0);
  EXPECT_GT((*j1)["prefill_flops_per_s"].get<double>(), 0.0);
  EXPECT_GT((*j1)["prefill_first_chunk_cold_s"].get<double>(), 0.0);  // the untimed first pass ran
  EXPECT_EQ((*j1)["fp8_peak_flops"].get<double>(), 0.0);  // measured on GPUs only
  EXPECT_GT((*j1)["fma_peak_flops"].get<double>(), (*j1)["prefill_flops_per_s"].get<double>());
  EXPECT_NE(r.out.find("measured fp32 FMA peak = "), std::string::npos) << r.out;

  const std::string many = ::testing::TempDir() + "m2cpp_decode3.json";
  r = run("bench decode -m " + src("tests/data/m2-tiny-fp8") + " --context 20 --batch 3 --tokens 3 --json " + many);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("decode           batch 3, 3 steps"), std::string::npos) << r.out;
  auto j3 = read_json_file(many);
  ASSERT_TRUE(j3.ok());
  EXPECT_EQ((*j3)["batch"], 3);
  EXPECT_NEAR((*j3)["tokens_per_s"].get<double>(), 3.0 / (*j3)["median_s_per_step"].get<double>(), 1e-6);
  // The ceiling: the step's bytes at the measured bandwidth, with the expected
  // distinct experts of 3 tokens picking top_k of E uniformly.
  auto cfg = read_json_file(src("tests/data/m2-tiny-fp8/config.json"));
  ASSERT_TRUE(cfg.ok());
  const double E = (*cfg)["num_local_experts"].get<double>(), k = (*cfg)["num_experts_per_tok"].get<double>();
  EXPECT_NEAR((*j3)["experts_touched_per_layer"].get<double>(), E * (1 - std::pow(1 - k / E, 3)), 1e-9);
  const double bytes = (*j3)["bytes_per_step"].get<double>(), bw = (*j3)["ceiling_bytes_per_s"].get<double>();
  EXPECT_GT(bytes, 0.0);
  EXPECT_NEAR((*j3)["ceiling_tokens_per_s"].get<double>(), 3 * bw / bytes, 1e-6 * 3 * bw / bytes);
  EXPECT_NEAR((*j3)["fraction_of_ceiling"].get<double>(),
              (*j3)["tokens_per_s"].get<double>() / (*j3)["ceiling_tokens_per_s"].get<double>(), 1e-9);
  EXPECT_NE(r.out.find("ceiling          "), std::string::npos) << r.out;

  // An FP8 KV cache: each cached K or V row is kv_dim one-byte codes plus an
  // fp32 scale per kv head, against two bytes a value for BF16 (3 sequences
  // of 20 + 4 + 3 / 2 keys in every layer, K and V).
  const std::string f8 = ::testing::TempDir() + "m2cpp_decode3_fp8.json";
  const std::string b16 = ::testing::TempDir() + "m2cpp_decode3_bf16.json";
  for (const auto& [kv, out] : {std::pair{"fp8", f8}, std::pair{"bf16", b16}}) {
    r = run("bench decode -m " + src("tests/data/m2-tiny-fp8") + " --context 20 --batch 3 --tokens 3 --kv-dtype " + kv +
            " --json " + out);
    ASSERT_EQ(r.code, 0) << r.err;
  }
  auto jf = read_json_file(f8), jb = read_json_file(b16);
  ASSERT_TRUE(jf.ok() && jb.ok());
  const double layers = (*cfg)["num_hidden_layers"].get<double>(), kvh = (*cfg)["num_key_value_heads"].get<double>();
  const double kv_dim = kvh * (*cfg)["head_dim"].get<double>();
  EXPECT_NEAR((*jb)["bytes_per_step"].get<double>() - (*jf)["bytes_per_step"].get<double>(),
              layers * 2 * 3 * 25 * (kv_dim * 2 - (kv_dim + 4 * kvh)), 1e-6);
}

TEST(Cli, ErrorsAreMessagesNotCrashes) {
  struct Case {
    std::string args, needle;
  };
  const std::vector<Case> cases = {
      {"info -m /nonexistent/dir", "cannot open"},
      {"generate -m " + src("tests/data/m2-tiny-bf16") + " --ids 1,x", "'x' is not a token id"},
      {"generate -m " + src("tests/data/m2-tiny-bf16") + " --ids 1,999999", "outside the vocabulary"},
      {"logits -m " + src("tests/data/m2-tiny-bf16") + " --ids 1 --out /nonexistent/x.npy", "cannot open"},
      {"generate -m " + src("tests/data/m2-tiny-bf16") + " --ids 1 --temperature 0.7", "only greedy"},
      {"info -m " + src("tests/data/m2-tiny-bf16") + " --num-layers 9", "exceeds the model's 3 layers"},
      {"generate -m " + src("tests/data/m2-tiny-bf16") + " --ids 1 --gpu-memory-utilization 0.5",
       "--gpu-memory-utilization applies to --device cuda"},
      {"generate -m " + src("tests/data/m2-tiny-bf16") + " --ids 1 -tp 3", "3 does not divide the model's 4 attention heads"},
      {"logits -m " + src("tests/data/m2-tiny-fp8") + " --ids 1 --out x.npy -tp 2 --enable-expert-parallel",
       "k_proj is 64 wide, not a multiple of the FP8 scale block 128"},
      {"generate -m " + src("tests/data/m2-tiny-bf16") + " --ids 1 --n-cpu-moe 2",
       "--cpu-moe and --n-cpu-moe place experts beside a GPU"},
      {"generate -m " + src("tests/data/m2-tiny-bf16") + " --ids 1 --cpu-moe", "place experts beside a GPU"},
      {"info -m " + src("configs/minimax-m2.7.json") + " --load-format dummy --n-cpu-moe 63", "--n-cpu-moe 63: the model has 62 layers"},
      {"info -m " + src("configs/minimax-m2.7.json") + " --load-format dummy --n-cpu-moe x",
       "--n-cpu-moe x: expected auto or a number of layers"},
      {"generate -m " + src("tests/data/m2-tiny-bf16") + " --ids 1 -tp 2 --nnodes 4",
       "--tensor-parallel-size 2 over --nnodes 4: every node holds the same number of ranks"},
      {"generate -m " + src("tests/data/m2-tiny-bf16") + " --ids 1 -tp 2 --nnodes 2 --node-rank 2",
       "--node-rank 2 is outside 0..1 (--nnodes 2)"},
      {"generate -m " + src("tests/data/m2-tiny-bf16") + " --ids 1 --device cuda -tp 2 --nnodes 2 --node-rank 0 "
       "--master-addr 127.0.0.1 --gpu-memory-utilization 0.9",
       "--gpu-memory-utilization with --nnodes 2 on the GPU is not supported yet"},
  };
  for (const Case& c : cases) {
    CmdResult r = run(c.args);
    EXPECT_EQ(r.code, 1) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.args << "\n" << r.err;
  }
}

}  // namespace
}  // namespace m2
