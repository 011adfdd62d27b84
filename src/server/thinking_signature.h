// Signatures of Anthropic thinking blocks: HMAC-SHA256 of the block's text
// under a server key, base64-encoded. A block that comes back in a
// conversation must carry the signature of its exact text, so a client
// cannot put words in the model's reasoning (the template feeds that
// reasoning back to the model). The key is drawn at random when the server
// starts (a restart then refuses the blocks an older process signed) or read
// from a key file (--thinking-key-file), which survives restarts and can be
// shared by the replicas behind one endpoint.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

#include "util/status.h"

namespace m2::server {

class ThinkingSigner {
 public:
  ThinkingSigner();  // a fresh random key (OpenSSL's RAND_bytes; aborts if the generator fails)
  // The key of `path`: the SHA-256 of its bytes (at least 32 of them). A
  // path that does not exist is created (mode 0600) with 32 random bytes, so
  // a restarted server finds the same key. Errors name the file.
  static Result<ThinkingSigner> from_key_file(const std::string& path);
  std::string sign(std::string_view thinking) const;
  // Constant-time comparison of `signature` with sign(thinking).
  bool verify(std::string_view thinking, std::string_view signature) const;

  // The Responses API's `encrypted_content` of a reasoning item: the text
  // base64-encoded and signed ("<base64>.<signature>"), so that a client
  // that keeps no store (Codex runs with store: false) can send the
  // reasoning back opaquely and unaltered. Not secret: the same text is in
  // the item's content.
  std::string seal(std::string_view text) const;
  // The text of a seal() of this server's, or nullopt (not one, or altered).
  std::optional<std::string> unseal(std::string_view sealed) const;

 private:
  std::array<unsigned char, 32> key_{};
};

}  // namespace m2::server
