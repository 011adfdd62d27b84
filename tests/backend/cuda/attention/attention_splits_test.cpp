// The CUDA backend's key split of attention work (attention_splits,
// kernels.h): a pure host rule, so this runs without a GPU. It decides
// between the split SIMT decode kernel and the tensor-core one (no split),
// and the attention tests predict the kernel by it.
#include <gtest/gtest.h>

#include "backend/cuda/attention/attention.h"
#include "backend/cuda/attention/attention_plan.h"

namespace m2::test {
namespace {

constexpr int kSms = 132;  // an H200
constexpr int kTile = cuda::kDecodeTileKeys;

// Every key in some split, each split a whole number of tiles, none empty.
void expect_covers(const cuda::AttentionSplits& sp, int64_t max_keys, int granule) {
  EXPECT_EQ(sp.split_keys % granule, 0) << "split_keys " << sp.split_keys;
  EXPECT_GE(static_cast<int64_t>(sp.splits) * sp.split_keys, max_keys);
  EXPECT_LT(static_cast<int64_t>(sp.splits - 1) * sp.split_keys, max_keys) << "an empty last split";
}

TEST(AttentionSplits, EnoughBlocksNeedNoSplit) {
  // 33 sequences x 8 kv heads = 264 = 2 blocks an SM: the tensor-core decode batch.
  for (int64_t keys : {1, 64, 1025, 32768}) {
    const cuda::AttentionSplits sp = cuda::attention_splits(33 * 8, keys, kSms, kTile);
    EXPECT_EQ(sp.splits, 1) << keys << " keys";
    expect_covers(sp, keys, kTile);
  }
}

TEST(AttentionSplits, FewBlocksSplitLongContexts) {
  // Batch 1 x 8 kv heads at 1K keys: 33 splits wanted, 17 tiles of keys.
  cuda::AttentionSplits sp = cuda::attention_splits(8, 1057, kSms, kTile);
  EXPECT_EQ(sp.splits, 17);
  EXPECT_EQ(sp.split_keys, 64);
  expect_covers(sp, 1057, kTile);
  // At 32K keys: 33 splits wanted, made whole tiles: 32 of 1,024 keys.
  sp = cuda::attention_splits(8, 32768, kSms, kTile);
  EXPECT_EQ(sp.splits, 32);
  EXPECT_EQ(sp.split_keys, 1024);
  expect_covers(sp, 32768, kTile);
  // A context of one tile is never split, however few the blocks.
  sp = cuda::attention_splits(8, 64, kSms, kTile);
  EXPECT_EQ(sp.splits, 1);
  for (int64_t blocks : {1, 7, 100, 263})
    for (int64_t keys : {1, 63, 65, 700, 4097}) expect_covers(cuda::attention_splits(blocks, keys, kSms, 128), keys, 128);
}

// Which decode kernel the backend runs (attention_decode_on_mma): tensor
// cores without a split, and for batch 1 from 8K keys (256 keys a split: the
// measured crossover, docs/perf.md ninth pass); the SIMT kernel for the
// short splits of shorter contexts; the forced modes; dtypes and shapes the
// tensor-core kernel lacks.
TEST(AttentionSplits, DecodeKernelChoice) {
  using cuda::SplitDecode;
  auto on_mma = [](int64_t blocks, int64_t keys, SplitDecode mode, DType dt = DType::kBF16, int group = 6) {
    return cuda::attention_decode_on_mma(dt, 128, group, cuda::attention_splits(blocks, keys, kSms, kTile), mode);
  };
  EXPECT_TRUE(on_mma(33 * 8, 1024, SplitDecode::kAuto));   // a batch of 33: no split
  EXPECT_TRUE(on_mma(33 * 8, 1024, SplitDecode::kSimt));   // the forced mode is for split steps only
  EXPECT_FALSE(on_mma(8, 1024, SplitDecode::kAuto));       // batch 1: splits of 64 keys
  EXPECT_FALSE(on_mma(8, 4096, SplitDecode::kAuto));       // 128 keys
  EXPECT_TRUE(on_mma(8, 8192, SplitDecode::kAuto));        // 256 keys
  EXPECT_TRUE(on_mma(8, 32768, SplitDecode::kAuto, DType::kF8E4M3));
  EXPECT_TRUE(on_mma(8, 1024, SplitDecode::kMma));
  EXPECT_FALSE(on_mma(8, 32768, SplitDecode::kSimt));
  EXPECT_FALSE(on_mma(33 * 8, 1024, SplitDecode::kAuto, DType::kF32));
  EXPECT_FALSE(on_mma(33 * 8, 1024, SplitDecode::kAuto, DType::kBF16, 12));  // group above 8
}

}  // namespace
}  // namespace m2::test
