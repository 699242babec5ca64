// The values of K and V as the fused kernels read them: stored as the call's dtype (STORAGE_T, the
// bindings k[] and v[] of attention_common.glsl), or as ggml's q8_0 blocks (KV_FORMAT_Q8_0: each run
// of 32 consecutive elements of a row is 34 bytes, the scale d as f16 bits, then 32 int8 q; the value
// is f32(d) * q, exact in f32). Include from attention_common.glsl, after the bindings.
//
// Addressing. Every kernel forms a K or V element index the same way for both formats, from
// kv_element_base(pc.k_off) (kv_element_base(pc.v_off)) plus heads, rows and dims times the layout's
// strides (in elements: q8_0 layouts have rows, strides and offsets that are whole blocks). For the
// call's dtype that is the element of the binding. For q8_0 the binding is in 16-bit units (34 bytes
// are 17 of them; a binding's start left below the storage-buffer alignment is even, so its offset
// in those units fits the push word): the element index counts from the binding's first block and
// the push offset is added in halfwords by the reader. The format is a specialization constant, so a
// pipeline carries the reads of one format only.
#ifndef VKATTN_KV_VALUES_GLSL
#define VKATTN_KV_VALUES_GLSL

layout(constant_id = SPEC_ATTENTION_KV_FORMAT) const uint KV_FORMAT = KV_FORMAT_AS_Q;
const bool KV_Q8_0 = KV_FORMAT == KV_FORMAT_Q8_0;

// The same bindings as 32-bit words (q8_0 blocks are 2-byte aligned: the readers pick the halves).
layout(binding = ATTENTION_K_BINDING) readonly buffer KWords { uint k_words[]; };
layout(binding = ATTENTION_V_BINDING) readonly buffer VWords { uint v_words[]; };

// The element index of a tensor's first element given its binding's push offset.
uint kv_element_base(uint push_offset) { return KV_Q8_0 ? 0u : push_offset; }

// The 16-bit half `h` of a word (h = 0 low, 1 high) as an f32 from f16 bits.
float half_of_word(uint word, uint h) { return unpackHalf2x16(word >> (h * 16u)).x; }
// Byte `i` (0..3) of a word, sign-extended (an int8).
float int8_of_word(uint word, uint i) { return float(int(word << (24u - 8u * i)) >> 24); }

// The first byte (its scale's) of q8_0 block `block`, counted from the first block of a binding whose
// push offset is `off` halfwords: every q8_0 reader addresses blocks through it.
uint q8_0_block_byte(uint off, uint block) { return 2u * off + 34u * block; }

// q8_0 element `e` (counted from the first block of a binding whose push offset is `off` halfwords):
// it lies in block e / 32; an element reads two words, its block's scale and its own byte.
#define Q8_0_VALUE(words, off)                                                                      \
  float q8_0_value_##words(uint e_) {                                                               \
    const uint start = q8_0_block_byte(off, e_ >> 5u), byte = start + 2u + (e_ & 31u);              \
    return half_of_word(words[start >> 2u], (start >> 1u) & 1u) * int8_of_word(words[byte >> 2u], byte & 3u); \
  }
Q8_0_VALUE(k_words, pc.k_off)
Q8_0_VALUE(v_words, pc.v_off)

float k_value(uint e) {
  if (KV_Q8_0) return q8_0_value_k_words(e);
  return to_f32(k[e]);
}
float v_value(uint e) {
  if (KV_Q8_0) return q8_0_value_v_words(e);
  return to_f32(v[e]);
}

// Elements e0 .. e0 + N - 1 of a q8_0 tensor (N = 4 or 8, e0 a multiple of N: one block holds them):
// the block's scale, then the N bytes from the words that hold them (N / 4 + 1 words, or N / 4 when
// the bytes start a word), realigned to whole words by a shift of 0 or 16 bits.
#define Q8_0_RUN(words, off, N)                                                                     \
  void q8_0_run_##words##_##N(uint e0, out float x[N]) {                                            \
    const uint start = q8_0_block_byte(off, e0 >> 5u), first = start + 2u + (e0 & 31u);             \
    const float d = half_of_word(words[start >> 2u], (start >> 1u) & 1u);                           \
    const uint w0 = first >> 2u;                                                                    \
    const bool shifted = (first & 2u) != 0u;                                                        \
    uint w[N / 4u + 1u];                                                                            \
    [[unroll]] for (uint i = 0u; i < N / 4u; ++i) w[i] = words[w0 + i];                             \
    w[N / 4u] = 0u;                                                                                 \
    if (shifted) w[N / 4u] = words[w0 + N / 4u]; /* past the block's end when not: never read */    \
    [[unroll]] for (uint i = 0u; i < N / 4u; ++i) {                                                 \
      const uint aligned = shifted ? (w[i] >> 16u) | (w[i + 1u] << 16u) : w[i];                     \
      [[unroll]] for (uint c = 0u; c < 4u; ++c) x[4u * i + c] = d * int8_of_word(aligned, c);       \
    }                                                                                               \
  }

// Half `h` (0: values 0-15, 1: 16-31) of q8_0 block `block` (counted from the binding's first block,
// whose push offset is `off` halfwords) from `vecs`, the binding seen as 16-byte words: its 16 q
// bytes as four words (qw; value 4 i + k is int8_of_word(qw[i], k)) and, for h = 0, the block's
// scale (d; h = 1 gets it from its neighbour). Words, not 16 floats: the caller converts each value
// where it uses it, so that fewer values are live at once (measured faster on lavapipe).
// A block starting at byte s = 16 a + e (e even, 0..14) has its scale at bytes [s, s + 2) and half
// h's values at [s + 2 + 16 h, s + 18 + 16 h): both lie within the two 16-byte words a + h, a + h + 1,
// at the same place in either pair (the values from byte e + 2, the scale at e), so two loads cover
// a half, as many as f16's 16 values, for 0.53x the bytes, and both halves realign the same way.
// Realigning and converting, not the loads, are what q8_0 costs over f16 on lavapipe, so the
// realignment takes three steps of selects by the bits of m = e / 2 (two words, one word, a halfword),
// not indexed by a varying value (a private array indexed so goes to memory on lavapipe); the scale
// is the halfword m of the first four words, which the first two steps also pick. The loads are
// clamped into the binding's whole 16-byte words; q8_0_half_fits_* says whether a half's two words
// are both whole (a half at the very end of a binding may not be: its values are then not to be
// used, and its caller reads it another way).

// Realigns the window (a, b) of a half whose block starts m halfwords into a (see above) into its
// values' four words and the block's scale. (A caller may load the window however it likes:
// attention_subgroup_decode.comp shares words between the two halves of a block.)
void q8_0_realign(uvec4 a, uvec4 b, uint m, out uint qw[4], out float d) {
  const uint w[8] = uint[8](a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w);
  // The values are halfwords m + 1 .. m + 8 of the sixteen: word j of t from word j + 2 (m & 4), of
  // y from word j + 1 of t (m & 2), then a halfword shift when m is even.
  uint t[6], y[5];
  [[unroll]] for (uint j = 0u; j < 6u; ++j) t[j] = (m & 4u) != 0u ? w[j + 2u] : w[j];
  [[unroll]] for (uint j = 0u; j < 5u; ++j) y[j] = (m & 2u) != 0u ? t[j + 1u] : t[j];
  const bool odd = (m & 1u) != 0u;
  [[unroll]] for (uint i = 0u; i < 4u; ++i) qw[i] = odd ? y[i + 1u] : (y[i] >> 16u) | (y[i + 1u] << 16u);
  // The scale: halfword m, in word m / 2 = y[0].
  d = half_of_word(y[0], m & 1u);
}

// q8_0_half_vec_*: the first of half h's two 16-byte words (half 1's is half 0's + 1);
// q8_0_half_m_*: the block's m; q8_0_last_vec_*: the binding's last whole 16-byte word (from the
// word view's length: on lavapipe 22.3.6 the lengths of two 16-byte views of K and V in one shader
// came out wrong).
#define Q8_0_HALF(vecs, words, off)                                                                \
  uint q8_0_half_vec_##vecs(uint block, uint h) { return (q8_0_block_byte(off, block) >> 4u) + h; } \
  uint q8_0_half_m_##vecs(uint block) { return (q8_0_block_byte(off, block) & 15u) >> 1u; }         \
  uint q8_0_last_vec_##vecs() { return (uint(words.length()) >> 2u) - 1u; }                         \
  bool q8_0_half_fits_##vecs(uint block, uint h) {                                                  \
    return q8_0_half_vec_##vecs(block, h) + 1u <= q8_0_last_vec_##vecs();                           \
  }                                                                                                 \
  void q8_0_half_words_##vecs(uint block, uint h, out uint qw[4], out float d) {                     \
    const uint u = q8_0_half_vec_##vecs(block, h), last = q8_0_last_vec_##vecs();                   \
    q8_0_realign(vecs[min(u, last)], vecs[min(u + 1u, last)], q8_0_half_m_##vecs(block), qw, d);     \
  }

#endif
