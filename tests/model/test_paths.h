// Committed fixtures (tests/data/README.md says what they are) and the
// float64 reference outputs written by tools/make_reference_fixtures.py and
// tools/demo_model/make_reference.py.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "io/npy.h"
#include "util/json.h"

namespace m2::test {

// tests/data/<rel>, under $M2CPP_SOURCE_DIR when set (binaries built on one
// machine and run on a GPU machine where the checkout lives elsewhere).
inline std::string data_path(const std::string& rel) {
  const char* root = std::getenv("M2CPP_SOURCE_DIR");
  return std::string(root && *root ? root : M2CPP_SOURCE_DIR) + "/tests/data/" + rel;
}

// tests/data/reference/<variant>/: prompt ids, the greedy continuation, and
// the logits [prompt, vocab] of every prompt position.
struct Reference {
  std::vector<int32_t> prompt, greedy_prompt, greedy_ids;
  NpyArray logits;
};

inline Reference load_reference(const std::string& variant) {
  Reference r;
  auto j = read_json_file(data_path("reference/" + variant + "/prompt.json"));
  EXPECT_TRUE(j.ok()) << j.status().message();
  if (!j.ok()) return r;
  r.prompt = (*j)["prompt_ids"].get<std::vector<int32_t>>();
  r.greedy_prompt = (*j)["greedy_prompt_ids"].get<std::vector<int32_t>>();
  r.greedy_ids = (*j)["greedy_ids"].get<std::vector<int32_t>>();
  auto l = read_npy(data_path("reference/" + variant + "/logits.npy"));
  EXPECT_TRUE(l.ok()) << l.status().message();
  if (l.ok()) r.logits = std::move(l.value());
  return r;
}

}  // namespace m2::test
