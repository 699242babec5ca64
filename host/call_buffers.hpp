// The buffers of one attention call, checked against its plan: each is given as the spec says, is a
// valid Buffer of the Context the call is made with, holds what its layout reaches, and no output
// shares a byte with another argument. Cheap (a few comparisons per buffer, no allocation unless an
// Error is thrown): it runs on every record of a prepared call.
#pragma once

#include "context_impl.hpp"
#include "vkattn/attention.hpp"
#include "vkattn/problem.hpp"

namespace vkattn::detail {

// Throws Error naming the argument: missing or unexpected, too small, misaligned, of another
// Context, or overlapping another (with both byte ranges). `p` is the spec's checked problem;
// `workspace` (null: vkattn's own scratch, which no argument can share) must hold `workspace_bytes`,
// needed for `workspace_use` (named in the error).
void check_call_buffers(const ContextImpl& context, const AttentionProblem& p, const AttentionSpec& spec,
                        const AttentionBuffers& buffers, const BufferSlice* workspace, uint64_t workspace_bytes,
                        const char* workspace_use);

}  // namespace vkattn::detail
