// What the libFuzzer harnesses of tests/fuzz/ share: a property check that
// stops the run with the broken property named (libFuzzer then saves the
// input as a crash), and the path of the committed test data.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

// A property the code under test must keep for every input. abort() rather
// than an exception: the harness must not be able to swallow its own verdict.
#define FUZZ_CHECK(cond, ...)                                            \
  do {                                                                   \
    if (!(cond)) {                                                       \
      std::fprintf(stderr, "%s:%d: property failed: %s\n", __FILE__,   \
                   __LINE__, #cond);                                     \
      std::fprintf(stderr, "  " __VA_ARGS__);                            \
      std::fprintf(stderr, "\n");                                        \
      std::abort();                                                      \
    }                                                                    \
  } while (0)

namespace m2::fuzz {

inline std::string test_data(const std::string& rel) { return std::string(M2CPP_SOURCE_DIR) + "/tests/data/" + rel; }

}  // namespace m2::fuzz
