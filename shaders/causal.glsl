// The causal rule (the contract: README.md, "Semantics"), for kernels whose push-constant block `pc` has seq_q and seq_k.
#ifndef VKATTN_CAUSAL_GLSL
#define VKATTN_CAUSAL_GLSL

// One past the last key visible to query row i under the causal rule, clamped to [0, seq_k].
uint causal_key_end(uint causal, uint i) {
  int end = int(pc.seq_k);
  if (causal == CAUSAL_TOP_LEFT) end = int(i) + 1;
  if (causal == CAUSAL_BOTTOM_RIGHT) end = int(i) + 1 + int(pc.seq_k) - int(pc.seq_q);
  return uint(clamp(end, 0, int(pc.seq_k)));
}

#endif
