// Rows of Q, K, V and O read and written in 16-byte chunks: E elements (4 f32, or 8 f16/bf16) as one
// CHUNK_T through an alias of the tensor's binding. On lavapipe every load or store whose address is
// not constant runs lane by lane, each lane's share a few scalar accesses behind a bounds check, so a
// 16-byte access costs little more than a 2-byte one (docs/devices.md): the CPU devices' kernels read
// K and V so where the plan allows (SPEC_ATTENTION_VEC: dims and strides whole chunks; a call whose
// tensors start off the 16-byte grid replays the element-wise pipeline, runtime/command_list.cpp).
// Include after storage_types.glsl and attention_common.glsl.
#ifndef VKATTN_ROW_CHUNKS_GLSL
#define VKATTN_ROW_CHUNKS_GLSL

#if defined(DTYPE_F32)
const uint E = 4u;
#define CHUNK_T vec4
#else
const uint E = 8u;
#define CHUNK_T uvec4
#endif
layout(binding = ATTENTION_Q_BINDING) readonly buffer QChunks { CHUNK_T q_chunks[]; };
layout(binding = ATTENTION_K_BINDING) readonly buffer KChunks { CHUNK_T k_chunks[]; };
layout(binding = ATTENTION_V_BINDING) readonly buffer VChunks { CHUNK_T v_chunks[]; };
layout(binding = ATTENTION_O_BINDING) writeonly buffer OChunks { CHUNK_T o_chunks[]; };

// A chunk's E elements as f32. (f16 pairs from one 32-bit word through unpackHalf2x16: on lavapipe
// that is not slower than the integer widening a single f16 value needs, half_floats.glsl.)
void unpack_chunk(CHUNK_T w, out float x[E]) {
#if defined(DTYPE_F32)
  x[0] = w.x, x[1] = w.y, x[2] = w.z, x[3] = w.w;
#else
  [[unroll]] for (uint i = 0u; i < 4u; ++i) {
#if defined(DTYPE_F16)
    const vec2 h = unpackHalf2x16(w[i]);
    x[2u * i] = h.x, x[2u * i + 1u] = h.y;
#else
    x[2u * i] = uintBitsToFloat(w[i] << 16), x[2u * i + 1u] = uintBitsToFloat(w[i] & 0xffff0000u);
#endif
  }
#endif
}

// E f32 values narrowed to the storage type (as from_f32) and packed into one chunk.
CHUNK_T pack_chunk(float x[E]) {
#if defined(DTYPE_F32)
  return vec4(x[0], x[1], x[2], x[3]);
#else
  CHUNK_T w;
  [[unroll]] for (uint i = 0u; i < 4u; ++i) {
#if defined(DTYPE_F16)
    w[i] = packHalf2x16(vec2(x[2u * i], x[2u * i + 1u]));
#else
    w[i] = f32_to_bf16_bits(x[2u * i]) | (f32_to_bf16_bits(x[2u * i + 1u]) << 16);
#endif
  }
  return w;
#endif
}

#endif
