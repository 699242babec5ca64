#version 450
// Appends new tokens to a paged KV cache (vkattn/kv_cache.hpp): element (b, g, t, d) of k_new and
// v_new (batch, kv_heads, seq_new, dim) is written to token t' = cache_lens[b] + t of sequence b: row
// t' % page_size of page block_table[b][t' / page_size], head g, in the caches (num_pages, page_size,
// kv_heads, dim), or (num_pages, kv_heads, page_size, dim) for hnd pages. The attention dispatches that follow (after a barrier, in the same recorded work)
// see sequence b as cache_lens[b] + seq_new keys long. A cache row is kc_row (vc_row) elements: its dim,
// or a view's wider rows. write_v 0: k_new alone (V a view of K's rows, which K's write fills; the V
// bindings are then K's, and nothing is written through them).
//   - Caches of the call's dtype (KV_FORMAT_AS_Q): the values unchanged. One invocation per (d, t,
//     b * kv_heads + g): x over the larger dim.
//   - q8_0 caches (KV_FORMAT_Q8_0): each run of 32 elements quantized as quantize_q8_0 does
//     (q8_0_quantize.glsl) into its 34-byte block. One invocation per (block, t, b * kv_heads + g):
//     x over the larger dim's blocks. A block's bytes share a 32-bit word with its neighbour's at one
//     end (34 is not a multiple of 4): that half-word is written with atomicAnd/atomicOr on its own
//     bits, the words wholly inside the block with plain stores. The caches' push offsets are then in
//     16-bit units of their bindings.
// No loop (lavapipe's loop limit does not apply). Bad values (the host checks them when it has them)
// follow the rule the attention kernels read by (vkattn/kv_cache.hpp): cache_lens[b] is clamped into
// [0, capacity - seq_new] and a table entry into [0, num_pages), so the append lands on the tokens
// and pages the attention then reads, never out of bounds. The length is clamped before anything is
// added to it: INT32_MAX + t must not wrap.

#extension GL_EXT_control_flow_attributes : enable
#include "storage_types.glsl"
#include "shader_abi.h"
#include "q8_0_quantize.glsl"
#include "cache_length.glsl"

layout(local_size_x = 64) in;
layout(push_constant) uniform KvAppendPush { KV_APPEND_PUSH_MEMBERS } pc;
layout(constant_id = SPEC_KV_APPEND_FORMAT) const uint KV_FORMAT = KV_FORMAT_AS_Q;
const bool Q8_0 = KV_FORMAT == KV_FORMAT_Q8_0;

layout(binding = KV_APPEND_K_NEW_BINDING) readonly buffer KNewBuf { STORAGE_T k_new[]; };
layout(binding = KV_APPEND_V_NEW_BINDING) readonly buffer VNewBuf { STORAGE_T v_new[]; };
layout(binding = KV_APPEND_K_CACHE_BINDING) writeonly buffer KCacheBuf { STORAGE_T k_cache[]; };
layout(binding = KV_APPEND_V_CACHE_BINDING) writeonly buffer VCacheBuf { STORAGE_T v_cache[]; };
layout(binding = KV_APPEND_K_CACHE_BINDING) buffer KCacheWords { uint k_words[]; };
layout(binding = KV_APPEND_V_CACHE_BINDING) buffer VCacheWords { uint v_words[]; };
layout(binding = KV_APPEND_BLOCK_TABLE_BINDING) readonly buffer BlockTableBuf { int block_table[]; };
layout(binding = KV_APPEND_CACHE_LENS_BINDING) readonly buffer CacheLensBuf { int cache_lens[]; };

// Writes the 16-bit `value` at halfword `h` of a word array: a whole-word store is not ours to make.
#define STORE_HALF(words, h, value)                                                  \
  {                                                                                  \
    const uint shift_ = ((h) & 1u) * 16u;                                            \
    atomicAnd(words[(h) >> 1u], ~(0xffffu << shift_));                               \
    atomicOr(words[(h) >> 1u], uint(value) << shift_);                               \
  }

// The q8_0 block of new elements [src, src + 32) of k_new or v_new, at halfword `dst` of the cache's
// words (a block is 17 halfwords: the scale, then 16 pairs of int8).
#define QUANTIZE_BLOCK(src_buf, words, src, dst)                                                   \
  {                                                                                                \
    float x[32];                                                                                   \
    float m = 0.0;                                                                                 \
    [[unroll]] for (uint i = 0u; i < 32u; ++i) x[i] = to_f32(src_buf[(src) + i]), m = max(m, abs(x[i])); \
    const uint d_bits = f16_bits_rne(div127_rne(m));                                               \
    const float d = unpackHalf2x16(d_bits).x;                                                      \
    uint halves[17];                                                                               \
    halves[0] = d_bits;                                                                            \
    [[unroll]] for (uint i = 0u; i < 16u; ++i) {                                                   \
      const int lo = d == 0.0 ? 0 : q8_0_level(x[2u * i], d);                                      \
      const int hi = d == 0.0 ? 0 : q8_0_level(x[2u * i + 1u], d);                                 \
      halves[i + 1u] = (uint(lo) & 0xffu) | ((uint(hi) & 0xffu) << 8u);                            \
    }                                                                                              \
    /* dst even: halves 0..15 fill 8 whole words, half 16 the low half of the next; dst odd: half 0 \
       the high half of its word, halves 1..16 8 whole words. */                                   \
    const uint first = (dst) & 1u;                                                                 \
    if (first == 0u) {                                                                             \
      [[unroll]] for (uint w = 0u; w < 8u; ++w) words[((dst) >> 1u) + w] = halves[2u * w] | (halves[2u * w + 1u] << 16u); \
      STORE_HALF(words, (dst) + 16u, halves[16]);                                                  \
    } else {                                                                                       \
      STORE_HALF(words, (dst), halves[0]);                                                         \
      [[unroll]] for (uint w = 0u; w < 8u; ++w)                                                    \
        words[((dst) >> 1u) + 1u + w] = halves[2u * w + 1u] | (halves[2u * w + 2u] << 16u);         \
    }                                                                                              \
  }

void main() {
  const uint x = gl_GlobalInvocationID.x, t = gl_GlobalInvocationID.y;
  const uint b = gl_GlobalInvocationID.z / pc.kv_heads, g = gl_GlobalInvocationID.z % pc.kv_heads;
  const uint d = Q8_0 ? x * 32u : x;  // the first element this invocation writes
  if (t >= pc.seq_new || b >= pc.batch || (d >= pc.dim_qk && d >= pc.dim_v)) return;
  // (capacity = max_pages * page_size >= seq_new, within int32: the host's checks; t < seq_new, so
  // the token is below the capacity.)
  const uint capacity = pc.max_pages * pc.page_size;
  const uint token = clamped_cache_length(cache_lens[pc.lens_off + b], capacity, pc.seq_new) + t;
  const uint page = uint(clamp(block_table[pc.bt_off + b * pc.max_pages + token / pc.page_size], 0, int(pc.num_pages) - 1));
  const uint row = page * pc.page_size * pc.kv_heads + (token % pc.page_size) * pc.slot_rows + g * pc.head_rows;
  const uint k_src = pc.kn_off + b * pc.kn_sb + g * pc.kn_sh + t * pc.kn_ss + d;
  const uint v_src = pc.vn_off + b * pc.vn_sb + g * pc.vn_sh + t * pc.vn_ss + d;
  const uint k_dst = row * pc.kc_row + d, v_dst = row * pc.vc_row + d;
  const bool write_v = pc.write_v != 0u && d < pc.dim_v;
  if (Q8_0) {
    if (d < pc.dim_qk) QUANTIZE_BLOCK(k_new, k_words, k_src, pc.kc_off + k_dst / 32u * 17u)
    if (write_v) QUANTIZE_BLOCK(v_new, v_words, v_src, pc.vc_off + v_dst / 32u * 17u)
  } else {
    if (d < pc.dim_qk) k_cache[pc.kc_off + k_dst] = k_new[k_src];
    if (write_v) v_cache[pc.vc_off + v_dst] = v_new[v_src];
  }
}
