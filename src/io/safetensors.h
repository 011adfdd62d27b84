// safetensors reader: memory-mapped, zero-copy, validated.
//
// File layout: u64 little-endian header length N, N bytes of JSON header
// {"__metadata__": {str: str}, NAME: {"dtype", "shape", "data_offsets": [b, e]}},
// then the data area; offsets are relative to the data area. Everything a
// truncated or hostile file can get wrong is checked when the file is opened
// (header length, JSON, dtypes, shapes, offsets in bounds, byte lengths =
// shape x dtype, no overlaps, no gaps, no duplicate names), and every error
// names the file and the tensor.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tensor/tensor_view.h"
#include "util/mapped_file.h"
#include "util/status.h"

namespace m2 {

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  uint64_t offset = 0;  // absolute byte offset in the file
  uint64_t nbytes = 0;
};

class SafetensorsFile {
 public:
  // Largest header accepted (the reference implementation's limit).
  static constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

  static Result<std::unique_ptr<SafetensorsFile>> open(const std::string& path);

  const std::string& path() const { return file_->path(); }
  const std::map<std::string, SafetensorsEntry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const SafetensorsEntry* find(const std::string& name) const;
  TensorView view(const SafetensorsEntry& e) const;
  const MappedFile& mapped() const { return *file_; }

 private:
  std::unique_ptr<MappedFile> file_;
  std::map<std::string, SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

// Validates a header already in memory (exposed for tests and fuzzing).
// `data_size` is the size of the data area that follows the header.
Status parse_safetensors_header(std::string_view header, uint64_t data_size,
                                uint64_t data_start, const std::string& path,
                                std::map<std::string, SafetensorsEntry>* entries,
                                std::map<std::string, std::string>* metadata);

// Where a tensor's bytes lie: shard `file` of its checkpoint, at `offset`.
struct CheckpointLocation {
  size_t file = 0;
  uint64_t offset = 0;
};

// A checkpoint directory: `model.safetensors.index.json` + its shards, or a
// single `model.safetensors`. Tensor names are unique across shards. Shards
// are numbered in file-name order (model-00000-of-N first), which is the
// order a reader streaming the checkpoint walks them in.
class Checkpoint {
 public:
  static Result<std::unique_ptr<Checkpoint>> open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  bool has(const std::string& name) const { return index_.count(name) != 0; }
  // The tensor, or an error naming it and the checkpoint.
  Result<TensorView> get(const std::string& name) const;
  const SafetensorsEntry* entry(const std::string& name) const;
  // Which shard holds `name` (file path), for messages.
  std::string file_of(const std::string& name) const;
  std::vector<std::string> names() const;
  size_t num_files() const { return files_.size(); }
  const SafetensorsFile& file(size_t i) const { return *files_[i]; }
  // The shard and byte offset of `data` (a view's bytes); nullopt when it is
  // not inside this checkpoint's mappings.
  std::optional<CheckpointLocation> locate(const void* data) const;
  uint64_t total_bytes() const;

 private:
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, std::pair<size_t, const SafetensorsEntry*>> index_;
};

}  // namespace m2
