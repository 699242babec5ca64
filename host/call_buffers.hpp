// The buffers of one attention call, checked together once its layouts are: each belongs to the
// Context the call is made with, and no output shares a byte with another argument.
#pragma once

#include "context_impl.hpp"
#include "vkattn/attention.hpp"
#include "vkattn/problem.hpp"

namespace vkattn::detail {

// Throws Error naming the argument of another Context, or the two arguments that overlap with their
// byte ranges. `p` is check_attention_args(args); `workspace` (null: vkattn's own scratch, which no
// argument can share) holds `workspace_bytes` bytes, already checked to fit it.
void check_call_buffers(const ContextImpl& context, const AttentionArgs& args, const AttentionProblem& p,
                        const BufferSlice* workspace, uint64_t workspace_bytes);

}  // namespace vkattn::detail
