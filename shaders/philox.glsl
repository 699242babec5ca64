// Dropout's generator, Philox 4x32-10 (vkattn/dropout.hpp has the rule; core/dropout.cpp is the same
// generator on the host, which the fp64 reference draws from): four 32-bit words from a 128-bit
// counter and a 64-bit key. The rounds are unrolled: straight-line code, no loop for lavapipe's limit.
#ifndef VKATTN_PHILOX_GLSL
#define VKATTN_PHILOX_GLSL

uvec4 philox4x32_10(uvec4 counter, uvec2 key) {
  [[unroll]] for (uint round = 0u; round < 10u; ++round) {
    uint hi0, lo0, hi1, lo1;
    umulExtended(0xD2511F53u, counter.x, hi0, lo0);
    umulExtended(0xCD9E8D57u, counter.z, hi1, lo1);
    counter = uvec4(hi1 ^ counter.y ^ key.x, lo1, hi0 ^ counter.w ^ key.y, lo0);
    key += uvec2(0x9E3779B9u, 0xBB67AE85u);
  }
  return counter;
}

// The word that decides the weight of (query i, key j) in (batch element or sequence b, head h):
// counter (j / 4, i, b * heads + h, offset), key (seed_lo, seed_hi), word j % 4.
uint dropout_word(uint b, uint h, uint heads, uint i, uint j, uint seed_lo, uint seed_hi, uint offset) {
  const uvec4 words = philox4x32_10(uvec4(j >> 2u, i, b * heads + h, offset), uvec2(seed_lo, seed_hi));
  return words[j & 3u];
}

#endif
