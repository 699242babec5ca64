#include "dropout_output.hpp"

#include <string>
#include <variant>

#include "backward_dispatch.hpp"
#include "int_math.hpp"
#include "llvmpipe_limits.hpp"
#include "vkattn/error.hpp"

namespace vkattn::detail {

std::optional<BackwardCallPlan> plan_dropout_output(const DeviceInfo& device, KernelVariant variant,
                                                    const AttentionSpec& spec) {
  if (!spec.options.dropout || !(spec.options.dropout->p > 0.0f)) return std::nullopt;
  const std::string p = "dropout (p = " + std::to_string(spec.options.dropout->p) + ")";
  if (std::holds_alternative<PagedKv>(spec.kv))
    throw Error(p + ": a paged KV cache is an inference layout; dropout takes dense or packed K and V");
  if (spec.kv_quant != KvQuant::none) throw Error(p + ": q8_0 K and V are an inference layout; dropout takes K and V in the call's dtype");
  if (!spec.lse)
    throw Error(p + ": needs the call's lse (the forward's log-sum-exp, which its output pass and the backward pass read)");
  BackwardCallPlan plan = plan_backward(device, variant, spec);
  if (device.is_llvmpipe && plan.keys_total > kLlvmpipeLoopBudget)
    throw Error(p + ": " + std::to_string(plan.keys_total) + " keys are more than dropout's output pass walks within "
                "lavapipe's loop limit (" + std::to_string(kLlvmpipeLoopBudget) + ")");
  return plan;
}

void emit_dropout_output(ContextImpl& c, CommandList& list, const BackwardCallPlan& plan, const AttentionSlots& slots) {
  BackwardSlots s;
  s.q = slots.q, s.k = slots.k, s.v = slots.v, s.out = slots.out, s.lse = slots.lse, s.mask = slots.mask;
  s.kv_lengths = slots.kv_lengths, s.workspace = slots.workspace, s.per_head = slots.per_head;
  s.cu_seqlens_q = slots.block_table;  // (a packed call's cu_seqlens_q sits in the block table's slot)
  // The forward's O and LSE, written: read by the pass, and O overwritten.
  list.compute_barrier(VK_ACCESS_SHADER_WRITE_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
  const AttentionProblem& p = plan.p;
  BackwardConstants k = backward_constants(c, plan, false);
  Dispatch d = backward_dispatch(c, plan, Shader::attention_dropout_output, k, backward_push(plan),
                                 {u32(int64_t(ceil_div(plan.rows_total, plan.workgroup))), u32(p.heads), plan.batches}, s);
  // The pass reads neither O, dO nor D: their bindings are the placeholder, and it writes O alone.
  d.bind(BACKWARD_O_BINDING, kPlaceholder);
  d.bind(BACKWARD_DO_BINDING, kPlaceholder);
  d.bind(BACKWARD_ROWS_BINDING, kPlaceholder);
  d.bind(BACKWARD_GRAD_A_BINDING, tensor_binding(slots.out, plan.forward.dense.out), high(offsetof(BackwardPush, o_off)));
  list.dispatch(d);
}

}  // namespace vkattn::detail
