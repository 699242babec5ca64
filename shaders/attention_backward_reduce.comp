#version 450
// Adds the backward kernels' split partials of a gradient (shader_abi.h, REDUCE_PUSH_MEMBERS): element
// (b, h, s, d) of the gradient is the sum over splits, in split order, of the f32 partials
// [split][b][h][s][d], rounded once to the storage type. Fixed order: the same bits on every run.
// The grid: x covers seq * dim elements (each invocation strides by the grid's width), y heads, z batch.
#include "storage_types.glsl"
#include "shader_abi.h"

layout(push_constant) uniform ReducePush { REDUCE_PUSH_MEMBERS } pc;
layout(constant_id = SPEC_REDUCE_WORKGROUP) const uint WORKGROUP = 64u;
layout(local_size_x_id = SPEC_REDUCE_WORKGROUP) in;

layout(binding = REDUCE_PARTS_BINDING) readonly buffer PartsBuf { float parts[]; };
layout(binding = REDUCE_OUT_BINDING) writeonly buffer OutBuf { STORAGE_T grad[]; };

void main() {
  const uint b = gl_WorkGroupID.z, h = gl_WorkGroupID.y;
  const uint elements = pc.seq * pc.dim;
  const uint split_stride = pc.batch * pc.heads * elements;
  const uint first = (b * pc.heads + h) * elements;
  for (uint e = gl_GlobalInvocationID.x; e < elements; e += gl_NumWorkGroups.x * WORKGROUP) {
    float sum = 0.0;
    for (uint split = 0u; split < pc.splits; ++split) sum += parts[split * split_stride + first + e];
    const uint s = e / pc.dim, d = e % pc.dim;
    grad[pc.out_off + b * pc.out_sb + h * pc.out_sh + s * pc.out_ss + d] = from_f32(sum);
  }
}
