// `vkattn bench --backward`: the backward pass of a dense shape timed alone (its forward run before
// timing, once per rotated input set), credited with 2.5x the forward's FLOPs (FlashAttention's
// convention: five matrix products against two), with the same result fields as the forward's.
#pragma once

#include "bench_common.hpp"
#include "bench_result.hpp"

namespace vkattn::cli {

BenchResult bench_backward(Context& context, const BenchOptions& o, const BenchShape& shape, DType dtype);

}  // namespace vkattn::cli
