// The optional 8-bit head (--lm-head-dtype fp8, issue 25 point 3): the BF16
// lm_head [V, H] quantised once, at load time, to FP8 e4m3 with fp32 block
// scales, the layout of an FP8 checkpoint's linears (weights.h, Linear), so
// every backend reads it through its FP8 matmul with no new kernel. At the
// M2 shape the head is 200,064 x 3,072: 1.23 GB in BF16, 0.61 GB + 150 KB of
// scales in FP8, and every decode step reads all of it.
#pragma once

#include <cstdint>

#include "model/weights.h"
#include "util/status.h"

namespace m2 {

// Quantises `src` (BF16, F16 or F32 [rows, cols]) block by block: each
// block_rows x block_cols tile (edge tiles partial) gets scale s = amax / 448
// (448: e4m3's largest finite value; an all-zero tile, or one whose
// amax / 448 underflows, gets s = 1), and each
// element the e4m3 code of w / s, rounded to nearest even. Writes codes
// [rows, cols] and scales [ceil(rows / block_rows), ceil(cols / block_cols)]
// row-major, so that w ≈ code × scale. Tiles run on the global thread pool.
void quantize_fp8_blocks(const TensorView& src, int block_rows, int block_cols, uint8_t* codes, float* scales);

// Replaces w.lm_head by its FP8 quantisation in buffers of w.owned, with the
// checkpoint's FP8 block shape (128 x 128 when it has none; every release
// uses 128 x 128, the only one the CUDA kernels take). The embedding stays as
// stored: a token reads one row of it (H x 2 bytes), so 8 bits would save
// memory, not bandwidth, and it would need a scaled lookup in every backend.
// A head already FP8 is left alone. Refused for a model that ties the head
// to the embedding (no released M2 does): weight updates rebind a tied head
// to the embedding, which would silently bring back the BF16 head. The
// stored BF16 head's pages leave the resident set once quantised.
Status quantize_lm_head_fp8(ModelWeights& w);

}  // namespace m2
