#include "server/thinking_signature.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstdlib>

#include "util/log.h"

namespace m2::server {

ThinkingSigner::ThinkingSigner() {
  if (RAND_bytes(key_.data(), static_cast<int>(key_.size())) != 1) {
    log_error("thinking signatures: the random generator failed");
    std::abort();
  }
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

bool ThinkingSigner::verify(std::string_view thinking, std::string_view signature) const {
  const std::string expected = sign(thinking);
  return signature.size() == expected.size() && CRYPTO_memcmp(signature.data(), expected.data(), expected.size()) == 0;
}

}  // namespace m2::server
