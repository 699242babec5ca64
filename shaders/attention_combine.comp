#version 450
// Merges the per-split partial results of attention_tiled.comp (split-KV): for each query row, from
// each split's running max m_s, sum l_s and normalised O_s,
//   LSE = m + log(T),  T = sum_s exp(m_s - m) l_s,  O = sum_s exp(m_s - m) l_s / T * O_s,  m = max_s m_s.
// The tiled kernel keeps its maxima in units of log2(e)/2 (half_log2_units): there the weight is
// exp2(2 (m_s - m)) and LSE = m * 2 ln 2 + log(T), clamped to the f32 range (TILED_T_MAX * 2 ln 2 may
// round past FLT_MAX). Splits that saw no visible key (m_s = -inf) carry no weight; a row with none at all gives O = 0
// and LSE = -inf.
// With MOD_SINKS (split-KV calls with sinks: the host sets it here, not on the split kernels), each
// row's sink joins T once, after the splits: a row no split saw a key of gives O = 0, LSE = the sink.
// One workgroup per row, of W invocations (a power of two): they share the row's splits for the
// maximum and the sum (reduced in shared memory), and for O they are W / NU groups of NU, one per
// 16-byte unit of the row (NU = DV / 4 when DV is a multiple of 4, else one unit per element), each
// group summing every G-th split, then the groups' sums added (with fewer invocations than units, each
// strides over the units and all splits). A GPU decode call has hundreds of splits and only its
// query rows as workgroups: one invocation looping over every split was the pass's whole time.
//
// The host runs the split dispatches and this pass one range of query tiles at a time, reusing one
// workspace: partial rows are range-local, [split][batch][head][row of the range] (partial_row in
// attention_common.glsl), and row r here is query row row_base + r % range_rows of its (batch, head);
// O and LSE are written at that global row. A paged call's work list (shader_abi.h, "Work lists")
// replaces the splits by its sequence's items: [item][head][row of the range]. A packed batch's rows
// (packed_batches > 0) are each its sequence's, of which only the first max_rows were computed.

#extension GL_EXT_control_flow_attributes : enable
#include "storage_types.glsl"
#include "combine_push.glsl"

layout(constant_id = SPEC_COMBINE_DV) const uint DV = 64;
layout(local_size_x_id = SPEC_COMBINE_WORKGROUP) in;
const uint W = gl_WorkGroupSize.x;
const bool VEC = DV % 4u == 0u;
const uint UNIT = VEC ? 4u : 1u;       // elements of a unit
const uint NU = DV / UNIT;             // units of a row
const uint G = W >= NU ? W / NU : 1u;  // split groups

layout(binding = COMBINE_PARTIAL_O_BINDING) readonly buffer PartialOBuf { float partial_o[]; };
layout(binding = COMBINE_PARTIAL_O_BINDING) readonly buffer PartialOVecs { vec4 partial_o4[]; };
layout(binding = COMBINE_PARTIAL_LSE_BINDING) readonly buffer PartialLseBuf { float partial_lse[]; };
layout(binding = COMBINE_O_BINDING) writeonly buffer OBuf { STORAGE_T o[]; };
layout(binding = COMBINE_LSE_BINDING) writeonly buffer LseBuf { float lse[]; };
layout(binding = COMBINE_WORK_LIST_BINDING) readonly buffer WorkListBuf { uint work_list[]; };
layout(binding = COMBINE_CU_SEQLENS_Q_BINDING) readonly buffer CuSeqlensQBuf { int cu_q[]; };  // a packed batch's, with a work list
#define MOD_KERNEL MOD_KERNEL_COMBINE
#include "modifiers.glsl"

#define NEG_INF uintBitsToFloat(0xff800000u)
#define FLT_MAX uintBitsToFloat(0x7f7fffffu)

// exp(d) of a difference of maxima in natural units, exp2(2 d) in units of log2(e)/2.
float split_weight(float d, bool half_log2) { return half_log2 ? exp2(d + d) : exp(d); }
// A finite maximum in natural units.
float natural_max(float m, bool half_log2) {
  return half_log2 ? half_log2_to_natural(m) : m;
}

shared float reduce_buf[W];
shared vec4 group_sums[W];

// The workgroup's maximum (take_max) or sum of x; every invocation gets it. Called in uniform
// control flow.
float workgroup_reduce(float x, bool take_max) {
  const uint t = gl_LocalInvocationID.x;
  reduce_buf[t] = x;
  barrier();
  for (uint stride = W / 2u; stride > 0u; stride >>= 1u) {
    if (t < stride) {
      const float a = reduce_buf[t], b = reduce_buf[t + stride];
      reduce_buf[t] = take_max ? max(a, b) : a + b;
    }
    barrier();
  }
  const float r = reduce_buf[0];
  barrier();  // (the buffer is reused)
  return r;
}

// Unit u of partial row `prow` (zeros past a scalar unit's one element).
vec4 partial_unit(uint prow, uint u) {
  return VEC ? partial_o4[prow * NU + u] : vec4(partial_o[prow * DV + u], 0.0, 0.0, 0.0);
}

void main() {
  const uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (row >= pc.rows) return;
  const uint i = pc.row_base + row % pc.range_rows;
  const uint bh = row / pc.range_rows;  // b * heads + h
  const uint h = bh % pc.heads;
  const uint b = bh / pc.heads;

  // The row's partials: slots first + k * step (k < count) of [slot][head][row of the range], the
  // slots (split, b) split-major (split * batches + b), or with a work list the row's sequence's items.
  const uint slot_rows = pc.heads * pc.range_rows;
  const uint slot_row = row % slot_rows;
  uint first = b, count = pc.splits, slot_step = pc.rows / slot_rows;
  // (With a work list, where its sequences' item offsets start.)
  const uint offsets = pc.work_list != 0u ? work_list[WORK_LIST_OFFSETS] : 0u;
  if (pc.packed_batches > 0u) {
    // A packed row (i): its partials are splits 0 .. its sequence's item count - 1 (without a work
    // list: every split), the sequence the last whose first query row is at most i. Its first row q0
    // and end q1 clamped as the kernels' begin_sequence clamps them.
    uint lo = 0u, hi = pc.packed_batches;
    while (hi - lo > 1u) {
      const uint mid = (lo + hi) / 2u;
      if (cu_q[pc.cu_q_off + mid] <= int(i)) lo = mid;
      else hi = mid;
    }
    const int q0 = clamp(cu_q[pc.cu_q_off + lo], 0, int(pc.seq_q));
    const int q1 = clamp(cu_q[pc.cu_q_off + lo + 1u], q0, int(pc.seq_q));
    // The kernels computed only the sequence's first max_seqlen_q rows (their grid's tiles): the
    // partials of a row past them, or of a row outside every sequence (bad cu_seqlens), were never
    // written, and the row is left as it was, as the unsplit kernels leave it. (One row per
    // workgroup: the return is uniform, before any barrier.)
    if (int(i) < q0 || int(i) >= q1 || i - uint(q0) >= pc.max_rows) return;
    count = pc.work_list != 0u ? min(work_list[offsets + lo + 1u] - work_list[offsets + lo], pc.splits) : pc.splits;
  } else if (pc.work_list != 0u) {
    first = work_list[offsets + b];
    count = work_list[offsets + b + 1u] - first;
    slot_step = 1u;
  }
#define PARTIAL(k) ((first + (k) * slot_step) * slot_rows + slot_row)

  // Split s has running max m_s (-inf: it saw no visible key) and sum l_s (attention_tiled.comp):
  // its weight is exp(m_s - m) * l_s, exact even when the maxima are +-FLT_MAX (saturated scores).
  const uint t = gl_LocalInvocationID.x;
  float m_part = NEG_INF;
  for (uint s = t; s < count; s += W) m_part = max(m_part, partial_lse[2u * PARTIAL(s)]);
  const float m = workgroup_reduce(m_part, true);
  const bool half_log2 = pc.half_log2_units != 0u;
  float total_part = 0.0;
  if (m != NEG_INF)
    for (uint s = t; s < count; s += W) {
      const float ms = partial_lse[2u * PARTIAL(s)];
      if (ms != NEG_INF) total_part += split_weight(ms - m, half_log2) * partial_lse[2u * PARTIAL(s) + 1u];
    }
  float total = workgroup_reduce(total_part, false);  // (add_sink takes it inout)
  const bool empty = m == NEG_INF;
  float inv_total = empty ? 0.0 : 1.0 / total;
  float row_lse = empty ? NEG_INF : natural_max(m, half_log2) + log(total);
  if (HAS_SINKS) {
    // The sink joins the row's denominator here, once (the host cleared it for the split kernels), in
    // natural units. A row no split saw a key of starts from -FLT_MAX (not -inf: a -inf sink would
    // make exp(-inf - -inf) NaN) and total 0, and ends with O = 0 and LSE = the sink (total 1).
    float m_natural = empty ? -FLT_MAX : natural_max(m, half_log2);
    const float factor = add_sink(m_natural, total, sink_logit(h));
    inv_total = total == 0.0 ? 0.0 : factor / total;
    row_lse = total == 0.0 ? NEG_INF : m_natural + log(total);
  }

  const uint out_row = pc.o_off + b * pc.o_sb + h * pc.o_sh + i * pc.o_ss;
  // Splits g, g + step, ... of unit u, weighted.
#define SPLIT_SUM(value, u, g, step)                                                                 \
  for (uint s = (g); !empty && s < count; s += (step)) {                                            \
    const float ms = partial_lse[2u * PARTIAL(s)];                                                   \
    if (ms == NEG_INF) continue; /* this split saw only masked keys */                               \
    const float weight = split_weight(ms - m, half_log2) * partial_lse[2u * PARTIAL(s) + 1u] * inv_total; \
    value += weight * partial_unit(PARTIAL(s), u);                                                   \
  }
  if (G > 1u) {
    const uint g = t / NU, u = t % NU;
    vec4 value = vec4(0.0);
    if (g < G) SPLIT_SUM(value, u, g, G)
    group_sums[t] = value;
    barrier();
    if (g == 0u) {
      for (uint k = 1u; k < G; ++k) value += group_sums[k * NU + u];
      [[unroll]] for (uint c = 0u; c < UNIT; ++c) o[out_row + u * UNIT + c] = from_f32(value[c]);
    }
  } else {
    for (uint u = t; u < NU; u += W) {
      vec4 value = vec4(0.0);
      SPLIT_SUM(value, u, 0u, 1u)
      [[unroll]] for (uint c = 0u; c < UNIT; ++c) o[out_row + u * UNIT + c] = from_f32(value[c]);
    }
  }
  if (gl_LocalInvocationID.x == 0u && pc.write_lse != 0u)
    lse[lse_offset() + bh * pc.seq_q + i] = row_lse;
}
