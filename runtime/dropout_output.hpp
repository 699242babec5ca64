// Dropout in the forward pass (AttentionOptions::dropout, docs/semantics.md "Dropout"): the call runs
// as it would without it, writing its LSE (which dropout does not change), then one more pass forms O
// again with each weight's keep factor (shaders/attention_dropout_output.comp), drawn from the same
// Philox stream the backward pass draws it from.
#pragma once

#include <optional>

#include "attention_record.hpp"
#include "backward_plan.hpp"

namespace vkattn::detail {

// The output pass's plan for `spec`, or nullopt without dropout (p = 0). Throws Error for a call it
// cannot take: a paged cache or q8_0 K/V (inference layouts), a spec without lse (the pass reads the
// forward's LSE, as the backward pass does: ask for it), or on lavapipe more keys than one
// invocation's loop limit walks.
std::optional<BackwardCallPlan> plan_dropout_output(const DeviceInfo& device, KernelVariant variant,
                                                    const AttentionSpec& spec);

// The pass, after a barrier, appended to the forward call's list (`slots`: that list's).
void emit_dropout_output(ContextImpl& context, CommandList& list, const BackwardCallPlan& plan, const AttentionSlots& slots);

}  // namespace vkattn::detail
