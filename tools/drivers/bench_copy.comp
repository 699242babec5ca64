#version 450
// `vkattn bench --copy`'s copy shader (tools/drivers/bench_copy.cpp): the plain copy a compute shader does,
// 16 bytes (a uvec4) per invocation and iteration, a grid-stride loop over one piece of the buffers.
layout(local_size_x = 64) in;
layout(binding = 0) readonly buffer Src { uvec4 src[]; };
layout(binding = 1) writeonly buffer Dst { uvec4 dst[]; };
layout(push_constant) uniform Push { uint count; } pc;  // uvec4s in this piece

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += stride) dst[i] = src[i];
}
