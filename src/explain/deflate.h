// explain/deflate.h — the deflate compressed data format (RFC 1951,
// https://www.rfc-editor.org/rfc/rfc1951) written by qkv itself for the zlib stream of its PNG
// files: a greedy LZ77 matcher and the fixed Huffman codes only. The images are mostly flat
// colour, so most of the gain is in the matches (a run of 258 equal bytes costs 13 bits): the
// 1.1 MB of a model grid's scanlines become 48 KB. Dynamic codes (BTYPE 10) would take another
// fifth or so off (zlib -9 with dynamic codes: 35 KB on the same scanlines), for a code-length
// encoder and a second page of tests.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace qkv::explain {

// The largest payload of one stored deflate block (RFC 1951 §3.2.4: LEN is 16 bits). deflate()
// cuts its input into blocks of this many bytes, stored or fixed-Huffman coded alike.
inline constexpr int64_t kMaxStoredBlock = 65535;

// The raw deflate stream of `bytes` (no zlib header or trailer): one block per kMaxStoredBlock
// bytes of input (one empty block for empty input), the last with BFINAL set. Each block is
// coded with the fixed Huffman codes (BTYPE 01, §3.2.6) over greedy LZ77 matches (lengths
// 3 .. 258, distances 1 .. 32768, §3.2.5), except where the stored block (BTYPE 00, §3.2.4) of
// the same bytes would be no longer (random bytes: a fixed code spends 8.44 bits on an average
// literal). Matches may reach back into earlier blocks but never past the end of their own.
// Time is linear in the input: the hash chains are searched to a bounded depth.
std::string deflate(std::string_view bytes);

}  // namespace qkv::explain
