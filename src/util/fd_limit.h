// The process's file-descriptor limit (RLIMIT_NOFILE). Every connection of
// the server holds one, so the soft limit (often 1024) is raised to the hard
// one at start, as any server of many connections does, and the connection
// cap is kept below it.
#pragma once

#include <cstdint>

namespace m2 {

struct FdLimit {
  uint64_t before = 0;  // the soft limit found
  uint64_t soft = 0;    // the soft limit now
  uint64_t hard = 0;
};

// Raises the soft limit to the hard limit (a no-op when they are equal, or
// when the system refuses; `soft` then says what is in force).
FdLimit raise_fd_limit();

}  // namespace m2
