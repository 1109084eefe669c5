// models/text/specials.h — step 1 of both GGUF tokenizers (bpe.h, spm.h): the control and
// user-defined tokens written in a text stay whole, the leftmost first and, of those that start at
// the same byte, the longest (Hugging Face's added tokens, llama.cpp's special-token partition);
// the stretches between them go on to the tokenizer's own steps.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace qkv {

// Calls plain(stretch) for each stretch of `text` between special tokens (empty ones included,
// as both tokenizers' steps expect) and special(id) for each special token, in order. `specials`
// are token ids, longest text first; first[b] says whether some special's text starts with byte b.
void split_at_specials(std::string_view text, const std::vector<std::string>& tokens,
                       const std::vector<int32_t>& specials, const bool (&first)[256],
                       const std::function<void(std::string_view)>& plain,
                       const std::function<void(int32_t)>& special);

}  // namespace qkv
