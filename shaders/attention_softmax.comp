#version 450
// The masked, numerically stable row softmax of the three-stage path, in place on the f32 scores
// S = scale·Q·Kᵀ written by gemm.comp:
//   P[j] = exp(s'_j - m) / l,  s'_j = modify(s_j) + bias_j for visible keys,  m = max s' (and the sink),
//   l = sum exp(s' - m) (+ exp(sink - m))
// (modify: the score modifiers, modify_score in modifiers.glsl; s'_j saturating to +-FLT_MAX: score.glsl)
// with the fused kernels' semantics (the contract: docs/semantics.md): a key is hidden by the
// causal rule, the window, key padding or an explicit mask (boolean false or float -inf) and then gets
// exactly 0, whatever its score (NaN from a NaN in K included); a row with no visible key gets all
// zeros and LSE -inf (the sink's logit where the head has one). P excludes the sink; LSE includes it. The max
// starts at M_INIT like the fused kernels, so NaN scores of visible keys propagate to the row.
// One workgroup per row; invocations stride over the keys; two passes: the max and the sum together
// (each invocation rescales its sum when its max grows, then the workgroup's are combined), then the
// weights, so an invocation loops about 2 * seq_k / WG times (the host checks lavapipe's limit). On a
// CPU device the row is read once less than with a pass for each (loads cost most there).
// The build with SOFTMAX_QUADS (attention_softmax_quads, CPU devices with shaderInt64) reads and
// writes P four floats at a time, as two 64-bit words: llvmpipe loads and stores a vector component
// by component (docs/devices.md), so a quad costs two where four floats cost four. It takes rows that
// start at multiples of 4 floats (seq_k % 4 == 0, the binding's element offset a multiple of 4: the
// host's chunk mask; elsewhere the plain build runs); each invocation then takes consecutive quads,
// and every element is judged as in the plain build (the same visible keys, the same order of the
// online max and sum within the invocation's elements).

#extension GL_EXT_control_flow_attributes : enable
#ifdef SOFTMAX_QUADS
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#endif

#include "softmax_push.glsl"

layout(local_size_x_id = SPEC_SOFTMAX_WORKGROUP) in;

layout(binding = SOFTMAX_SCORES_BINDING) buffer ScoresBuf { float p[]; };
#ifdef SOFTMAX_QUADS
layout(binding = SOFTMAX_SCORES_BINDING) buffer ScoresQuads { u64vec2 p4[]; };  // the same binding, by quads
const bool QUADS = true;
vec4 load_quad(uint q) {
  const u64vec2 w = p4[q];
  return vec4(uintBitsToFloat(uint(w.x)), uintBitsToFloat(uint(w.x >> 32)), uintBitsToFloat(uint(w.y)),
              uintBitsToFloat(uint(w.y >> 32)));
}
void store_quad(uint q, vec4 v) {
  const uvec4 u = floatBitsToUint(v);
  p4[q] = u64vec2(packUint2x32(u.xy), packUint2x32(u.zw));
}
#else
const bool QUADS = false;
vec4 load_quad(uint q) { return vec4(0.0); }
void store_quad(uint q, vec4 v) {}
#endif
layout(binding = SOFTMAX_LSE_BINDING) writeonly buffer LseBuf { float lse[]; };
layout(binding = SOFTMAX_MASK_BINDING) readonly buffer MaskBuf { uint mask_words[]; };
layout(binding = SOFTMAX_KV_LENGTHS_BINDING) readonly buffer KvLenBuf { int kv_lengths[]; };
// A packed variable-length batch (FLAG_VARLEN) has no mask and no key lengths: its offsets take those
// bindings, cu_seqlens_q (batch + 1 values from word m_off) and cu_seqlens_k (from kv_len_offset()).
layout(binding = SOFTMAX_MASK_BINDING) readonly buffer CuSeqlensQ { int cu_seqlens_q[]; };

// The current row's sequence: the call's, or one packed sequence's (set by main before any use).
uint row_seq_q, row_seq_k;
#define SEQ_Q row_seq_q
#define SEQ_K row_seq_k

#include "mask.glsl"
#include "causal.glsl"
#include "score.glsl"
#define MOD_KERNEL MOD_KERNEL_SOFTMAX
#include "modifiers.glsl"
#include "cache_length.glsl"

shared float reduction[gl_WorkGroupSize.x];

// The workgroup's max (op 0) or sum (op 1) of one value per invocation.
float workgroup_reduce(float value, uint op) {
  const uint tid = gl_LocalInvocationID.x;
  barrier();
  reduction[tid] = value;
  barrier();
  for (uint width = gl_WorkGroupSize.x / 2u; width > 0u; width /= 2u) {
    if (tid < width) {
      const float other = reduction[tid + width];
      reduction[tid] = op == 0u ? max(reduction[tid], other) : reduction[tid] + other;
    }
    barrier();
  }
  return reduction[0];
}

// Value `index` of cu_seqlens_q (which 0) or cu_seqlens_k (which 1), clamped into [0, total]: offsets
// that break the contract give wrong rows, never a read or write out of bounds.
uint packed_offset(uint which, uint index, uint total) {
  const int value = which == 0u ? cu_seqlens_q[pc.m_off + index] : kv_lengths[kv_len_offset() + index];
  return uint(clamp(value, 0, int(total)));
}

// The sequence that packed query row `i` belongs to: the last b with cu_seqlens_q[b] <= i, by
// bisection (about log2(batch) steps; a sequence with no queries is never chosen over the next one).
uint packed_sequence_of(uint i) {
  uint lo = 0u, hi = pc.varlen_batch - 1u;
  while (lo < hi) {
    const uint mid = (lo + hi + 1u) / 2u;
    if (packed_offset(0u, mid, pc.seq_q) <= i) lo = mid;
    else hi = mid - 1u;
  }
  return lo;
}

// Key j's score as the softmax sees it: the score modifiers on the raw score, then the float mask
// (modifiers.glsl, score.glsl); -inf for a key the explicit mask hides, whatever its score (NaN
// included). The mask is read again in each pass rather than stored: P holds only the raw scores
// until pass 3 overwrites them.
float visible_score(float raw, uint mask_kind, uint mask_row, float slope, uint i, uint j) {
  const float bias = mask_kind != MASK_NONE ? mask_bias(mask_kind, mask_row + j) : 0.0;
  if (bias == NEG_INF) return NEG_INF;
  return add_bias(modify_score(raw, slope, i, j), bias);
}

// Pass 1's step for one visible key's score s (NEG_INF: hidden by the explicit mask).
void accumulate(float s, inout float m, inout float l) {
  if (s != NEG_INF) {
    if (s > m) {
      l *= exp(m - s);
      m = s;
    }
    l += exp(s - m);
  }
}

void main() {
  const uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (row >= pc.rows) return;  // uniform per workgroup: barriers stay in uniform control flow
  const uint tid = gl_LocalInvocationID.x;
  const uint il = row % pc.chunk_rows;
  const uint hl = (row / pc.chunk_rows) % pc.chunk_heads;
  const uint bl = row / (pc.chunk_rows * pc.chunk_heads);
  const uint b = pc.b0 + bl, h = pc.h0 + hl, i = pc.i0 + il;
  const uint p_row = pc.p_off + row * pc.seq_k;

  // The row's problem: the call's, or in a packed batch its sequence's. There `i` becomes the row's
  // index inside its sequence, key j of the sequence is column first_key + j of the packed row of
  // scores, and the ALiBi slopes are indexed by sequence.
  row_seq_q = pc.seq_q;
  row_seq_k = pc.seq_k;
  uint i_seq = i, first_key = 0u, slope_batch = b;
  if ((pc.flags & FLAG_VARLEN) != 0u) {
    const uint sequence = packed_sequence_of(i);
    const uint q0 = packed_offset(0u, sequence, pc.seq_q);
    first_key = packed_offset(1u, sequence, pc.seq_k);
    row_seq_q = max(packed_offset(0u, sequence + 1u, pc.seq_q), q0) - q0;
    row_seq_k = max(packed_offset(1u, sequence + 1u, pc.seq_k), first_key) - first_key;
    i_seq = i - q0;
    slope_batch = sequence;
  }
  // A paged cache's sequence: its cache length (clamped, as the fused kernels' begin_sequence) plus
  // the appended tokens; the causal rule and the window align to it, and its keys end there.
  const bool cache_lengths = (pc.flags & FLAG_CACHE_LENGTHS) != 0u;
  if (cache_lengths) row_seq_k = clamped_cache_length(kv_lengths[kv_len_offset() + b], pc.seq_k, pc.seq_new) + pc.seq_new;
  const uint p_seq = p_row + first_key;  // the sequence's key 0 in P

  // The visible keys [key_begin, key_end) of the sequence: the window, causal and key padding. Keys
  // outside are never read (their scores may be NaN from NaN/Inf in hidden K rows) and get weight 0.
  const uint key_begin = HAS_WINDOW ? window_key_begin(i_seq) : 0u;
  uint key_end = causal_key_end(pc.flags & CAUSAL_MASK, i_seq);
  if (HAS_WINDOW) key_end = min(key_end, window_key_end(i_seq));
  if ((pc.flags & FLAG_KV_LENGTHS) != 0u && !cache_lengths)
    key_end = min(key_end, uint(clamp(kv_lengths[kv_len_offset() + b], 0, int(pc.seq_k))));
  const uint mask_kind = (pc.flags >> MASK_KIND_SHIFT) & 3u;
  const uint mask_row = pc.m_off + b * pc.m_sb + h * pc.m_sh + i * pc.m_ss;
  const float slope = HAS_ALIBI ? alibi_slope(slope_batch, h) : 0.0;

  // Pass 1: the max m of the visible, modified, biased scores and the sum l of exp(s - m), each
  // invocation's own, rescaled when its max grows. A NaN score is never the max (s > m is false) and
  // makes l NaN; a +inf score becomes the max and makes l NaN (exp(inf - inf)): the row is NaN, as
  // the fused kernels make it.
  float m = M_INIT, l = 0.0;
  if (QUADS) {
    // The quads that hold the visible keys; of each, only the elements in [key_begin, key_end).
    // (j wraps below the sequence's key 0, past key_end: never visible.)
    const uint q_end = key_begin < key_end ? (p_seq + key_end + 3u) / 4u : 0u;
    for (uint q = (p_seq + key_begin) / 4u + tid; q < q_end; q += gl_WorkGroupSize.x) {
      const vec4 raw = load_quad(q);
      [[unroll]] for (uint e = 0u; e < 4u; ++e) {
        const uint j = 4u * q + e - p_seq;
        if (j >= key_begin && j < key_end) accumulate(visible_score(raw[e], mask_kind, mask_row, slope, i_seq, j), m, l);
      }
    }
  } else {
    for (uint j = key_begin + tid; j < key_end; j += gl_WorkGroupSize.x)
      accumulate(visible_score(p[p_seq + j], mask_kind, mask_row, slope, i_seq, j), m, l);
  }
  // The workgroup's: m the largest, each sum rescaled to it (an invocation without visible keys has
  // l = 0 and adds 0).
  const float m_own = m;
  m = workgroup_reduce(m, 0u);
  l = workgroup_reduce(l * exp(m_own - m), 1u);

  // The sink joins the denominator (not P's keys): P_j = e^(s_j - m') / (e^(sink - m') + sum e^(s - m')),
  // and LSE includes it. A row with no visible key ends with l = 1, m = the sink: P = 0, LSE = the sink.
  add_head_sink(m, l, h);

  // Pass 3: the weights; l == 0 only when no key is visible (and no sink).
  const bool empty = l == 0.0;
  const float inv_l = empty ? 0.0 : 1.0 / l;
  // Every key of the row, in a packed batch the other sequences' too (j counts from the sequence's
  // first key there, so theirs fall outside [key_begin, key_end) and get 0).
  if (QUADS) {
    // The row's quads, all of them written (the row starts at a multiple of 4, seq_k % 4 == 0).
    for (uint qr = tid; qr < pc.seq_k / 4u; qr += gl_WorkGroupSize.x) {
      const vec4 raw = load_quad(p_row / 4u + qr);
      vec4 weights = vec4(0.0);
      [[unroll]] for (uint e = 0u; e < 4u; ++e) {
        const uint j = 4u * qr + e - first_key;
        if (j >= key_begin && j < key_end) {  // (the mask is read only for visible keys)
          const float s = visible_score(raw[e], mask_kind, mask_row, slope, i_seq, j);
          if (s != NEG_INF) weights[e] = exp(s - m) * inv_l;
        }
      }
      store_quad(p_row / 4u + qr, weights);
    }
  } else {
    for (uint jr = tid; jr < pc.seq_k; jr += gl_WorkGroupSize.x) {
      const uint j = jr - first_key;  // wraps below the sequence's first key: never visible
      float weight = 0.0;
      if (j >= key_begin && j < key_end) {
        const float s = visible_score(p[p_seq + j], mask_kind, mask_row, slope, i_seq, j);
        if (s != NEG_INF) weight = exp(s - m) * inv_l;
      }
      p[p_row + jr] = weight;
    }
  }
  if (tid == 0u && (pc.flags & FLAG_WRITE_LSE) != 0u)
    lse[lse_offset() + (b * pc.heads + h) * pc.seq_q + i] = empty ? NEG_INF : m + log(l);
}
