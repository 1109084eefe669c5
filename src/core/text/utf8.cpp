// UTF-8 for the tokenizers (utf8.h).
#include "core/text/utf8.h"

#include <cstdio>

#include "qkv/tensor.h"

namespace qkv::utf8 {

void validate(std::string_view text, const std::string& what) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  auto fail = [&](std::size_t at, const char* why) {
    char msg[128];
    std::snprintf(msg, sizeof msg, " is not valid UTF-8: byte 0x%02x at offset %zu (%s)", s[at], at,
                  why);
    throw Error(what + msg);
  };
  for (std::size_t i = 0; i < n;) {
    const unsigned char b = s[i];
    if (b < 0x80) {
      ++i;
      continue;
    }
    if (b < 0xC0) fail(i, "a continuation byte without a lead byte");
    if (b < 0xC2) fail(i, "an overlong encoding");
    if (b > 0xF4) fail(i, "not a UTF-8 lead byte");
    const std::size_t len = b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    for (std::size_t k = 1; k < len; ++k) {
      if (i + k >= n) fail(i, "a sequence cut short by the end of the text");
      if ((s[i + k] & 0xC0) != 0x80) fail(i, "a sequence cut short by a byte that is not 10xxxxxx");
    }
    const unsigned char b1 = s[i + 1];
    if ((b == 0xE0 && b1 < 0xA0) || (b == 0xF0 && b1 < 0x90)) fail(i, "an overlong encoding");
    if (b == 0xED && b1 >= 0xA0) fail(i, "a surrogate, U+D800 to U+DFFF");
    if (b == 0xF4 && b1 >= 0x90) fail(i, "a code point above U+10FFFF");
    i += len;
  }
}

char32_t next(std::string_view text, std::size_t& i) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  if (s[i] < 0x80) return s[i++];
  const int length = s[i] < 0xE0 ? 2 : s[i] < 0xF0 ? 3 : 4;
  char32_t cp = s[i] & (0x7F >> length);  // the lead byte's payload: 5, 4 or 3 bits
  for (int k = 1; k < length; ++k) cp = cp << 6 | (s[i + k] & 0x3F);
  i += length;
  return cp;
}

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
    return;
  }
  const int length = cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
  constexpr unsigned char kLead[] = {0, 0, 0xC0, 0xE0, 0xF0};
  out += char(kLead[length] | cp >> 6 * (length - 1));
  for (int k = length - 2; k >= 0; --k) out += char(0x80 | (cp >> 6 * k & 0x3F));
}

}  // namespace qkv::utf8
