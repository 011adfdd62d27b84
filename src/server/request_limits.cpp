#include "server/request_limits.h"

#include <algorithm>
#include <vector>
#include <fmt/format.h>

namespace m2::server {

bool BodyBudget::try_add(size_t bytes) {
  size_t used = used_.load();
  do {
    if (bytes > limit_ || used > limit_ - bytes) return false;
  } while (!used_.compare_exchange_weak(used, used + bytes));
  return true;
}

bool BodyReservation::grow_to(size_t total) {
  if (total <= held_) return true;
  if (!budget_.try_add(total - held_)) return false;
  held_ = total;
  return true;
}

ClientRateLimiter::ClientRateLimiter(double rate, double burst, size_t max_clients)
    : rate_(rate), burst_(std::max(1.0, burst)), max_clients_(std::max<size_t>(1, max_clients)) {}

double ClientRateLimiter::admit(const std::string& client, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = buckets_.find(client);
  if (it == buckets_.end()) {
    if (buckets_.size() >= max_clients_) evict(now);
    it = buckets_.emplace(client, Bucket{burst_, now}).first;
  }
  Bucket& b = it->second;
  const double elapsed = std::chrono::duration<double>(now - b.last).count();
  b.tokens = std::min(burst_, b.tokens + std::max(0.0, elapsed) * rate_);
  b.last = std::max(b.last, now);
  if (b.tokens >= 1.0) {
    b.tokens -= 1.0;
    return 0.0;
  }
  return (1.0 - b.tokens) / rate_;
}

// A bucket refilled to the burst is the same as no bucket: forget those. If
// every client is active, the half seen longest ago goes (they may then get
// fresh buckets: a flood of addresses costs precision, never memory), in one
// pass, so that the scan is paid once per max_clients / 2 new clients.
void ClientRateLimiter::evict(Clock::time_point now) {
  const auto refill = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(burst_ / rate_));
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    if (now - it->second.last >= refill) it = buckets_.erase(it);
    else ++it;
  }
  if (buckets_.size() < max_clients_) return;
  std::vector<Clock::time_point> seen;
  seen.reserve(buckets_.size());
  for (const auto& [client, b] : buckets_) seen.push_back(b.last);
  auto median = seen.begin() + static_cast<std::ptrdiff_t>(seen.size() / 2);
  std::nth_element(seen.begin(), median, seen.end());
  const Clock::time_point cut = *median;
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    if (it->second.last <= cut) it = buckets_.erase(it);
    else ++it;
  }
}

size_t ClientRateLimiter::clients() const {
  std::lock_guard<std::mutex> lock(mu_);
  return buckets_.size();
}

bool RateLimitedLog::due() {
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  if (now - last_ < std::chrono::seconds(1)) {
    ++suppressed_;
    return false;
  }
  last_ = now;
  reported_ = suppressed_;
  suppressed_ = 0;
  return true;
}

std::string RateLimitedLog::suppressed_note() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reported_ ? fmt::format(" ({} more since the last line)", reported_) : std::string();
}

}  // namespace m2::server
