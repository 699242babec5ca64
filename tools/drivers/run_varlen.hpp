// `vkattn run` over a packed variable-length batch (vkattn/varlen.hpp): 3-D Q (total_q, heads, dim_qk),
// K and V (total_k, kv_heads, dim) with --cu-seqlens-q and --cu-seqlens-k, O written (total_q, heads,
// dim_v), LSE (heads, total_q) and with --weights P (heads, total_q, total_k), on the three-stage
// path. Same policy as the dense run: every input read and checked
// (check_varlen_values) before a device is opened, outputs written all or none.
#pragma once

#include <string>

#include "run_inputs.hpp"

namespace vkattn::cli {

// What is wrong with the combination of options given with --cu-seqlens-q/-k (one without the other,
// a paged cache, --mask, --heatmap, --weights with --path fused, ...), as one line; "" when nothing is. A usage error (exit 2).
std::string varlen_usage_error(const RunOptions& options);

// Runs attention over the packed batch of `options` (options.varlen()) and writes the outputs; throws
// vkattn::Error naming the option, the file or the library's argument.
int run_varlen(const RunOptions& options);

}  // namespace vkattn::cli
