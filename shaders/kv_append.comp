#version 450
// Appends new tokens to a paged KV cache (vkattn/kv_cache.hpp): element (b, g, t, d) of k_new and
// v_new (batch, kv_heads, seq_new, dim) is written, unchanged (same storage type), to token
// t' = cache_lens[b] + t of sequence b: row t' % page_size of page block_table[b][t' / page_size], head g,
// in the caches (num_pages, page_size, kv_heads, dim). The attention dispatches that follow (after a
// barrier, in the same recorded work) see sequence b as cache_lens[b] + seq_new keys long.
// One invocation per (d, t, b * kv_heads + g): x over the larger dim, y over the new tokens, z over
// batch x KV heads. No loop, so lavapipe's loop limit does not apply. A token whose position falls
// past the table's capacity or whose page entry lies outside [0, num_pages) is not written: bad values
// (the host checks them when it has them) never write out of bounds.

#extension GL_EXT_control_flow_attributes : enable
#include "storage_types.glsl"
#include "shader_abi.h"

layout(local_size_x = 64) in;
layout(push_constant) uniform KvAppendPush { KV_APPEND_PUSH_MEMBERS } pc;

layout(binding = 0) readonly buffer KNewBuf { STORAGE_T k_new[]; };
layout(binding = 1) readonly buffer VNewBuf { STORAGE_T v_new[]; };
layout(binding = 2) writeonly buffer KCacheBuf { STORAGE_T k_cache[]; };
layout(binding = 3) writeonly buffer VCacheBuf { STORAGE_T v_cache[]; };
layout(binding = 4) readonly buffer BlockTableBuf { int block_table[]; };
layout(binding = 5) readonly buffer CacheLensBuf { int cache_lens[]; };

void main() {
  const uint d = gl_GlobalInvocationID.x, t = gl_GlobalInvocationID.y;
  const uint b = gl_GlobalInvocationID.z / pc.kv_heads, g = gl_GlobalInvocationID.z % pc.kv_heads;
  if (t >= pc.seq_new || b >= pc.batch || (d >= pc.dim_qk && d >= pc.dim_v)) return;
  const int len = cache_lens[pc.lens_off + b];
  const int token = len + int(t);
  if (len < 0 || token >= int(pc.max_pages * pc.page_size)) return;
  const int page = block_table[pc.bt_off + b * pc.max_pages + uint(token) / pc.page_size];
  if (page < 0 || page >= int(pc.num_pages)) return;
  const uint slot = uint(page) * pc.page_size + uint(token) % pc.page_size;
  if (d < pc.dim_qk)
    k_cache[pc.kc_off + (slot * pc.kv_heads + g) * pc.dim_qk + d] =
        k_new[pc.kn_off + b * pc.kn_sb + g * pc.kn_sh + t * pc.kn_ss + d];
  if (d < pc.dim_v)
    v_cache[pc.vc_off + (slot * pc.kv_heads + g) * pc.dim_v + d] =
        v_new[pc.vn_off + b * pc.vn_sb + g * pc.vn_sh + t * pc.vn_ss + d];
}
