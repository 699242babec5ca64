// `vkattn run --dropout P --seed N [--dropout-mask M.npy]`: dropout on the attention weights
// (docs/semantics.md, "Dropout"), in the forward and, with --grad-out, the backward pass. The keep mask
// can be written for checking: (batch, heads, seq_q, seq_k) uint8, 1 = kept (packed: (heads, total_q,
// total_k), 0 between different sequences), from the library's generator (vkattn/dropout.hpp).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "output_files.hpp"
#include "run_inputs.hpp"
#include "vkattn/types.hpp"

namespace vkattn::cli {

// The usage error of the dropout options ("" when they go together): --dropout-mask needs --dropout;
// no paged cache (an inference layout).
std::string dropout_usage_error(const RunOptions& options);

// --dropout and --seed onto `options` (nothing without --dropout). Returns whether dropout is on
// (p > 0): the call then needs its LSE.
bool apply_dropout_option(const RunOptions& run, AttentionOptions& options);

// Stages --dropout-mask for a dense call of (batch, heads, seq_q, seq_k).
void stage_dense_dropout_mask(OutputFiles& files, const RunOptions& run, const AttentionOptions& options, int64_t batch,
                              int64_t heads, int64_t seq_q, int64_t seq_k);
// And for a packed one: sequence b is queries cu_q[b] .. and keys cu_k[b] ...
void stage_packed_dropout_mask(OutputFiles& files, const RunOptions& run, const AttentionOptions& options, int64_t heads,
                               std::span<const int32_t> cu_q, std::span<const int32_t> cu_k);

}  // namespace vkattn::cli
