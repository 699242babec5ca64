// Probe (not part of vkattn, not built by CMake): q8_0 half-block reads on lavapipe three ways, one
// shader per MODE (0: descriptor loads and vkattn's realignment; 1: GL_EXT_buffer_reference loads at
// 2-byte-aligned addresses, no realignment; 2: descriptor loads, no realignment, wrong values). Built
// with: for m in 0 1 2; do glslc -fshader-stage=compute --target-env=vulkan1.2 -DMODE=$m -DPV THIS -o mode$m.spv; done
// and run by lavapipe-2026-11-27-q8_0-read-probe.cpp. Results: bench/results/README.md.
#version 450
#extension GL_EXT_control_flow_attributes : enable
#extension GL_KHR_shader_subgroup_shuffle : enable
#extension GL_EXT_buffer_reference : enable
#extension GL_EXT_scalar_block_layout : enable
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : enable
#extension GL_EXT_shader_16bit_storage : enable
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : enable
layout(local_size_x = 8) in;
layout(push_constant) uniform P { uint64_t addr; uint keys; uint rows; } pc;
layout(binding = 0) readonly buffer Vecs { uvec4 vecs[]; };
layout(binding = 0) readonly buffer Words { uint words[]; };
layout(binding = 1) buffer Out { float outv[]; };
layout(buffer_reference, scalar, buffer_reference_align = 2) readonly buffer U4 { uvec4 v; };
layout(buffer_reference, scalar, buffer_reference_align = 2) readonly buffer U16 { uint16_t h; };
float half_of_word(uint word, uint h) { return unpackHalf2x16(word >> (h * 16u)).x; }
float int8_of_word(uint word, uint i) { return float(int(word << (24u - 8u * i)) >> 24); }
void main() {
  const uint lane = gl_SubgroupInvocationID, k = lane / 2u, h = lane & 1u;
  float qr[64];
  [[unroll]] for (uint e = 0u; e < 64u; ++e) qr[e] = float(e + lane) * 0.001;
  float acc[4] = float[4](0.0, 0.0, 0.0, 0.0);
  float vacc[64];
  [[unroll]] for (uint e = 0u; e < 64u; ++e) vacc[e] = 0.0;
  const uint last = uint(words.length() / 4) - 1u;
  [[dont_unroll]] for (uint j = 0u; j < pc.keys; ++j) {
    const uint row = (gl_WorkGroupID.x * pc.keys + j) % pc.rows;
    const uint s = 136u * row + 34u * k;  // block start byte
    float x[16], d;
#if MODE == 0
    // descriptor loads, the library's realignment
    const uint m = (s & 15u) >> 1u, u = (s >> 4u) + h;
    const uvec4 a = vecs[min(u, last)], b = vecs[min(u + 1u, last)];
    const uint w[8] = uint[8](a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w);
    uint t[6], y[5];
    [[unroll]] for (uint i = 0u; i < 6u; ++i) t[i] = (m & 4u) != 0u ? w[i + 2u] : w[i];
    [[unroll]] for (uint i = 0u; i < 5u; ++i) y[i] = (m & 2u) != 0u ? t[i + 1u] : t[i];
    const bool odd = (m & 1u) != 0u;
    [[unroll]] for (uint i = 0u; i < 4u; ++i) {
      const uint q = odd ? y[i + 1u] : (y[i] >> 16u) | (y[i + 1u] << 16u);
      [[unroll]] for (uint c = 0u; c < 4u; ++c) x[4u * i + c] = int8_of_word(q, c);
    }
    d = half_of_word(y[0], m & 1u);
    const float partner = subgroupShuffleXor(d, 1u);
    if (h != 0u) d = partner;
#elif MODE == 1
    // buffer references at 2-byte-aligned addresses: no realignment
    const uvec4 q4 = U4(pc.addr + uint64_t(s + 2u + 16u * h)).v;
    const uint qw[4] = uint[4](q4.x, q4.y, q4.z, q4.w);
    [[unroll]] for (uint i = 0u; i < 4u; ++i)
      [[unroll]] for (uint c = 0u; c < 4u; ++c) x[4u * i + c] = int8_of_word(qw[i], c);
    d = unpackHalf2x16(uint(U16(pc.addr + uint64_t(s)).h)).x;
#else
    // descriptor loads, no realignment (wrong values: the upper bound)
    const uint u = (s >> 4u) + h;
    const uvec4 a = vecs[min(u, last)], b = vecs[min(u + 1u, last)];
    const uint qw[4] = uint[4](a.x, a.y, a.z, b.w);
    [[unroll]] for (uint i = 0u; i < 4u; ++i)
      [[unroll]] for (uint c = 0u; c < 4u; ++c) x[4u * i + c] = int8_of_word(qw[i], c);
    d = half_of_word(a.x, 0u);
    const float partner = subgroupShuffleXor(d, 1u);
    if (h != 0u) d = partner;
#endif
    [[unroll]] for (uint r = 0u; r < 4u; ++r) {
      float part = 0.0;
      [[unroll]] for (uint e = 0u; e < 16u; ++e) part = fma(qr[16u * r + e], x[e], part);
      acc[r] = fma(part, d, acc[r]);
    }
#ifdef PV
    [[unroll]] for (uint r = 0u; r < 4u; ++r) {
      const float pd = acc[r] * 1e-3 * d;
      [[unroll]] for (uint e = 0u; e < 16u; ++e) vacc[16u * r + e] = fma(pd, x[e], vacc[16u * r + e]);
    }
#endif
  }
  float sv = 0.0;
  [[unroll]] for (uint e = 0u; e < 64u; ++e) sv += vacc[e];
  outv[gl_GlobalInvocationID.x] = acc[0] + acc[1] + acc[2] + acc[3] + sv;
}
