#version 450
// The backward pass's per-row prologue and its sinks (the contract: docs/semantics.md, "Backward").
//   SINKS_PASS 0: D = Σ_d dO_id O_id for every query row (b, h, i), f32, into the rows workspace
//                 (one invocation per row; the grid: x rows, y heads, z batch elements or sequences).
//   SINKS_PASS 1: dσ_h = -Σ_{b,i} e^{σ_h - LSE_bhi} D_bhi, one workgroup per head (the grid's x): each
//                 invocation sums the rows i ≡ its index (mod WORKGROUP) of every sequence in order,
//                 then the workgroup adds the invocations' sums in a fixed tree: no atomics, the same
//                 bits on every run. A fully masked row has O = 0, so D = 0: it adds nothing.
// The grid's z of pass 0 is the batch; pass 1 reads the batch (dense) or the sequences (packed) from
// pc.split, which the host sets to their count.
#extension GL_EXT_control_flow_attributes : enable
#include "storage_types.glsl"
#include "attention_backward_common.glsl"

layout(constant_id = SPEC_BACKWARD_SINKS_PASS) const uint SINKS_PASS = 0u;

layout(binding = BACKWARD_ROWS_BINDING) buffer RowsBuf { float row_d[]; };
layout(binding = BACKWARD_GRAD_A_BINDING) writeonly buffer DsinksBuf { float grad_sinks[]; };

shared float sums[WORKGROUP];

void row_pass() {
  const uint b = gl_WorkGroupID.z, h = gl_WorkGroupID.y;
  begin_sequence(b);
  const uint i = gl_WorkGroupID.x * WORKGROUP + gl_LocalInvocationID.x;
  if (i >= g_rows_q) return;
  const uint o_base = o_row(b, h, i);
  const uint o0 = low_half(pc.o_off) + o_base, do0 = high_half(pc.o_off) + o_base;
  float d = 0.0;
  for (uint c = 0u; c < DV; ++c) d += to_f32(grad_out[do0 + c]) * to_f32(o[o0 + c]);
  row_d[row_index(b, h, i)] = d;
}

void sinks_pass() {
  const uint h = gl_WorkGroupID.x, t = gl_LocalInvocationID.x;
  const float sink = sink_logit(h);
  float sum = 0.0;
  for (uint b = 0u; b < pc.split; ++b) {
    begin_sequence(b);
    for (uint i = t; i < g_rows_q; i += WORKGROUP) {
      const uint r = row_index(b, h, i);
      sum += exp(sink - lse[lse_offset() + r]) * row_d[r];
    }
  }
  sums[t] = sum;
  barrier();
  [[unroll]] for (uint width = WORKGROUP / 2u; width > 0u; width /= 2u) {
    if (t < width) sums[t] += sums[t + width];
    barrier();
  }
  if (t == 0u) grad_sinks[high_half(pc.q_off) + h] = -sums[0];
}

void main() {
  if (SINKS_PASS == 0u)
    row_pass();
  else
    sinks_pass();
}
