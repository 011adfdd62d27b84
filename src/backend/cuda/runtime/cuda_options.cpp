#include "backend/cuda/runtime/cuda_options.h"

#include <cstdlib>

#include "util/log.h"
#include "util/status.h"

namespace m2::cuda {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

Status set_bool(bool* field, std::string_view key, std::string_view value, std::string_view origin) {
  if (value == "on" || value == "1" || value == "true") return *field = true, Status();
  if (value == "off" || value == "0" || value == "false") return *field = false, Status();
  return errorf("{}: {}={} is not one of on, off", origin, key, value);
}

const char* on_off(bool b) { return b ? "on" : "off"; }

// The per-variable switches of earlier versions, now keys of M2CPP_CUDA_OPTIONS.
constexpr const char* kRetired[] = {"M2CPP_FP8_GEMM",      "M2CPP_MOE_CUTLASS",      "M2CPP_ATTN_PREFILL",
                                    "M2CPP_CUDA_TC_ATTENTION", "M2CPP_CUDA_GRAPHS",  "M2CPP_CUDA_SYNC",
                                    "M2CPP_CUDA_PROFILE",  "M2CPP_CUDA_PDL",         "M2CPP_FUSED_QUANT",
                                    "M2CPP_ROUTE_GEMM",    "M2CPP_BF16_GEMM",        "M2CPP_GEMV_MMA",
                                    "M2CPP_MOE_DECODE",    "M2CPP_ATTN_DECODE_SPLIT", "M2CPP_CUDA_PREFETCH"};

}  // namespace

const char* fp8_gemm_mode_name(Fp8GemmMode mode) {
  switch (mode) {
    case Fp8GemmMode::kOwn: return "own";
    case Fp8GemmMode::kCublasLt: return "cublaslt";
    default: return "off";
  }
}

Status CudaOptions::apply(std::string_view spec, std::string_view origin) {
  while (!spec.empty()) {
    const size_t comma = spec.find(',');
    const std::string_view item = trim(spec.substr(0, comma));
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) return errorf("{}: '{}' is not key=value", origin, item);
    const std::string_view key = trim(item.substr(0, eq)), value = trim(item.substr(eq + 1));
    Status s;
    if (key == "fp8_gemm") {
      if (value == "cublaslt") fp8_gemm = Fp8GemmMode::kCublasLt;
      else if (value == "own") fp8_gemm = Fp8GemmMode::kOwn;
      else if (value == "off") fp8_gemm = Fp8GemmMode::kOff;
      else s = errorf("{}: fp8_gemm={} is not one of cublaslt, own, off", origin, value);
    } else if (key == "attn_prefill") {
      if (value == "flashinfer") flashinfer_prefill = true;
      else if (value == "mma") flashinfer_prefill = false;
      else s = errorf("{}: attn_prefill={} is not one of flashinfer, mma", origin, value);
    } else if (key == "moe_cutlass") {
      s = set_bool(&moe_cutlass, key, value, origin);
    } else if (key == "tc_attention") {
      s = set_bool(&tc_attention, key, value, origin);
    } else if (key == "graphs") {
      s = set_bool(&graphs, key, value, origin);
    } else if (key == "sync") {
      s = set_bool(&sync_each_op, key, value, origin);
    } else if (key == "profile") {
      s = set_bool(&profile, key, value, origin);
    } else if (key == "pdl") {
      s = set_bool(&pdl, key, value, origin);
    } else if (key == "batch_invariant") {
      s = set_bool(&batch_invariant, key, value, origin);
    } else {
      s = errorf("{}: unknown key '{}' (fp8_gemm, moe_cutlass, attn_prefill, tc_attention, graphs, sync, profile, pdl, "
                 "batch_invariant)",
                 origin, key);
    }
    if (!s.ok()) return s;
  }
  return Status();
}

Result<CudaOptions> CudaOptions::parse(std::string_view flag) {
  for (const char* name : kRetired)
    if (std::getenv(name))
      log_warn("{} is no longer read: the CUDA backend's switches are keys of M2CPP_CUDA_OPTIONS or --cuda-options "
               "(see `m2cpp info --plan`)",
               name);
  CudaOptions o;
  if (const char* env = std::getenv("M2CPP_CUDA_OPTIONS"); env && *env) {
    if (Status s = o.apply(env, "M2CPP_CUDA_OPTIONS"); !s.ok()) return s;
  }
  if (Status s = o.apply(flag, "--cuda-options"); !s.ok()) return s;
  return o;
}

std::string CudaOptions::describe() const {
  const char* split = split_decode == SplitDecode::kSimt ? "simt" : split_decode == SplitDecode::kMma ? "mma" : "auto";
  return fmt::format(
      "fp8_gemm={},moe_cutlass={},attn_prefill={},tc_attention={},graphs={},sync={},profile={},pdl={},"
      "batch_invariant={}"
      " (variants: fused_quant={},route_gemm={},bf16_gemm={},gemv_mma={},moe_decode_wgmma={},split_decode={})"
      "{}",
      fp8_gemm_mode_name(fp8_gemm), on_off(moe_cutlass), flashinfer_prefill ? "flashinfer" : "mma",
      on_off(tc_attention), on_off(graphs), on_off(sync_each_op), on_off(profile), on_off(pdl), on_off(batch_invariant),
      on_off(fused_quant),
      on_off(route_gemm), on_off(bf16_gemm), on_off(gemv_mma), on_off(moe_decode_wgmma), split,
      cpu_moe_layers == 0 ? std::string()
                          : fmt::format(" (experts on the host: {} layers, CPU up to {} tokens, {} threads)",
                                        cpu_moe_layers == kCpuMoeAuto  ? std::string("auto")
                                        : cpu_moe_layers == kCpuMoeAll ? std::string("all")
                                                                       : std::to_string(cpu_moe_layers),
                                        cpu_moe_max_tokens, cpu_moe_threads));
}

}  // namespace m2::cuda
