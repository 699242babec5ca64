// Dropout's generator: which attention weights a call with AttentionOptions::dropout keeps. Counter
// based, so that the forward pass, the backward pass and the fp64 reference draw the same mask
// without storing it (PyTorch and FlashAttention use the same generator, Philox 4x32-10, though not
// the same counters: vkattn's masks are its own).
//
// The weight of query i and key j in head h of batch element b (a packed batch: b the sequence, i and
// j counted from the sequence's first query and key) is kept iff
//   philox4x32_10({j / 4, i, b * heads + h, offset}, {seed & 0xffffffff, seed >> 32})[j % 4]
//     >= dropout_threshold(p)
// so four consecutive keys share one evaluation. Kept weights are scaled by 1 / (1 - p).
#pragma once

#include <array>
#include <cstdint>

#include "vkattn/types.hpp"

namespace vkattn {

// Philox 4x32 with 10 rounds (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", 2011;
// Random123's philox4x32_10): four 32-bit words from a 128-bit counter and a 64-bit key.
std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);

// The 32-bit threshold of probability p in [0, 1): floor(p * 2^32). A word below it drops its weight,
// so a weight is kept with probability 1 - threshold / 2^32.
uint32_t dropout_threshold(float p);

// Whether the weight of (b, h, i, j) is kept under `dropout` in a call with `heads` query heads.
bool dropout_keep(const Dropout& dropout, int64_t heads, int64_t b, int64_t h, int64_t i, int64_t j);

// Throws Error "dropout: p must be in [0, 1), got X" unless 0 <= p < 1 (and not NaN).
void check_dropout(const Dropout& dropout);

}  // namespace vkattn
