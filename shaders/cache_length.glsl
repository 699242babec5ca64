// A paged cache's length as every kernel reads it (docs/semantics.md, "Paged KV cache"): the value
// in cache_lens, unchecked on the host, clamped into [0, capacity - seq_new], so that the seq_new
// tokens appended before the call follow it inside the table and no value (INT32_MIN, INT32_MAX)
// wraps or reaches past it. Sequence b's keys are this plus seq_new; the append writes from it.
#ifndef VKATTN_CACHE_LENGTH_GLSL
#define VKATTN_CACHE_LENGTH_GLSL

// (seq_new <= capacity, both within int32: the host's checks.)
uint clamped_cache_length(int cache_len, uint capacity, uint seq_new) {
  return uint(clamp(cache_len, 0, int(capacity - seq_new)));
}

#endif
