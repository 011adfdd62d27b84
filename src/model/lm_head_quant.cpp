#include "model/lm_head_quant.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <new>
#include <vector>

#include "util/log.h"
#include "util/thread_pool.h"

namespace m2 {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Element i of a BF16 / F16 / F32 view as fp32 (exact for all three).
float element(const TensorView& t, int64_t i) {
  switch (t.dtype) {
    case DType::kBF16: return bf16_to_f32(static_cast<const uint16_t*>(t.data)[i]);
    case DType::kF16: return f16_to_f32(static_cast<const uint16_t*>(t.data)[i]);
    default: return static_cast<const float*>(t.data)[i];
  }
}

}  // namespace

void quantize_fp8_blocks(const TensorView& src, int block_rows, int block_cols, uint8_t* codes, float* scales) {
  const int64_t rows = src.shape[0], cols = src.shape[1];
  const int64_t row_blocks = ceil_div(rows, block_rows), col_blocks = ceil_div(cols, block_cols);
  // One task per row of tiles: block_rows x cols elements (128 x 3072 at the
  // M2 shape, 768 KiB of BF16), reading and writing rows contiguously.
  ThreadPool::global().parallel_for(row_blocks, [&](int64_t rb, int) {
    const int64_t r0 = rb * block_rows, r1 = std::min(rows, r0 + block_rows);
    std::vector<float> amax(static_cast<size_t>(col_blocks), 0.0f);
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        float& m = amax[static_cast<size_t>(c / block_cols)];
        m = std::max(m, std::fabs(element(src, r * cols + c)));
      }
    for (int64_t cb = 0; cb < col_blocks; ++cb) {
      // A tile of zeros, or one so small that amax / 448 underflows, takes
      // s = 1: its codes are then 0 or subnormal, off by at most 2^-10.
      const float s = amax[static_cast<size_t>(cb)] / 448.0f;
      scales[rb * col_blocks + cb] = s > 0.0f ? s : 1.0f;
    }
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = 0; c < cols; ++c)
        codes[r * cols + c] = f32_to_f8e4m3(element(src, r * cols + c) / scales[rb * col_blocks + c / block_cols]);
  });
}

Status quantize_lm_head_fp8(ModelWeights& w) {
  Linear& head = w.lm_head;
  if (head.is_fp8()) return Status();
  if (w.config.tie_word_embeddings)
    return errorf("--lm-head-dtype fp8: this model ties lm_head to the embedding; weight updates rebind a tied head "
                  "to the BF16 embedding, so an 8-bit copy of it is not offered");
  if (head.weight.dtype != DType::kBF16 && head.weight.dtype != DType::kF16 && head.weight.dtype != DType::kF32)
    return errorf("--lm-head-dtype fp8: lm_head is {}, expected BF16, F16 or F32", dtype_name(head.weight.dtype));
  if (!head.contiguous())
    return errorf("--lm-head-dtype fp8: lm_head is a column slice of another tensor (rows {} elements apart)", head.ld());
  if (w.dummy_fp8.count(head.weight.data))
    return errorf("--lm-head-dtype fp8: lm_head's values are generated on the GPU, not readable here");
  const int br = w.config.fp8 ? w.config.fp8->block_rows : 128;
  const int bc = w.config.fp8 ? w.config.fp8->block_cols : 128;
  const int64_t rows = head.out_features(), cols = head.in_features();
  const Shape scale_shape{ceil_div(rows, br), ceil_div(cols, bc)};
  // Owned as the dummy weights' buffers are (ModelWeights::owned).
  auto alloc = [&](size_t bytes) -> uint8_t* {
    std::unique_ptr<uint8_t[]> buf(new (std::nothrow) uint8_t[std::max<size_t>(bytes, 1)]);
    if (!buf) return nullptr;
    w.owned.push_back(std::move(buf));
    return w.owned.back().get();
  };
  uint8_t* codes = alloc(static_cast<size_t>(rows * cols));
  float* scales = reinterpret_cast<float*>(alloc(sizeof(float) * static_cast<size_t>(scale_shape.numel())));
  if (!codes || !scales)
    return errorf("--lm-head-dtype fp8: cannot allocate {} bytes for the FP8 lm_head", rows * cols);
  const auto t0 = std::chrono::steady_clock::now();
  quantize_fp8_blocks(head.weight, br, bc, codes, scales);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  const TensorView stored = head.weight;
  head.weight = TensorView{DType::kF8E4M3, Shape{rows, cols}, codes};
  head.scale_inv = TensorView{DType::kF32, scale_shape, scales};
  head.block_rows = br, head.block_cols = bc;
  head.prepared = nullptr;
  if (w.checkpoint) {  // the stored head is no longer read: its pages can go
    if (auto at = w.checkpoint->locate(stored.data))
      w.checkpoint->file(at->file).mapped().release(at->offset, stored.nbytes());
  }
  log_info("lm_head [{}, {}] quantised to FP8 e4m3 with {} x {} block scales in {:.1f} s: {:.1f} MB -> {:.1f} MB "
           "(--lm-head-dtype fp8)",
           rows, cols, br, bc, seconds, stored.nbytes() / 1e6, (head.weight.nbytes() + head.scale_inv.nbytes()) / 1e6);
  return Status();
}

}  // namespace m2
