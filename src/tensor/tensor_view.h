// A typed, non-owning view of a dense row-major tensor in host memory
// (usually straight into a memory-mapped safetensors file).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "tensor/dtype.h"

namespace m2 {

constexpr int kMaxDims = 8;

struct Shape {
  std::array<int64_t, kMaxDims> dims{};
  int ndim = 0;

  Shape() = default;
  Shape(std::initializer_list<int64_t> d);
  static Shape from(const std::vector<int64_t>& d);

  int64_t operator[](int i) const { return dims[i]; }
  int64_t numel() const;
  bool operator==(const Shape& o) const;
  bool operator!=(const Shape& o) const { return !(*this == o); }
  std::string str() const;  // "[6144, 3072]"
};

struct TensorView {
  DType dtype = DType::kF32;
  Shape shape;
  const void* data = nullptr;

  size_t nbytes() const { return static_cast<size_t>(shape.numel()) * dtype_size(dtype); }
  bool empty() const { return data == nullptr; }
  template <typename T>
  const T* as() const { return static_cast<const T*>(data); }
};

// Element i of a float tensor (any float dtype) as fp32. For tests and
// non-hot paths only.
float tensor_get_f32(const TensorView& t, int64_t i);

}  // namespace m2
