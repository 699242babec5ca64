// What the dense fp64 reference (reference.cpp) shares with its backward pass (backward_reference.cpp)
// and with the serving references (sequence_reference.cpp): its argument checks, which keys a row
// sees, and one row scored through the score chain. One copy of the mask logic for all of them.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <utility>

#include "score_chain.hpp"
#include "vkattn/problem.hpp"
#include "vkattn/reference.hpp"

namespace vkattn::reference::detail {

// Validates exactly like the GPU path (the output is the dense BHSD tensor attention returns), then
// the spans' sizes, the key lengths and the requested rows (throws vkattn::Error).
AttentionProblem check_inputs(const Inputs& in, std::span<const int64_t> rows);

// The keys [begin, end) row i of batch element b may see: causal, the window and the key lengths.
std::pair<int64_t, int64_t> visible_keys(const Inputs& in, const AttentionProblem& p, int64_t b, int64_t i);

// The mask tensor's say on key j of row i: std::nullopt when it hides the key (a boolean 0, a float
// -inf), else its float bias (0 for a boolean mask or none).
std::optional<double> mask_bias(const Inputs& in, int64_t b, int64_t h, int64_t i, int64_t j);

// Starts `row` as row i of head h in batch element b and scores its visible keys (not yet the
// softmax).
void score_row(const Inputs& in, const AttentionProblem& p, int64_t b, int64_t h, int64_t i, ScoreRow& row);

// reference::attention with dropout's batch index of batch element b being dropout_batch + b: a
// sequence of a paged or packed batch is a dense call of batch 1 whose dropout mask is that of
// sequence dropout_batch. reference::attention is dropout_batch 0.
Outputs attention(const Inputs& in, std::span<const int64_t> rows, int64_t dropout_batch);

}  // namespace vkattn::reference::detail
