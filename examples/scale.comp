// The example application's own compute shader (examples/app_record.cpp): x[i] *= factor. It stands
// for whatever an application computes before attention (here: scaling the queries).
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer Data { float x[]; };
layout(push_constant) uniform Push {
  uint count;
  float factor;
};
void main() {
  const uint i = gl_GlobalInvocationID.x;
  if (i < count) x[i] *= factor;
}
