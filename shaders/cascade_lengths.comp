#version 450
// Cascade attention, step 1 (runtime/paged_cascade.cpp): the key lengths of its two passes, from the
// call's cache lengths. The suffix pass reads sequence b's own pages, so its length is the cache
// length less the shared prefix; the prefix pass's rows (one per KV head) each read the whole prefix.
// A cache length is clamped by the attention kernels' rule (vkattn/kv_cache.hpp) first, and up to
// the prefix: a bad value reads wrong keys, never out of bounds (the int32 range included).
#include "shader_abi.h"

layout(local_size_x = 64) in;
layout(push_constant) uniform CascadeLengthsPush { CASCADE_LENGTHS_PUSH_MEMBERS } pc;
layout(binding = CASCADE_LENGTHS_IN_BINDING) readonly buffer CacheLens { int cache_lens[]; };
layout(binding = CASCADE_LENGTHS_OUT_BINDING) writeonly buffer PassLens { int pass_lens[]; };

void main() {
  const uint b = gl_GlobalInvocationID.x;
  if (b < pc.batch) {
    const int len = clamp(cache_lens[pc.in_off + b], int(pc.prefix_tokens), int(pc.capacity - pc.seq_new));
    pass_lens[pc.out_off + b] = len - int(pc.prefix_tokens);
  } else if (b < pc.batch + pc.kv_heads) {
    pass_lens[pc.out_off + b] = int(pc.prefix_tokens);
  }
}
