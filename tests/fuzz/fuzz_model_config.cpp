// libFuzzer harness: config.json as the loader reads it (util/json.h's
// parser, then io/model_config.h's checks). Input: the file's bytes.
//
// Property: a config is refused with a Status or accepted with the shapes
// the model code divides and allocates by being positive (a zero or
// negative head count or size would divide by zero or allocate a negative
// size later, far from the field's name).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_check.h"
#include "io/model_config.h"
#include "util/json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto json = m2::parse_json(text, "config.json");
  if (!json.ok()) return 0;
  auto config = m2::parse_model_config(*json, "config.json");
  if (!config.ok()) return 0;
  const m2::ModelConfig& c = *config;
  FUZZ_CHECK(c.vocab_size > 0 && c.hidden_size > 0 && c.intermediate_size > 0 && c.num_hidden_layers > 0,
             "accepted sizes vocab %d hidden %d intermediate %d layers %d", c.vocab_size, c.hidden_size,
             c.intermediate_size, c.num_hidden_layers);
  FUZZ_CHECK(c.num_attention_heads > 0 && c.num_key_value_heads > 0 && c.head_dim > 0,
             "accepted heads %d / %d of dim %d", c.num_attention_heads, c.num_key_value_heads, c.head_dim);
  FUZZ_CHECK(c.num_attention_heads % c.num_key_value_heads == 0, "%d query heads over %d kv heads",
             c.num_attention_heads, c.num_key_value_heads);
  return 0;
}
