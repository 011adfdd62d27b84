// tokenizer.json post-processors, as far as they change the ids of one
// sequence encoded with add_special_tokens=true: TemplateProcessing (its
// "single" template), BertProcessing and RobertaProcessing ([cls] ids
// [sep]), ByteLevel (offsets only: no change), Sequence. Without
// add_special_tokens HF applies none of them.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "text/tokenizer/component_json.h"

namespace m2::text::tok {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  virtual void process(std::vector<int32_t>& ids) const = 0;
};

Result<std::unique_ptr<PostProcessor>> make_post_processor(const JsonNode& node);

}  // namespace m2::text::tok
