#include "tensor/tensor_view.h"

#include <fmt/format.h>

namespace m2 {

Shape::Shape(std::initializer_list<int64_t> d) {
  for (int64_t v : d) dims[ndim++] = v;
}

Shape Shape::from(const std::vector<int64_t>& d) {
  Shape s;
  for (int64_t v : d) s.dims[s.ndim++] = v;
  return s;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= dims[i];
  return n;
}

bool Shape::operator==(const Shape& o) const {
  if (ndim != o.ndim) return false;
  for (int i = 0; i < ndim; ++i)
    if (dims[i] != o.dims[i]) return false;
  return true;
}

std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < ndim; ++i) s += fmt::format("{}{}", i ? ", " : "", dims[i]);
  return s + "]";
}

float tensor_get_f32(const TensorView& t, int64_t i) {
  switch (t.dtype) {
    case DType::kF32: return t.as<float>()[i];
    case DType::kBF16: return bf16_to_f32(t.as<uint16_t>()[i]);
    case DType::kF16: return f16_to_f32(t.as<uint16_t>()[i]);
    case DType::kF8E4M3: return f8e4m3_to_f32(t.as<uint8_t>()[i]);
    case DType::kI32: return static_cast<float>(t.as<int32_t>()[i]);
    case DType::kI64: return static_cast<float>(t.as<int64_t>()[i]);
  }
  return 0.0f;
}

}  // namespace m2
