// The causal rule (the contract: docs/semantics.md), for kernels whose push-constant block `pc` has seq_q and seq_k.
#ifndef VKATTN_CAUSAL_GLSL
#define VKATTN_CAUSAL_GLSL

// The keys of the current sequence: the call's seq_k, or a kernel's own per-sequence count (the fused
// kernels' paged calls: attention_common.glsl defines SEQ_K before including this file).
#ifndef SEQ_K
#define SEQ_K pc.seq_k
#endif
// And its queries (a packed sequence's own count in the fused kernels' varlen calls).
#ifndef SEQ_Q
#define SEQ_Q pc.seq_q
#endif

// One past the last key visible to query row i under the causal rule, clamped to [0, seq_k]:
// bottom-right, i + 1 + seq_k - seq_q. Counted in uint without passing through a sum that can wrap:
// in int32, i + 1 + seq_k overflowed for a paged sequence of near 2^31 keys (its length comes from
// the device's cache_lens, up to the table's capacity) and hid every key of the row.
uint causal_key_end(uint causal, uint i) {
  if (causal == CAUSAL_TOP_LEFT) return min(i + 1u, SEQ_K);  // (a row index is below 2^32 - 1)
  if (causal == CAUSAL_BOTTOM_RIGHT) {
    const uint later = SEQ_Q - min(i + 1u, SEQ_Q);  // the sequence's rows after row i (0 past its last)
    return SEQ_K - min(later, SEQ_K);
  }
  return SEQ_K;
}

#endif
