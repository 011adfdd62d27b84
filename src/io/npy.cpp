#include "io/npy.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <regex>

#include "util/json.h"

namespace m2 {

Status write_npy_f32(const std::string& path, const float* data, const std::vector<int64_t>& shape) {
  std::string dims;
  int64_t n = 1;
  for (int64_t d : shape) {
    dims += fmt::format("{}, ", d);
    n *= d;
  }
  if (shape.size() > 1) dims.resize(dims.size() - 2);  // (a, b) but (a,) for 1-D
  std::string header = fmt::format("{{'descr': '<f4', 'fortran_order': False, 'shape': ({}), }}", dims);
  // Magic (6) + version (2) + length (2) + header + '\n', padded to 64 bytes.
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::ofstream out(path, std::ios::binary);
  if (!out) return errorf("{}: cannot open for writing", path);
  const uint16_t len = static_cast<uint16_t>(header.size());
  out.write("\x93NUMPY\x01\x00", 8);
  out.put(static_cast<char>(len & 0xff));
  out.put(static_cast<char>(len >> 8));
  out << header;
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(n * sizeof(float)));
  if (!out) return errorf("{}: write failed", path);
  return Status();
}

Result<NpyArray> read_npy(const std::string& path) {
  M2_ASSIGN_OR_RETURN(std::string bytes, read_text_file(path));
  if (bytes.size() < 10 || std::memcmp(bytes.data(), "\x93NUMPY", 6) != 0)
    return errorf("{}: not a .npy file (bad magic)", path);
  const int major = static_cast<uint8_t>(bytes[6]);
  size_t hlen = 0, hstart = 0;
  if (major == 1) {
    hlen = static_cast<uint8_t>(bytes[8]) | (static_cast<uint8_t>(bytes[9]) << 8);
    hstart = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return errorf("{}: truncated header", path);
    for (int i = 3; i >= 0; --i) hlen = (hlen << 8) | static_cast<uint8_t>(bytes[8 + i]);
    hstart = 12;
  } else {
    return errorf("{}: unsupported .npy version {}", path, major);
  }
  if (hstart + hlen > bytes.size()) return errorf("{}: header runs past the end of the file", path);
  const std::string header = bytes.substr(hstart, hlen);
  std::smatch m;
  if (!std::regex_search(header, m, std::regex("'descr':\\s*'([<|=]?)([fi])([48])'")))
    return errorf("{}: unsupported dtype in header {}", path, header);
  if (m[1] == "=" ) return errorf("{}: native byte order arrays are not supported", path);
  const char kind = m[2].str()[0];
  const int width = std::stoi(m[3].str());
  if (header.find("'fortran_order': False") == std::string::npos)
    return errorf("{}: Fortran-order arrays are not supported", path);
  std::smatch sm;
  if (!std::regex_search(header, sm, std::regex("'shape':\\s*\\(([^)]*)\\)")))
    return errorf("{}: no shape in header", path);
  NpyArray a;
  int64_t n = 1;
  const std::string shape_str = sm[1].str();
  std::regex num("\\d+");
  for (auto it = std::sregex_iterator(shape_str.begin(), shape_str.end(), num); it != std::sregex_iterator(); ++it) {
    a.shape.push_back(std::stoll(it->str()));
    n *= a.shape.back();
  }
  const size_t data_start = hstart + hlen;
  if (bytes.size() - data_start != static_cast<size_t>(n) * width)
    return errorf("{}: {} data bytes for shape ({}) of {}-byte elements", path, bytes.size() - data_start,
                  shape_str, width);
  a.values.resize(n);
  const char* p = bytes.data() + data_start;
  for (int64_t i = 0; i < n; ++i, p += width) {
    if (kind == 'f' && width == 4) { float v; std::memcpy(&v, p, 4); a.values[i] = v; }
    else if (kind == 'f') { double v; std::memcpy(&v, p, 8); a.values[i] = v; }
    else if (width == 4) { int32_t v; std::memcpy(&v, p, 4); a.values[i] = v; }
    else { int64_t v; std::memcpy(&v, p, 8); a.values[i] = static_cast<double>(v); }
  }
  return a;
}

}  // namespace m2
