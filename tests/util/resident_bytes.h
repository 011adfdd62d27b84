// Test helper: how many bytes of a mapping are in this process's resident
// set, from /proc/self/smaps (the mapping that starts at `start`). Not
// mincore(): for a file mapping it reports the page cache, which a released
// range may stay in, not the process's own pages.
#pragma once

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

namespace m2::test {

// -1 when there is no such mapping (or no /proc).
inline int64_t resident_bytes(const void* start) {
  std::ifstream smaps("/proc/self/smaps");
  const auto want = reinterpret_cast<uintptr_t>(start);
  std::string line;
  bool in_mapping = false;
  while (std::getline(smaps, line)) {
    unsigned long long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx ", &lo, &hi) == 2 && line.find(':') > line.find(' ')) {
      in_mapping = lo == want;
      continue;
    }
    long long kb = 0;
    if (in_mapping && std::sscanf(line.c_str(), "Rss: %lld kB", &kb) == 1) return kb * 1024;
  }
  return -1;
}

}  // namespace m2::test
