#include "backend/cuda/runtime/fp8_act_copy.h"

namespace m2::cuda {

void Fp8ActCopy::reserve(size_t codes, cudaStream_t stream) {
  if (!enabled_ || codes == 0) return;
  q_.reserve_up_front(codes, stream);
  s_.reserve_up_front(codes / kFp8Block * sizeof(float), stream);
}

Fp8Out Fp8ActCopy::produce(const Act& out, ActCopy* handle, cudaStream_t stream) {
  *handle = ActCopy{};
  if (!enabled_) return {};
  const size_t codes = static_cast<size_t>(out.rows * out.cols);
  copy_.q = static_cast<uint8_t*>(q_.reserve(codes, stream));
  copy_.s = static_cast<float*>(s_.reserve(codes / kFp8Block * sizeof(float), stream));
  *handle = ActCopy{copy_.q, copy_.s, out, ++serial_};
  return copy_;
}

Fp8Out Fp8ActCopy::use(const ActCopy& xc, const Act& x) {
  if (xc.empty() || xc.serial != serial_ || xc.codes != copy_.q || xc.scales != copy_.s) return {};
  if (x.data != xc.of.data || x.rows != xc.of.rows || x.cols != xc.of.cols) return {};
  ++uses_;
  return copy_;
}

}  // namespace m2::cuda
