// Shared pieces of the fused kernels; see flash_common.h.
#include "kernels/cpu/flash_common.h"

#include <cmath>

#include "kernels/cpu/qk_tile.h"
#include "kernels/cpu/vec_ops.h"
#include "qkv/threads.h"

namespace qkv::cpu::flash {

bool add_bias(const FlashProblem& p, const float* bias, int64_t j0, float* s, int64_t n) {
  if (p.bias_stride[3] == 1) return add_bias_row(s, bias + j0, n, 1.0f);
  bool overflow = false;
  for (int64_t j = 0; j < n; ++j) {
    const float b = bias_at(p, bias, j0 + j);
    s[j] = b == -kInf ? -kInf : s[j] + b;
    overflow = overflow || (b != -kInf && std::isinf(s[j]));
  }
  return overflow;
}

bool tile_flags(const FlashProblem& p, const float* k, int64_t ldk, const float* v, int64_t ldv,
                int64_t n, uint8_t* flags) {
  bool any = false;
  for (int64_t j = 0; j < n; ++j) {
    flags[j] = (all_finite_row(k + j * ldk, p.Dk) ? 0 : kBadKey) |
               (all_finite_row(v + j * ldv, p.Dv) ? 0 : kBadValue);
    any = any || flags[j] != 0;
  }
  return any;
}

TileRows clean_tile(const FlashProblem& p, TileRows in, int64_t n, const uint8_t* flags,
                    float* k_copy, float* v_copy) {
  for (int64_t j = 0; j < n; ++j) {
    float* kd = k_copy + j * p.Dk;
    float* vd = v_copy + j * p.Dv;
    // (`in` may be the copies themselves: precise_tile's.)
    if (flags[j] & kBadKey)
      std::fill(kd, kd + p.Dk, 0.0f);
    else if (in.k + j * in.ldk != kd)
      std::copy(in.k + j * in.ldk, in.k + j * in.ldk + p.Dk, kd);
    if (flags[j] & kBadValue)
      std::fill(vd, vd + p.Dv, 0.0f);
    else if (in.v + j * in.ldv != vd)
      std::copy(in.v + j * in.ldv, in.v + j * in.ldv + p.Dv, vd);
  }
  return {k_copy, p.Dk, v_copy, p.Dv};
}

TileRows precise_tile(const FlashProblem& p, TileRows in, int64_t n, float* k_copy, float* v_copy) {
  if (!in_bf16(p)) return in;
  for (int64_t j = 0; j < n; ++j) {
    round_bf16_floats(in.k + j * in.ldk, k_copy + j * p.Dk, p.Dk);
    round_bf16_floats(in.v + j * in.ldv, v_copy + j * p.Dv, p.Dv);
  }
  return {k_copy, p.Dk, v_copy, p.Dv};
}

PackedKv pack_kv(const FlashProblem& p, int64_t key_tile, int threads) {
  PackedKv pk;
  const int64_t groups = p.B * p.Hkv;
  pk.key_tile = key_tile;
  pk.tiles = (p.S + key_tile - 1) / key_tile;
  if (in_bf16(p)) {
    pk.kt16.resize(groups * pk.tiles * bf16_key_panel_elems(key_tile, p.Dk));
    pk.v16.resize(groups * bf16_value_panel_elems(p.S, p.Dv));
  } else {
    pk.kt.resize(groups * pk.tiles * key_tile * p.Dk);
    pk.v.resize(groups * p.S * p.Dv);
  }
  pk.flags.resize(groups * p.S);
  pk.tile_bad.resize(groups * pk.tiles);
  pk.key_norm.resize(groups * pk.tiles);
  parallel_for(groups * pk.tiles, threads, [&](int64_t item, int) {
    const int64_t group = item / pk.tiles, tile = item % pk.tiles;
    const int64_t b = group / p.Hkv, kv = group % p.Hkv;
    const int64_t j0 = tile * key_tile, n = std::min(key_tile, p.S - j0);
    TileRows t{row_of(p.k, b, kv, j0), p.k.stride[2], row_of(p.v, b, kv, j0), p.v.stride[2]};
    uint8_t* flags = pk.flags.data() + group * p.S + j0;
    AlignedBuffer<float> k_copy, v_copy;
    if (in_bf16(p)) {
      k_copy.resize(n * p.Dk), v_copy.resize(n * p.Dv);
      t = precise_tile(p, t, n, k_copy.data(), v_copy.data());
    }
    pk.tile_bad[item] = tile_flags(p, t.k, t.ldk, t.v, t.ldv, n, flags);
    if (pk.tile_bad[item]) {
      if (!in_bf16(p)) k_copy.resize(n * p.Dk), v_copy.resize(n * p.Dv);
      t = clean_tile(p, t, n, flags, k_copy.data(), v_copy.data());
    }
    float norm2 = 0;  // ∞ where a key is not finite or its square overflows
    for (int64_t j = 0; j < n; ++j)
      norm2 = std::max(norm2, dot_row(t.k + j * t.ldk, t.k + j * t.ldk, p.Dk));
    pk.key_norm[item] = pk.tile_bad[item] ? kInf : std::sqrt(norm2);
    if (in_bf16(p)) {  // the values are bf16 already: packing them rounds nothing more
      pack_keys_bf16(
          t.k, t.ldk, n, p.Dk,
          pk.kt16.data() + (group * pk.tiles + tile) * bf16_key_panel_elems(key_tile, p.Dk));
      pack_values_bf16(t.v, t.ldv, n, p.Dv,
                       pk.v16.data() + group * bf16_value_panel_elems(p.S, p.Dv), p.S, j0);
      return;
    }
    pack_keys(t.k, t.ldk, n, p.Dk, pk.tile_keys(p, group, tile));
    pack_values(t.v, t.ldv, n, p.Dv, pk.v.data() + group * p.S * p.Dv, p.S, j0);
  });
  return pk;
}

}  // namespace qkv::cpu::flash
