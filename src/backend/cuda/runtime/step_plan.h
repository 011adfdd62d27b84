// Every kernel one forward step of a model runs on the CUDA backend, as the
// plans choose them (gemm/matmul_plan.h, moe/moe_plan.h,
// attention/attention_plan.h): what `m2cpp info --plan` prints. The ops of a
// layer in model order (model/minimax_m2.cpp), one line each with the
// kernel, and the FP8 activation copies producers write for their readers.
#pragma once

#include <cstdint>
#include <string>

#include "backend/cuda/runtime/cuda_options.h"
#include "io/model_config.h"
#include "tensor/dtype.h"

namespace m2::cuda {

struct DeviceCaps;

// A step: `sequences` sequences of `rows` rows each (decode: 1), each at
// `context` tokens of context (its cached tokens plus its rows).
struct StepShape {
  int64_t sequences = 1;
  int64_t rows = 1;
  int64_t context = 1024;
  DType kv_dtype = DType::kF8E4M3;
};

std::string describe_step_plan(const ModelConfig& c, const StepShape& s, const CudaOptions& o, const DeviceCaps& caps);

}  // namespace m2::cuda
