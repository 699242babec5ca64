// The causal rule (the contract: README.md, "Semantics"), for kernels whose push-constant block `pc` has seq_q and seq_k.
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

// One past the last key visible to query row i under the causal rule, clamped to [0, seq_k].
uint causal_key_end(uint causal, uint i) {
  int end = int(SEQ_K);
  if (causal == CAUSAL_TOP_LEFT) end = int(i) + 1;
  if (causal == CAUSAL_BOTTOM_RIGHT) end = int(i) + 1 + int(SEQ_K) - int(SEQ_Q);
  return uint(clamp(end, 0, int(SEQ_K)));
}

#endif
