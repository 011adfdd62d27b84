// Test helper: writes safetensors files (well-formed or deliberately broken).
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace m2::test {

struct StTensor {
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

inline size_t st_elem_size(const std::string& dtype) {
  if (dtype == "F32" || dtype == "I32") return 4;
  if (dtype == "BF16" || dtype == "F16") return 2;
  if (dtype == "I64") return 8;
  return 1;
}

inline StTensor st_zeros(const std::string& dtype, std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return {dtype, shape, std::vector<uint8_t>(n * st_elem_size(dtype), 0)};
}

// Header JSON + data laid out back to back in name order, like the official writer.
inline std::string st_header(const std::map<std::string, StTensor>& tensors, std::string* data) {
  nlohmann::ordered_json h;
  h["__metadata__"] = {{"format", "pt"}};
  uint64_t off = 0;
  for (const auto& [name, t] : tensors) {
    h[name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {off, off + t.bytes.size()}}};
    data->append(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
    off += t.bytes.size();
  }
  std::string s = h.dump();
  while (s.size() % 8) s.push_back(' ');
  return s;
}

inline void st_write_raw(const std::string& path, const std::string& header, const std::string& data,
                         uint64_t declared_len) {
  std::ofstream out(path, std::ios::binary);
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((declared_len >> (8 * i)) & 0xff));
  out << header << data;
}

inline void st_write(const std::string& path, const std::map<std::string, StTensor>& tensors) {
  std::string data;
  const std::string header = st_header(tensors, &data);
  st_write_raw(path, header, data, header.size());
}

// A fresh empty directory under the system temp dir.
inline std::string temp_dir(const std::string& name) {
  auto p = std::filesystem::temp_directory_path() / ("m2cpp_test_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p.string();
}

}  // namespace m2::test
