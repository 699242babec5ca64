// `vkattn run`'s backward pass: --grad-out dO.npy runs the forward and then the backward, writing
// --dq, --dk, --dv (and --dsinks with sinks) in the inputs' layouts and dtype (float32 for bf16, as
// --out). Dense and packed calls; a paged cache is an inference layout and is refused.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "output_files.hpp"
#include "run_call.hpp"
#include "run_inputs.hpp"
#include "vkattn/types.hpp"

namespace vkattn::cli {

// The usage error of the gradient options ("" when they go together): --grad-out needs all three of
// --dq, --dk and --dv, and they it; --dsinks needs --grad-out and --sinks; no paged cache.
std::string gradient_usage_error(const RunOptions& options);

// The gradient files' destinations, to check beside the other outputs (OutputFiles::check_destinations).
void append_gradient_outputs(const RunOptions& options, FlagPaths& outputs);

// --grad-out's values rounded to `dtype`: its shape must be O's, `out_shape` (an Error naming the file
// and both shapes otherwise). Empty without --grad-out.
std::vector<float> load_grad_out(const RunOptions& options, DType dtype, const std::vector<int64_t>& out_shape);

// Stages the gradients `r` holds: dQ, dK and dV with the shapes of Q, K and V's files, '<f2' when
// `as_f16` (the inputs were) and the dtype is f16, else float32; dsinks (heads,) float32.
void stage_gradients(OutputFiles& files, const RunOptions& options, const CallResults& r, DType dtype, bool as_f16,
                     const std::vector<int64_t>& q_shape, const std::vector<int64_t>& k_shape,
                     const std::vector<int64_t>& v_shape);

}  // namespace vkattn::cli
