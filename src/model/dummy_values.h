// The values of --load-format dummy's FP8 weights as a function of the
// element index, so that a GPU can generate them where they live instead of
// the host filling and uploading ~100 GB (30 real-shape layers: ~52 s of
// host generation per benchmark run on the H200 machine).
//
// The sequence is model/dummy_weights.cpp's: the tensor's elements in chunks
// of kDummyChunk, chunk c a splitmix64 stream from
// tensor_seed ^ (kDummyChunkMix * (c + 1)), each output giving 8 elements
// (low byte first), each byte an index into the code table of uniform values
// in [-64, 64). splitmix64's k-th output is mix(s0 + (k + 1) * golden), so
// any element can be computed on its own. Compiled by g++ and nvcc alike.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define M2_HOST_DEVICE __host__ __device__
#else
#define M2_HOST_DEVICE
#endif

namespace m2 {

inline constexpr int64_t kDummyChunk = 1 << 20;                  // elements per parallel chunk
inline constexpr uint64_t kDummyChunkMix = 0x632be59bd9b4e019ull;  // chunk seeds
inline constexpr uint64_t kSplitmixGolden = 0x9e3779b97f4a7c15ull;

M2_HOST_DEVICE inline uint64_t splitmix64_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The 8 random bytes (as one word, element 8k + j in byte j) of FP8 elements
// [8k, 8k + 8) of chunk `chunk`, k counted from the chunk's start.
M2_HOST_DEVICE inline uint64_t dummy_fp8_word(uint64_t tensor_seed, int64_t chunk, int64_t k) {
  const uint64_t s0 = tensor_seed ^ (kDummyChunkMix * static_cast<uint64_t>(chunk + 1));
  return splitmix64_mix(s0 + static_cast<uint64_t>(k + 1) * kSplitmixGolden);
}

// The table index (0..255) of element `i` of an FP8 dummy tensor.
M2_HOST_DEVICE inline uint32_t dummy_fp8_index(uint64_t tensor_seed, int64_t i) {
  const int64_t chunk = i / kDummyChunk, o = i - chunk * kDummyChunk;
  return static_cast<uint32_t>(dummy_fp8_word(tensor_seed, chunk, o / 8) >> (8 * (o % 8))) & 0xffu;
}

// The code table: index i -> e4m3 code of (i + 0.5) / 256 * 128 - 64.
struct DummyFp8Table {
  uint8_t code[256];
};
DummyFp8Table dummy_fp8_table();

}  // namespace m2
