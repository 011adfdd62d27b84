// Weight updates (model/weight_update.h) and routing capture / replay
// (StepInput::capture_routing, forced_experts; Backend::route_forced) on the
// CPU backend, over the tiny FP8 and BF16 checkpoints in the official layout.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <set>

#include "model/greedy.h"
#include "model/minimax_m2.h"
#include "model/weight_update.h"
#include "test_paths.h"

namespace m2 {
namespace {

std::shared_ptr<WeightSet> load_set(const std::string& fixture) {
  auto w = load_model(test::data_path(fixture), LoadOptions{});
  EXPECT_TRUE(w.ok()) << w.status().message();
  return wrap_loaded_weights(std::move(*w));
}

// A tensor of v's dtype and shape under `name`: its bytes `fill`, or copied
// from `from`, then passed to `edit`.
UpdateTensor tensor_like(const TensorView& v, const std::string& name, uint8_t fill, const void* from = nullptr,
                         const std::function<void(uint8_t*)>& edit = {}) {
  UpdateTensor u;
  u.name = name;
  u.dtype = v.dtype;
  u.shape = v.shape;
  std::shared_ptr<uint8_t[]> bytes(new uint8_t[v.nbytes()]);
  if (from) {
    std::memcpy(bytes.get(), from, v.nbytes());
  } else {
    std::memset(bytes.get(), fill, v.nbytes());
  }
  if (edit) edit(bytes.get());
  u.data = std::move(bytes);
  u.source = "test";
  return u;
}

// A copy of a served tensor's bytes, under its name.
UpdateTensor copy_of(const WeightSet& set, const std::string& name, const std::function<void(uint8_t*)>& edit = {}) {
  const TensorView v = weight_views(set.weights()).at(name);
  return tensor_like(v, name, 0, v.data, edit);
}

// A CPU model over one fixture's weights and a fixed prompt: the weight-swap
// tests compare the logits it gives ([prompt tokens, vocab] float32, F32 KV
// cache, as all_logits returns them) before and after a set_weights.
struct SwappableModel {
  SwappableModel(const std::string& fixture, std::vector<int32_t> prompt)
      : set(load_set(fixture)), backend(make_cpu_backend()), model(set->weights(), *backend), ids(std::move(prompt)) {}

  // The prompt's logits under the weights served now.
  Result<std::vector<float>> logits() { return all_logits(model, ids, DType::kF32); }
  // Serves `weights` from now on, then the prompt's logits under them.
  Result<std::vector<float>> logits_with(const ModelWeights& weights) {
    model.set_weights(weights);
    return logits();
  }

  std::shared_ptr<WeightSet> set;
  std::unique_ptr<Backend> backend;
  MiniMaxM2 model;
  std::vector<int32_t> ids;
};

TEST(WeightViews, ListEveryExpectedTensor) {
  for (const char* fixture : {"m2-tiny-fp8", "m2-tiny-bf16"}) {
    auto set = load_set(fixture);
    const auto views = weight_views(set->weights());
    const auto specs = expected_tensors(set->weights().config);
    EXPECT_EQ(views.size(), specs.size()) << fixture;
    for (const TensorSpec& s : specs) {
      ASSERT_TRUE(views.count(s.name)) << fixture << " " << s.name;
      EXPECT_EQ(views.at(s.name).shape, s.shape) << s.name;
      EXPECT_FALSE(views.at(s.name).empty()) << s.name;
    }
  }
}

TEST(BuildUpdatedWeights, ReplacesOnlyTheGivenTensors) {
  auto set = load_set("m2-tiny-fp8");
  const std::string norm = "model.layers.1.input_layernorm.weight";
  const auto before = weight_views(set->weights());
  std::vector<UpdateTensor> up;
  up.push_back(tensor_like(before.at(norm), norm, 0x3F));  // bf16 0x3F3F = 0.746...
  auto next = build_updated_weights(*set, std::move(up));
  ASSERT_TRUE(next.ok()) << next.status().message();
  const auto after = weight_views((*next)->weights());
  EXPECT_EQ(after.size(), before.size());
  for (const auto& [name, v] : after) {
    if (name == norm) {
      EXPECT_NE(v.data, before.at(name).data);
      EXPECT_FLOAT_EQ(tensor_get_f32(v, 0), tensor_get_f32(TensorView{DType::kBF16, Shape{1}, "\x3F\x3F"}, 0));
    } else {
      EXPECT_EQ(v.data, before.at(name).data) << name;  // shared, not copied
    }
  }
  EXPECT_EQ((*next)->weights().layers[1].input_norm.data, after.at(norm).data);
  // The current set is untouched.
  EXPECT_EQ(weight_views(set->weights()).at(norm).data, before.at(norm).data);
  // A second update from the new set keeps one buffer per replaced tensor.
  std::vector<UpdateTensor> up2;
  up2.push_back(copy_of(**next, norm));
  auto third = build_updated_weights(**next, std::move(up2));
  ASSERT_TRUE(third.ok());
  EXPECT_EQ((*third)->replaced.size(), 1u);
  EXPECT_EQ((*third)->origin, set->origin);
}

TEST(BuildUpdatedWeights, RefusesBadTensorsNamingThem) {
  auto set = load_set("m2-tiny-fp8");
  const auto views = weight_views(set->weights());
  const std::string q = "model.layers.0.self_attn.q_proj";
  auto expect_error = [&](std::vector<UpdateTensor> up, const std::string& needle) {
    auto r = build_updated_weights(*set, std::move(up));
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  {
    std::vector<UpdateTensor> up;
    up.push_back(tensor_like(views.at("model.norm.weight"), "model.layers.9.input_layernorm.weight", 0));
    expect_error(std::move(up), "'model.layers.9.input_layernorm.weight' is not a tensor of the served model");
  }
  {
    UpdateTensor u = copy_of(*set, "model.norm.weight");
    u.shape = Shape{u.shape[0] / 2};
    std::vector<UpdateTensor> up;
    up.push_back(std::move(u));
    expect_error(std::move(up), "shape");
  }
  {
    UpdateTensor u = copy_of(*set, "model.norm.weight");
    u.dtype = DType::kF16;
    std::vector<UpdateTensor> up;
    up.push_back(std::move(u));
    expect_error(std::move(up), "dtype F16 but the served tensor is BF16");
  }
  {
    std::vector<UpdateTensor> up;
    up.push_back(copy_of(*set, q + ".weight"));
    expect_error(std::move(up), "without its 'model.layers.0.self_attn.q_proj.weight_scale_inv'");
  }
  {
    std::vector<UpdateTensor> up;
    up.push_back(copy_of(*set, q + ".weight_scale_inv"));
    expect_error(std::move(up), "without its F8_E4M3 weight");
  }
  {
    std::vector<UpdateTensor> up;
    up.push_back(copy_of(*set, "model.norm.weight"));
    up.push_back(copy_of(*set, "model.norm.weight"));
    expect_error(std::move(up), "given twice");
  }
  expect_error({}, "no tensor");
  // An FP8 pair together is fine.
  std::vector<UpdateTensor> up;
  up.push_back(copy_of(*set, q + ".weight"));
  up.push_back(copy_of(*set, q + ".weight_scale_inv"));
  EXPECT_TRUE(build_updated_weights(*set, std::move(up)).ok());
}

// An FP8 pair replaced by its own bytes serves the same logits bit for bit;
// with its block scales doubled, that linear's weights double (the views
// point at the new bytes).
TEST(BuildUpdatedWeights, Fp8PairsReachTheForwardPass) {
  SwappableModel m("m2-tiny-fp8", {7, 3, 99, 12, 5});
  const std::shared_ptr<WeightSet>& set = m.set;
  auto before = m.logits();
  ASSERT_TRUE(before.ok());
  const std::string w = "model.layers.0.self_attn.o_proj";  // every token uses it
  auto same = [&] {
    std::vector<UpdateTensor> up;
    up.push_back(copy_of(*set, w + ".weight"));
    up.push_back(copy_of(*set, w + ".weight_scale_inv"));
    return up;
  };
  auto next = build_updated_weights(*set, same());
  ASSERT_TRUE(next.ok()) << next.status().message();
  auto again = m.logits_with((*next)->weights());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*before, *again);
  std::vector<UpdateTensor> up = same();
  up[1] = copy_of(*set, w + ".weight_scale_inv", [&](uint8_t* bytes) {
    float* scale = reinterpret_cast<float*>(bytes);
    for (int64_t i = 0; i < up[1].shape.numel(); ++i) scale[i] *= 2;
  });
  auto doubled = build_updated_weights(*set, std::move(up));
  ASSERT_TRUE(doubled.ok());
  const Linear& l = (*doubled)->weights().layers[0].o_proj;
  EXPECT_EQ(tensor_get_f32(l.scale_inv, 0), 2 * tensor_get_f32(set->weights().layers[0].o_proj.scale_inv, 0));
  auto changed = m.logits_with((*doubled)->weights());
  ASSERT_TRUE(changed.ok());
  EXPECT_NE(*before, *changed);
  m.model.set_weights(set->weights());
}

// safetensors bytes of one F32 tensor (with optional metadata).
std::string one_tensor_file(const std::string& name, std::vector<float> values, const std::string& meta = "") {
  std::string header = "{" + (meta.empty() ? std::string() : "\"__metadata__\":" + meta + ",") + "\"" + name +
                       "\":{\"dtype\":\"F32\",\"shape\":[" + std::to_string(values.size()) +
                       "],\"data_offsets\":[0," + std::to_string(values.size() * 4) + "]}}";
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(n >> (8 * i) & 0xFF);
  out += header;
  out.append(reinterpret_cast<const char*>(values.data()), values.size() * 4);
  return out;
}

TEST(ParseSafetensorsBytes, ReadsAndValidates) {
  std::map<std::string, std::string> meta;
  auto r = parse_safetensors_bytes(one_tensor_file("a", {1.5f, -2.0f}, R"({"bucket_set":"s1"})"), "bucket 0", &meta);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].name, "a");
  EXPECT_EQ((*r)[0].shape, Shape{2});
  float v[2];
  std::memcpy(v, (*r)[0].data.get(), 8);
  EXPECT_EQ(v[1], -2.0f);
  EXPECT_EQ(meta.at("bucket_set"), "s1");
  const std::string good = one_tensor_file("a", {1.5f, -2.0f});
  for (size_t cut : {size_t{0}, size_t{5}, size_t{20}, good.size() - 1}) {
    auto bad = parse_safetensors_bytes(std::string_view(good).substr(0, cut), "bucket 3");
    ASSERT_FALSE(bad.ok()) << cut;
    EXPECT_NE(bad.status().message().find("bucket 3"), std::string::npos) << bad.status().message();
  }
  EXPECT_FALSE(parse_safetensors_bytes(good + "x", "bucket 4").ok());  // trailing bytes
}

TEST(ReadUpdateDir, ReadsACheckpointAndChecksItsConfig) {
  auto set = load_set("m2-tiny-bf16");
  for (bool copy : {true, false}) {
    auto r = read_update_dir(test::data_path("m2-tiny-bf16"), set->weights().config, copy);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->tensors.size(), expected_tensors(set->weights().config).size());
    EXPECT_EQ(r->checkpoint == nullptr, copy);
    auto next = build_updated_weights(*set, std::move(r->tensors), r->checkpoint);
    ASSERT_TRUE(next.ok()) << next.status().message();
    EXPECT_EQ((*next)->weights().checkpoint, r->checkpoint);
  }
  // Another model's checkpoint: refused by its config.json.
  auto fp8 = load_set("m2-aligned-fp8");
  auto other = read_update_dir(test::data_path("m2-tiny-bf16"), fp8->weights().config, true);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("config.json"), std::string::npos) << other.status().message();
  EXPECT_FALSE(read_update_dir(test::data_path("no-such-dir"), set->weights().config, true).ok());
}

// Read without copying (a backend with copies of its own), every tensor
// views the update's mapping, which its tensors keep alive, with the bytes
// the copying read gives.
TEST(ReadUpdateDir, ViewsTheMappingWhenNotCopying) {
  auto set = load_set("m2-aligned-fp8");
  const std::string dir = test::data_path("m2-aligned-fp8");
  auto copied = read_update_dir(dir, set->weights().config, true);
  auto viewed = read_update_dir(dir, set->weights().config, false);
  ASSERT_TRUE(copied.ok() && viewed.ok());
  ASSERT_EQ(copied->tensors.size(), viewed->tensors.size());
  std::weak_ptr<Checkpoint> mapping = viewed->checkpoint;
  for (size_t i = 0; i < viewed->tensors.size(); ++i) {
    const UpdateTensor &c = copied->tensors[i], &v = viewed->tensors[i];
    ASSERT_EQ(c.name, v.name);
    const size_t n = static_cast<size_t>(v.shape.numel()) * dtype_size(v.dtype);
    EXPECT_TRUE(viewed->checkpoint->locate(v.data.get()).has_value()) << v.name;
    EXPECT_FALSE(viewed->checkpoint->locate(c.data.get()).has_value()) << c.name;
    EXPECT_EQ(std::memcmp(c.data.get(), v.data.get(), n), 0) << v.name;
  }
  viewed->checkpoint.reset();
  EXPECT_FALSE(mapping.expired());  // held by its tensors
  viewed->tensors.clear();
  EXPECT_TRUE(mapping.expired());
}

// The served logits follow the set the model is given, and the first set
// still gives the first logits.
// Released host bytes (a backend with copies of its own): the replaced
// views move to reserved addresses, unique among all views, the others keep
// theirs, and an update built from the released set differs from it in
// exactly its own tensors' views (what update_weights copies). A reservation
// no view points into any more is dropped.
TEST(ReleaseReplacedBytes, KeepsViewsUniqueAndUpdatesComparable) {
  auto set = load_set("m2-tiny-fp8");
  const std::string q = "model.layers.0.self_attn.q_proj.";
  auto update = [&](const WeightSet& from, std::vector<std::string> names, uint8_t fill) {
    std::vector<UpdateTensor> up;
    for (const std::string& n : names) up.push_back(tensor_like(weight_views(from.weights()).at(n), n, fill));
    auto next = build_updated_weights(from, std::move(up));
    EXPECT_TRUE(next.ok()) << next.status().message();
    return *next;
  };
  const auto loaded = weight_views(set->weights());
  std::shared_ptr<WeightSet> a = update(*set, {"model.norm.weight", q + "weight", q + "weight_scale_inv"}, 0x20);
  ASSERT_TRUE(release_replaced_bytes(*a).ok());
  EXPECT_TRUE(a->replaced.empty());
  ASSERT_EQ(a->stand_ins.size(), 1u);
  const auto released = weight_views(a->weights());
  std::set<const void*> addresses;
  for (const auto& [name, v] : released) {
    const bool moved = name == "model.norm.weight" || name.rfind(q, 0) == 0;
    EXPECT_EQ(v.data != loaded.at(name).data, moved) << name;
    EXPECT_TRUE(addresses.insert(v.data).second) << name << ": another view has its address";
  }
  EXPECT_EQ(a->weights().layers[0].q_proj.weight.data, released.at(q + "weight").data);
  // The next update (q_proj again, and the router) from the released set.
  std::shared_ptr<WeightSet> b = update(*a, {q + "weight", q + "weight_scale_inv", "model.layers.0.block_sparse_moe.gate.weight"}, 0x30);
  std::set<std::string> changed;
  for (const auto& [name, v] : weight_views(b->weights()))
    if (v.data != released.at(name).data) changed.insert(name);
  EXPECT_EQ(changed, (std::set<std::string>{q + "weight", q + "weight_scale_inv", "model.layers.0.block_sparse_moe.gate.weight"}));
  ASSERT_TRUE(release_replaced_bytes(*b).ok());
  ASSERT_EQ(b->stand_ins.size(), 2u);  // the norm still points into a's
  std::shared_ptr<WeightSet> c = update(*b, {"model.norm.weight"}, 0x40);
  ASSERT_TRUE(release_replaced_bytes(*c).ok());
  EXPECT_EQ(c->stand_ins.size(), 2u);  // a's reservation is no longer pointed into: dropped
}

TEST(SetWeights, ForwardUsesTheSwappedSet) {
  SwappableModel m("m2-tiny-bf16", {1, 5, 9, 200, 17});
  const std::shared_ptr<WeightSet>& set = m.set;
  auto before = m.logits();
  ASSERT_TRUE(before.ok());
  std::vector<UpdateTensor> up;
  up.push_back(tensor_like(weight_views(set->weights()).at("model.norm.weight"), "model.norm.weight", 0x40));
  auto next = build_updated_weights(*set, std::move(up));
  ASSERT_TRUE(next.ok());
  auto after = m.logits_with((*next)->weights());
  ASSERT_TRUE(after.ok());
  EXPECT_NE(*before, *after);
  auto again = m.logits_with(set->weights());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*before, *again);
}

// Routing capture gives the router's own choice; replaying it gives the same
// logits bit for bit; replaying another choice changes them; a forced row
// routes with the renormalised sigmoid scores of the forced experts.
TEST(RoutingReplay, CaptureAndReplay) {
  auto set = load_set("m2-tiny-bf16");
  auto backend = make_cpu_backend();
  MiniMaxM2 model(set->weights(), *backend);
  const ModelConfig& c = model.config();
  const int L = c.num_hidden_layers, k = c.num_experts_per_tok, E = c.num_local_experts;
  const std::vector<int32_t> ids = {3, 1, 4, 1, 5, 9, 2, 6};
  const int64_t T = static_cast<int64_t>(ids.size());
  auto run = [&](bool capture, std::vector<int32_t> forced, std::vector<int32_t>* routing) {
    SingleSequence seq(model, T, 16, DType::kF32);
    StepInput in = seq.step(ids, 0, true);
    in.capture_routing = capture;
    in.forced_experts = std::move(forced);
    std::vector<float> logits;
    Status s = model.forward(in, *seq.cache, &logits);
    EXPECT_TRUE(s.ok()) << s.message();
    if (routing) routing->assign(model.last_routing().begin(), model.last_routing().end());
    return logits;
  };
  std::vector<int32_t> natural;
  const std::vector<float> plain = run(false, {}, nullptr);
  const std::vector<float> captured = run(true, {}, &natural);
  EXPECT_EQ(plain, captured);
  ASSERT_EQ(natural.size(), static_cast<size_t>(L * T * k));
  for (int32_t e : natural) EXPECT_TRUE(e >= 0 && e < E);
  EXPECT_EQ(run(false, natural, nullptr), plain);  // replaying the router's choice: identical

  // Another routing for the whole prompt: each row's set shifted by one expert.
  std::vector<int32_t> other = natural;
  for (size_t i = 0; i < other.size(); ++i) other[i] = (natural[i] + 1) % E;
  for (int64_t r = 0; r < L * T; ++r) {  // keep each row's ids distinct
    std::vector<int32_t> row(other.begin() + r * k, other.begin() + (r + 1) * k);
    std::sort(row.begin(), row.end());
    ASSERT_EQ(std::unique(row.begin(), row.end()), row.end());
  }
  std::vector<int32_t> replayed;
  const std::vector<float> forced = run(true, other, &replayed);
  EXPECT_EQ(replayed, other);  // the capture reports what the MoE used
  EXPECT_NE(forced, plain);
  // Only some rows forced (-1 rows route freely): row 0 of every layer.
  std::vector<int32_t> partial(static_cast<size_t>(L * T * k), -1);
  for (int l = 0; l < L; ++l) std::copy_n(other.begin() + (l * T) * k, k, partial.begin() + (l * T) * k);
  std::vector<int32_t> got;
  run(true, partial, &got);
  for (int l = 0; l < L; ++l)
    for (int64_t t = 0; t < T; ++t)
      for (int j = 0; j < k; ++j) {
        const size_t i = static_cast<size_t>((l * T + t) * k + j);
        if (t == 0) {
          EXPECT_EQ(got[i], other[i]);
        } else if (l == 0) {
          EXPECT_EQ(got[i], natural[i]);  // layer 0's input does not depend on row 0's routing
        }
      }
  // Bad forced ids are refused, not run.
  SingleSequence seq(model, T, 16, DType::kF32);
  StepInput in = seq.step(ids, 0, true);
  in.forced_experts = natural;
  in.forced_experts[1] = in.forced_experts[0];
  std::vector<float> logits;
  EXPECT_FALSE(model.forward(in, *seq.cache, &logits).ok());
  in.forced_experts = natural;
  in.forced_experts[0] = E;
  EXPECT_FALSE(model.forward(in, *seq.cache, &logits).ok());
  in.forced_experts.resize(3);
  EXPECT_FALSE(model.forward(in, *seq.cache, &logits).ok());
}

// route_forced's weights: sigmoid(x · gate) of the forced experts,
// renormalised over them, times the scaling; checked in double.
TEST(RoutingReplay, ForcedWeightsAreRenormalisedSigmoidScores) {
  auto backend = make_cpu_backend();
  const int64_t T = 3, H = 8, E = 6;
  const int k = 2;
  std::vector<float> x(T * H), gate(E * H), bias(E, 0.0f);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.7 * i);
  for (size_t i = 0; i < gate.size(); ++i) gate[i] = std::cos(1.3 * i) * 0.5f;
  const TensorView gv{DType::kF32, Shape{E, H}, gate.data()}, bv{DType::kF32, Shape{E}, bias.data()};
  std::vector<int32_t> out_ids(T * k);
  std::vector<float> out_w(T * k);
  const std::vector<int32_t> forced = {5, 0, -1, -1, 2, 3};
  backend->route_forced(Act{x.data(), T, H}, gv, bv, k, 2.5f, forced,
                        Routing{out_ids.data(), out_w.data(), T, k});
  for (int64_t t : {0, 2}) {
    double s[2], sum = 0;
    for (int j = 0; j < k; ++j) {
      const int e = forced[t * k + j];
      EXPECT_EQ(out_ids[t * k + j], e);
      double dot = 0;
      for (int64_t h = 0; h < H; ++h) dot += static_cast<double>(x[t * H + h]) * gate[e * H + h];
      s[j] = 1.0 / (1.0 + std::exp(-dot));
      sum += s[j];
    }
    for (int j = 0; j < k; ++j) EXPECT_NEAR(out_w[t * k + j], s[j] / sum * 2.5, 1e-5);
  }
  // Row 1 routes as route() does.
  std::vector<int32_t> free_ids(T * k);
  std::vector<float> free_w(T * k);
  backend->route(Act{x.data(), T, H}, gv, bv, k, 2.5f, Routing{free_ids.data(), free_w.data(), T, k});
  EXPECT_EQ(out_ids[2], free_ids[2]);
  EXPECT_EQ(out_ids[3], free_ids[3]);
  EXPECT_EQ(out_w[2], free_w[2]);
}

}  // namespace
}  // namespace m2
