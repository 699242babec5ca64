// The dispatches of the backward layout (shader_abi.h, BACKWARD_*): the backward pass's kernels and
// dropout's output pass share their bindings, push block and constants, built here from a planned
// call (backward_plan.hpp) and the command list's slots of its buffers.
#pragma once

#include <array>
#include <cstdint>

#include "backward_plan.hpp"
#include "command_list.hpp"
#include "context_impl.hpp"
#include "shader_abi.hpp"

namespace vkattn::detail {

inline uint32_t u32(int64_t v) { return static_cast<uint32_t>(v); }
// The push half-words of a binding's element offset: a member's low or high 16 bits.
constexpr std::size_t low(std::size_t member) { return member; }
constexpr std::size_t high(std::size_t member) { return member + 2; }

// The command list's slots of the buffers a backward-layout dispatch binds. The defaults are the
// backward pass's own list; dropout's output pass runs in the forward's list, whose slots differ.
struct BackwardSlots {
  uint32_t q = 1, k = 2, v = 3, out = 4, lse = 5, mask = 6, kv_lengths = 7, workspace = 8;
  PerHead<uint32_t> per_head{9, 10};
  uint32_t cu_seqlens_q = 11, grad_out = 12, grad_q = 13, grad_k = 14, grad_v = 15, grad_sinks = 16;
  static constexpr uint32_t count = 17;
};

// The push constants every dispatch of `plan` shares (`split`: per kernel).
BackwardPush backward_push(const BackwardCallPlan& plan);
// A tensor of the call's dtype in `slot` at `t`, from its first element.
Binding tensor_binding(uint32_t slot, const TensorLayout& t);
// The bindings every kernel of the layout reads: Q, K, V, O, dO, LSE, mask, key lengths (or
// cu_seqlens_k), cu_seqlens_q, the per-head tensors and D (the workspace's rows).
void bind_inputs(Dispatch& d, const BackwardCallPlan& plan, const BackwardSlots& slots);
// The constants of the rows kernel and, with `walk` (the dK/dV and dQ kernels), of those kernels' form.
BackwardConstants backward_constants(const ContextImpl& c, const BackwardCallPlan& plan, bool partial, bool walk = false);
// A dispatch of `shader` with its inputs bound (bind_inputs); the caller binds what it writes.
Dispatch backward_dispatch(ContextImpl& c, const BackwardCallPlan& plan, Shader shader, const BackwardConstants& k,
                           const BackwardPush& push, std::array<uint32_t, 3> groups, const BackwardSlots& slots = {});

}  // namespace vkattn::detail
