// NumPy .npy files (format 1.0/2.0, little-endian, C order): write float32
// arrays (the `logits` command's output) and read numeric arrays (test
// fixtures written by numpy).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/status.h"

namespace m2 {

Status write_npy_f32(const std::string& path, const float* data, const std::vector<int64_t>& shape);

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<double> values;  // converted from the stored dtype (<f4, <f8, <i4, <i8)
};

Result<NpyArray> read_npy(const std::string& path);

}  // namespace m2
