#include "server/thinking_signature.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <fcntl.h>
#include <openssl/sha.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

#include "util/log.h"

namespace m2::server {

ThinkingSigner::ThinkingSigner() {
  if (RAND_bytes(key_.data(), static_cast<int>(key_.size())) != 1) {
    log_error("thinking signatures: the random generator failed");
    std::abort();
  }
}

Result<ThinkingSigner> ThinkingSigner::from_key_file(const std::string& path) {
  constexpr size_t kMinKeyBytes = 32;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) return errorf("--thinking-key-file {}: {}", path, std::strerror(errno));
    unsigned char fresh[kMinKeyBytes];
    if (RAND_bytes(fresh, static_cast<int>(sizeof fresh)) != 1)
      return errorf("--thinking-key-file {}: the random generator failed", path);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd < 0) return errorf("--thinking-key-file {}: cannot create it: {}", path, std::strerror(errno));
    const ssize_t n = ::write(fd, fresh, sizeof fresh);
    const bool ok = n == static_cast<ssize_t>(sizeof fresh) && ::fsync(fd) == 0;
    ::close(fd);
    if (!ok) return errorf("--thinking-key-file {}: writing the new key failed", path);
    log_info("--thinking-key-file {}: created with a new random key", path);
  } else if (!S_ISREG(st.st_mode)) {
    return errorf("--thinking-key-file {}: not a regular file", path);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return errorf("--thinking-key-file {}: cannot be read", path);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < kMinKeyBytes)
    return errorf("--thinking-key-file {}: {} bytes; a key needs at least {}", path, bytes.size(), kMinKeyBytes);
  ThinkingSigner s;
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), s.key_.data());
  return s;
}

std::string ThinkingSigner::sign(std::string_view thinking) const {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_len = 0;
  HMAC(EVP_sha256(), key_.data(), static_cast<int>(key_.size()),
       reinterpret_cast<const unsigned char*>(thinking.data()), thinking.size(), mac, &mac_len);
  std::string out(4 * ((mac_len + 2) / 3), '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), mac, static_cast<int>(mac_len));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::string ThinkingSigner::seal(std::string_view text) const {
  std::string out(4 * ((text.size() + 2) / 3), '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  out.resize(static_cast<size_t>(n));
  return out + "." + sign(text);
}

std::optional<std::string> ThinkingSigner::unseal(std::string_view sealed) const {
  const size_t dot = sealed.rfind('.');
  if (dot == std::string_view::npos || dot % 4 != 0 || dot > (1u << 30)) return std::nullopt;
  std::string text(dot / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(text.data()),
                                reinterpret_cast<const unsigned char*>(sealed.data()), static_cast<int>(dot));
  if (n < 0) return std::nullopt;
  // EVP_DecodeBlock counts the padding's zero bytes: drop one per '='.
  size_t len = static_cast<size_t>(n);
  for (size_t i = dot; i > 0 && sealed[i - 1] == '=' && len > 0; --i) --len;
  text.resize(len);
  if (!verify(text, sealed.substr(dot + 1))) return std::nullopt;
  return text;
}

bool ThinkingSigner::verify(std::string_view thinking, std::string_view signature) const {
  const std::string expected = sign(thinking);
  return signature.size() == expected.size() && CRYPTO_memcmp(signature.data(), expected.data(), expected.size()) == 0;
}

}  // namespace m2::server
