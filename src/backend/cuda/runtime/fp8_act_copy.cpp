#include "backend/cuda/runtime/fp8_act_copy.h"

namespace m2::cuda {

void Fp8ActCopy::begin_reader_op(std::initializer_list<WrittenBytes> writes) {
  if (!live_) return;
  const auto* lo = reinterpret_cast<const uint8_t*>(act_.data);
  const uint8_t* hi = lo + written(act_).bytes;
  for (const WrittenBytes& w : writes) {
    const auto* b = static_cast<const uint8_t*>(w.data);
    if (w.bytes > 0 && b < hi && lo < b + w.bytes) live_ = false;
  }
}

void Fp8ActCopy::reserve(size_t codes, cudaStream_t stream) {
  if (!enabled_ || codes == 0) return;
  q_.reserve_up_front(codes, stream);
  s_.reserve_up_front(codes / kFp8Block * sizeof(float), stream);
}

Fp8Out Fp8ActCopy::produce(const Act& out, cudaStream_t stream) {
  live_ = false;
  if (!enabled_) return {};
  const size_t codes = static_cast<size_t>(out.rows * out.cols);
  copy_.q = static_cast<uint8_t*>(q_.reserve(codes, stream));
  copy_.s = static_cast<float*>(s_.reserve(codes / kFp8Block * sizeof(float), stream));
  act_ = out;
  live_ = true;
  return copy_;
}

Fp8Out Fp8ActCopy::use(const Act& x) {
  if (!live_ || x.data != act_.data || x.rows != act_.rows || x.cols != act_.cols) return {};
  ++uses_;
  return copy_;
}

}  // namespace m2::cuda
