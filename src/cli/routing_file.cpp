#include "cli/routing_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>

namespace m2::cli {

Result<std::vector<int32_t>> read_routing_file(const std::string& path, int64_t per_row) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) return errorf("--routing-replay {}: cannot open: {}", path, std::strerror(errno));
  const int64_t bytes = static_cast<int64_t>(f.tellg());
  if (bytes % (per_row * 4) != 0)
    return errorf("--routing-replay {}: {} bytes is not rows of {} int32 ids (layers x top_k)", path, bytes, per_row);
  std::vector<int32_t> ids(static_cast<size_t>(bytes / 4));
  f.seekg(0);
  if (!f.read(reinterpret_cast<char*>(ids.data()), bytes)) return errorf("--routing-replay {}: read failed", path);
  return ids;
}

Status write_routing_file(const std::string& path, const std::vector<int32_t>& ids) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f.write(reinterpret_cast<const char*>(ids.data()), static_cast<std::streamsize>(ids.size() * 4)) || !f.flush())
    return errorf("--routing-capture {}: cannot write: {}", path, std::strerror(errno));
  return {};
}

}  // namespace m2::cli
