// Packed variable-length attention (vkattn/varlen_attention.hpp): what a run of a packed source's
// call must be given (check_packed_buffers, for PreparedAttention's record and run), and the varlen
// family's wrapper over PreparedAttention. Its plan (plan_varlen): the fused kernels on the packed
// tensors, each workgroup confined to one sequence by cu_seqlens, or the three-stage path with each
// row's softmax confined so.
#include "vkattn/varlen_attention.hpp"

#include <array>
#include <string>
#include <tuple>

#include "attention_record.hpp"
#include "call_buffers.hpp"
#include "command_list.hpp"
#include "context_impl.hpp"
#include "planned_call.hpp"
#include "int_math.hpp"
#include "kv_storage.hpp"
#include "varlen_plan.hpp"
#include "vkattn/error.hpp"

namespace vkattn {
namespace detail {

void check_packed_buffers(const ContextImpl& context, const PlannedCall& call, const AttentionBuffers& b,
                          const BufferSlice* workspace) {
  const VarlenAttentionLayouts& layouts = *call.packed_layouts;
  const AttentionProblem& p = call.planned.problem();
  BufferChecks checks(context, dtype_size(p.dtype));
  const uint64_t offsets = uint64_t(call.packed.batch) + 1;
  checks.tensor("q", b.q, layouts.q, false);
  // (K and V as bound: q8_0 in 16-bit units.)
  for (const auto& [name, buffer, t] : {std::tuple{"k", b.k, &layouts.k}, std::tuple{"v", b.v, &layouts.v}}) {
    const Binding bound = kv_binding(0, p.dtype, p.kv_quant, 0, t->required_elements());
    checks.add(name, buffer, 0, bound.element_size, kv_bytes(p.dtype, p.kv_quant, t->offset) / bound.element_size,
               bound.elements, false);
  }
  checks.tensor("out", b.out, layouts.out, true);
  checks.add("cu_seqlens_q", b.cu_seqlens_q.buffer, b.cu_seqlens_q.offset, 4, 0, offsets, false);
  checks.add("cu_seqlens_k", b.cu_seqlens_k.buffer, b.cu_seqlens_k.offset, 4, 0, offsets, false);
  if (BufferChecks::optional("lse", b.lse.buffer != nullptr, layouts.has_lse))
    checks.add("lse", b.lse.buffer, b.lse.offset, 4, 0, uint64_t(p.heads * p.seq_q), true);
  if (BufferChecks::optional("weights", b.weights.buffer != nullptr, layouts.weights))
    checks.add("weights", b.weights.buffer, b.weights.offset, 4, 0, uint64_t(p.heads * p.seq_q) * uint64_t(p.seq_k),
               true);
  checks.head_values(b.per_head(), layouts.per_head());
  checks.workspace(workspace, call.planned.workspace_bytes(), call.planned.fused ? "split-KV partials" : "scores");
  checks.finish();
}

}  // namespace detail

// A thin wrapper: the varlen family's layouts and buffers as one AttentionSpec (a PackedKv source)
// and its AttentionBuffers.
struct PreparedVarlenAttention::Impl {
  VarlenAttentionLayouts layouts;
  PreparedAttention call;
};

namespace {

AttentionBuffers buffers_of(const VarlenAttentionBuffers& b) {
  AttentionBuffers a;
  a.q = b.q;
  a.k = b.k;
  a.v = b.v;
  a.out = b.out;
  a.cu_seqlens_q = b.cu_seqlens_q;
  a.cu_seqlens_k = b.cu_seqlens_k;
  a.lse = b.lse;
  a.weights = b.weights;
  a.per_head() = b.per_head();
  return a;
}

}  // namespace

PreparedVarlenAttention::PreparedVarlenAttention(Context& context, const VarlenAttentionLayouts& layouts)
    : impl_(std::make_unique<Impl>(Impl{layouts, PreparedAttention(context, AttentionSpec::packed(layouts))})) {}

PreparedVarlenAttention::PreparedVarlenAttention(PreparedVarlenAttention&&) noexcept = default;
PreparedVarlenAttention& PreparedVarlenAttention::operator=(PreparedVarlenAttention&&) noexcept = default;
PreparedVarlenAttention::~PreparedVarlenAttention() = default;

const PreparedVarlenAttention::Impl& PreparedVarlenAttention::impl() const {
  if (!impl_)
    throw Error("PreparedVarlenAttention: used after being moved from (a moved-from PreparedVarlenAttention holds no call)");
  return *impl_;
}

const VarlenAttentionLayouts& PreparedVarlenAttention::layouts() const { return impl().layouts; }
const AttentionPlan& PreparedVarlenAttention::plan() const { return impl().call.plan(); }
uint64_t PreparedVarlenAttention::workspace_bytes() const { return impl().call.workspace_bytes(); }

void PreparedVarlenAttention::record(VkCommandBuffer command_buffer, const VarlenAttentionBuffers& buffers, BufferSlice workspace) const {
  impl().call.record(command_buffer, buffers_of(buffers), workspace);
}

void PreparedVarlenAttention::run(const VarlenAttentionBuffers& buffers) const { impl().call.run(buffers_of(buffers)); }

void varlen_attention(Context& context, const VarlenAttentionLayouts& layouts, const VarlenAttentionBuffers& buffers) {
  attention(context, AttentionSpec::packed(layouts), buffers_of(buffers));
}

}  // namespace vkattn
