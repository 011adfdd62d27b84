#include "util/fd_limit.h"

#include <sys/resource.h>

namespace m2 {

FdLimit raise_fd_limit() {
  FdLimit out;
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return out;
  out.before = out.soft = rl.rlim_cur;
  out.hard = rl.rlim_max;
  // An unlimited hard limit still has the kernel's nr_open above it (1 Mi by default).
  const rlim_t target = rl.rlim_max == RLIM_INFINITY ? rlim_t{1} << 20 : rl.rlim_max;
  if (rl.rlim_cur < target) {
    rlimit raised = rl;
    raised.rlim_cur = target;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) out.soft = raised.rlim_cur;
  }
  return out;
}

}  // namespace m2
