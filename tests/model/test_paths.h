// Locations of committed fixtures (tests/data/README.md says what they are).
#pragma once

#include <string>

namespace m2::test {

inline std::string data_path(const std::string& rel) { return std::string(M2CPP_SOURCE_DIR) + "/tests/data/" + rel; }

}  // namespace m2::test
