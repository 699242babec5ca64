#version 450
// tools/probes/load_paths.cpp's shader: each invocation reads `iters` x 8 consecutive 64-bit words of
// its own stretch of one buffer and sums them, by one of three paths (a define picks it):
//   LOAD_STORAGE: a storage buffer of uint64_t, one 64-bit load per word;
//   LOAD_TEXEL2:  a uniform texel buffer of R32G32_UINT, one texelFetch per word;
//   LOAD_TEXEL4:  a uniform texel buffer of R32G32B32A32_UINT, one texelFetch per two words.
// The sums are written out so that no load can be optimised away, and compared between the paths.
#extension GL_EXT_control_flow_attributes : enable
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : enable
#extension GL_EXT_samplerless_texture_functions : require  // texelFetch on a textureBuffer

layout(local_size_x = 8) in;
#if defined(LOAD_STORAGE)
layout(binding = 0) readonly buffer Words { uint64_t words[]; };
#else
// A uniform texel buffer is an image of Dim Buffer read without a sampler (a usamplerBuffer would
// make it a sampled image, which the SPIR-V validator warns against for Dim Buffer).
layout(binding = 0) uniform utextureBuffer texels;
#endif
layout(binding = 1) writeonly buffer Sums { uvec2 sums[]; };
layout(push_constant) uniform Push { uint iters; } pc;

void main() {
  const uint iters = pc.iters;  // read once: llvmpipe gathers a push constant read in a loop
  const uint base = gl_GlobalInvocationID.x * iters * 8u;
  uvec2 sum = uvec2(0u);
  uint i = 0u;
  do {
#if defined(LOAD_STORAGE)
    [[unroll]] for (uint j = 0u; j < 8u; ++j) {
      const uint64_t w = words[base + i * 8u + j];
      sum += uvec2(uint(w), uint(w >> 32));
    }
#elif defined(LOAD_TEXEL2)
    [[unroll]] for (uint j = 0u; j < 8u; ++j) sum += texelFetch(texels, int(base + i * 8u + j)).xy;
#else
    [[unroll]] for (uint j = 0u; j < 4u; ++j) {
      const uvec4 w = texelFetch(texels, int(base / 2u + i * 4u + j));
      sum += w.xy + w.zw;
    }
#endif
    ++i;
  } while (i < iters);
  sums[gl_GlobalInvocationID.x] = sum;
}
