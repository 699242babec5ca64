#version 450
// Merging attention states, step 1 of 2 (runtime/merge_states.cpp): one part's rows of one range,
// gathered from its O (storage type, any strides) and LSE (f32) into the split-KV combine's partials,
// O as f32 rows and the pair (running max, sum) as (LSE, 1): the combine (attention_combine.comp,
// step 2) then merges the parts exactly as it merges a split call's splits. The grid covers the
// range's rows x dim elements, each invocation striding by the grid's width.
#include "storage_types.glsl"
#include "shader_abi.h"

layout(push_constant) uniform MergePush { MERGE_PUSH_MEMBERS } pc;
layout(constant_id = SPEC_MERGE_WORKGROUP) const uint WORKGROUP = 64u;
layout(local_size_x_id = SPEC_MERGE_WORKGROUP) in;

layout(binding = MERGE_PART_O_BINDING) readonly buffer PartOBuf { STORAGE_T part_o[]; };
layout(binding = MERGE_PART_LSE_BINDING) readonly buffer PartLseBuf { float part_lse[]; };
layout(binding = MERGE_PARTIAL_O_BINDING) writeonly buffer PartialOBuf { float partial_o[]; };
layout(binding = MERGE_PARTIAL_LSE_BINDING) writeonly buffer PartialLseBuf { float partial_lse[]; };

void main() {
  const uint range_rows = pc.batch * pc.heads * pc.range_rows;
  const uint elements = range_rows * pc.dim;
  for (uint e = gl_GlobalInvocationID.x; e < elements; e += gl_NumWorkGroups.x * WORKGROUP) {
    const uint row = e / pc.dim, d = e % pc.dim;
    const uint r = row % pc.range_rows, bh = row / pc.range_rows;
    const uint h = bh % pc.heads, b = bh / pc.heads, i = pc.row_base + r;
    partial_o[(pc.partial_off & 0xffffu) + row * pc.dim + d] = to_f32(part_o[pc.o_off + b * pc.o_sb + h * pc.o_sh + i * pc.o_ss + d]);
    if (d == 0u) {
      const uint pair = (pc.partial_off >> 16u) + 2u * row;
      partial_lse[pair] = part_lse[pc.lse_off + bh * pc.seq + i];
      partial_lse[pair + 1u] = 1.0;
    }
  }
}
