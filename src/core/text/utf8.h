// core/text/utf8.h — UTF-8 checked, read and written, for the tokenizers of models/text.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace qkv::utf8 {

// RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF. Otherwise a qkv::Error that
// starts with `what` and names the first bad byte and its offset.
void validate(std::string_view text, const std::string& what = "text");

// The code point at byte `i` of valid UTF-8; advances i past it.
char32_t next(std::string_view text, std::size_t& i);

// Appends the UTF-8 of a code point (≤ U+10FFFF, not a surrogate).
void append(std::string& out, char32_t cp);

}  // namespace qkv::utf8
