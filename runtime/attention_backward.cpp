// The backward pass's command list and its public entry points (vkattn/attention_backward.hpp): the
// rows kernel (D = rowsum(dO∘O)) and the dsinks pass, then side by side the dK/dV kernel and the dQ
// kernel (or the three-stage form's chunks, backward_three_stage.hpp), then the sums of their split
// partials where they have splits (backward_plan.hpp).
#include <array>
#include <string>

#include "attention_push.hpp"
#include "attention_record.hpp"
#include "backward_dispatch.hpp"
#include "backward_plan.hpp"
#include "backward_plan_fit.hpp"
#include "backward_three_stage.hpp"
#include "plan_fit.hpp"
#include "call_buffers.hpp"
#include "command_list.hpp"
#include "context_impl.hpp"
#include "int_math.hpp"
#include "per_head_bindings.hpp"
#include "shader_abi.hpp"
#include "vkattn/attention_backward.hpp"
#include "vkattn/error.hpp"

namespace vkattn {
namespace detail {
namespace {

// The sum of a gradient's split partials at `parts_offset` of the workspace into its tensor `t` in
// `slot`: (batch, heads, seq) rows of t.dim values.
void emit_reduce(ContextImpl& c, CommandList& list, const BackwardCallPlan& plan, uint64_t parts_offset, uint32_t splits,
                 uint32_t slot, const TensorLayout& t) {
  ReducePush push{};
  push.batch = u32(t.batch);
  push.heads = u32(t.heads);
  push.seq = u32(t.seq);
  push.dim = u32(t.dim);
  push.splits = splits;
  push.out_sb = u32(t.stride_batch), push.out_sh = u32(t.stride_head), push.out_ss = u32(t.stride_seq);
  Dispatch d;
  d.use(c.pipelines->layout(KernelKind::backward_reduce));
  d.pipeline = c.pipelines->get(backward_reduce_pipeline(t.dtype, plan.workgroup));
  const uint64_t elements = uint64_t(splits) * uint64_t(t.batch) * uint64_t(t.heads) * uint64_t(t.seq) * uint64_t(t.dim);
  d.bind(REDUCE_PARTS_BINDING, Binding{BackwardSlots{}.workspace, parts_offset, 4, elements});
  d.bind(REDUCE_OUT_BINDING, tensor_binding(slot, t), offsetof(ReducePush, out_off));
  d.set_push(push);
  const uint64_t per_row = uint64_t(t.seq) * uint64_t(t.dim);
  d.groups = {u32(int64_t(std::min<uint64_t>(ceil_div(per_row, plan.workgroup), c.info.max_workgroup_count[0]))),
              u32(t.heads), u32(t.batch)};
  list.dispatch(d);
}

// The fused kernels' walks, side by side: dK/dV (keys outer) and dQ (query rows outer), into the
// gradients or, with splits, their partials.
void emit_fused_walks(ContextImpl& c, CommandList& list, const BackwardCallPlan& plan, const BackwardPush& push) {
  const BackwardSlots S;
  const AttentionProblem& p = plan.p;
  const AttentionLayouts& l = plan.forward.dense;
  const bool kv_split = plan.query_splits > 1, q_split = plan.key_splits > 1;
  const uint64_t all_keys = uint64_t(plan.query_splits) * uint64_t(p.batch) * uint64_t(p.kv_heads) * uint64_t(p.seq_k);
  {
    BackwardPush kv_push = push;
    kv_push.split = plan.split_rows;
    const Shader kv_shader = plan.tiles           ? Shader::attention_backward_kv_tiled
                             : plan.subgroup_form ? Shader::attention_backward_kv_subgroup
                                                  : Shader::attention_backward_kv;
    Dispatch d = backward_dispatch(c, plan, kv_shader, backward_constants(c, plan, kv_split, true), kv_push,
                                   {u32(int64_t(ceil_div(plan.keys_total, plan.kv_tile()))), u32(p.kv_heads),
                                    plan.batches * plan.query_splits});
    if (kv_split) {
      d.bind(BACKWARD_GRAD_A_BINDING, Binding{S.workspace, plan.dk_parts_offset, 4, all_keys * uint64_t(p.dim_qk)});
      d.bind(BACKWARD_GRAD_B_BINDING, Binding{S.workspace, plan.dv_parts_offset, 4, all_keys * uint64_t(p.dim_v)});
    } else {
      d.bind(BACKWARD_GRAD_A_BINDING, tensor_binding(S.grad_k, l.k), high(offsetof(BackwardPush, k_off)));
      d.bind(BACKWARD_GRAD_B_BINDING, tensor_binding(S.grad_v, l.v), high(offsetof(BackwardPush, v_off)));
    }
    list.dispatch(d);
  }
  {
    BackwardPush q_push = push;
    q_push.split = plan.split_keys;
    const uint64_t all_rows = uint64_t(plan.key_splits) * uint64_t(p.batch) * uint64_t(p.heads) * uint64_t(p.seq_q);
    const Shader q_shader = plan.tiles           ? Shader::attention_backward_q_tiled
                            : plan.subgroup_form ? Shader::attention_backward_q_subgroup
                                                 : Shader::attention_backward_q;
    Dispatch d = backward_dispatch(c, plan, q_shader, backward_constants(c, plan, q_split, true), q_push,
                                   {u32(int64_t(ceil_div(plan.rows_total, plan.q_tile()))), u32(p.heads),
                                    plan.batches * plan.key_splits});
    if (q_split)
      d.bind(BACKWARD_GRAD_A_BINDING, Binding{S.workspace, plan.dq_parts_offset, 4, all_rows * uint64_t(p.dim_qk)});
    else
      d.bind(BACKWARD_GRAD_A_BINDING, tensor_binding(S.grad_q, l.q), high(offsetof(BackwardPush, q_off)));
    list.dispatch(d);
  }
}

void emit_backward(ContextImpl& c, CommandList& list, const BackwardCallPlan& plan) {
  const BackwardSlots S;
  const AttentionProblem& p = plan.p;
  const AttentionLayouts& l = plan.forward.dense;
  const uint32_t wg = plan.workgroup;
  list.own_slot(S.workspace);
  // D of the previous run may still be read by it (a list replayed back to back).
  list.compute_barrier(VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT, VK_ACCESS_SHADER_WRITE_BIT);

  BackwardPush push = backward_push(plan);
  BackwardConstants rows_k = backward_constants(c, plan, false);
  list.dispatch(backward_dispatch(c, plan, Shader::attention_backward_rows, rows_k, push,
                                  {u32(int64_t(ceil_div(plan.rows_total, wg))), u32(p.heads), plan.batches}));
  list.compute_barrier(VK_ACCESS_SHADER_WRITE_BIT, VK_ACCESS_SHADER_READ_BIT);

  if (p.per_head.sinks) {
    rows_k.sinks_pass = 1;
    BackwardPush sinks_push = push;
    sinks_push.split = plan.batches;
    Dispatch d = backward_dispatch(c, plan, Shader::attention_backward_rows, rows_k, sinks_push, {u32(p.heads), 1, 1});
    d.bind(BACKWARD_GRAD_A_BINDING, Binding{S.grad_sinks, 0, 4, uint64_t(p.heads)}, high(offsetof(BackwardPush, q_off)));
    list.dispatch(d);
    // The pass only reads D, but its shader declares D's binding writable (the rows kernel's first
    // pass writes it), and synchronization validation goes by the declaration: order it before the
    // kernels that read D.
    list.compute_barrier(VK_ACCESS_SHADER_WRITE_BIT, VK_ACCESS_SHADER_READ_BIT);
  }

  if (plan.three_stage)
    emit_three_stage_backward(c, list, plan);
  else
    emit_fused_walks(c, list, plan, push);
  const bool kv_split = plan.query_splits > 1, q_split = plan.key_splits > 1;
  if (kv_split || q_split) {
    list.compute_barrier(VK_ACCESS_SHADER_WRITE_BIT, VK_ACCESS_SHADER_READ_BIT);
    if (kv_split) {
      emit_reduce(c, list, plan, plan.dk_parts_offset, plan.query_splits, S.grad_k, l.k);
      emit_reduce(c, list, plan, plan.dv_parts_offset, plan.query_splits, S.grad_v, l.v);
    }
    if (q_split) emit_reduce(c, list, plan, plan.dq_parts_offset, plan.key_splits, S.grad_q, l.q);
  }
}

// The extent of a tensor of `layout` in `buffer` (checked first: given, valid, large enough).
BufferExtent tensor_extent(const char* name, const Buffer* buffer, const TensorLayout& t, bool output) {
  const uint64_t esize = dtype_size(t.dtype);
  check_binding(name, buffer, 0, esize, uint64_t(t.required_elements()));
  return {name, buffer, buffer->offset() + uint64_t(t.offset) * esize, buffer->offset() + uint64_t(t.required_elements()) * esize,
          output};
}

// The backward's own buffers (the forward's are checked as the forward checks them, O and LSE read):
// each gradient at its tensor's layout, dsinks exactly with sinks, the caller's workspace large
// enough, and no gradient sharing a byte with another argument.
void check_backward_buffers(const ContextImpl& c, const BackwardCallPlan& plan, const BackwardBuffers& b,
                            const BufferSlice* workspace) {
  // (The forward's weights P are its own business: the backward neither reads nor needs them.)
  AttentionBuffers forward = b.forward;
  forward.weights = {};
  check_call(c, plan.forward, forward, nullptr);
  const AttentionLayouts& l = plan.forward.dense;
  std::array<BufferExtent, 10> extents;
  std::size_t n = 0;
  extents[n++] = tensor_extent("q", b.forward.q, l.q, false);
  extents[n++] = tensor_extent("k", b.forward.k, l.k, false);
  extents[n++] = tensor_extent("v", b.forward.v, l.v, false);
  extents[n++] = tensor_extent("out", b.forward.out, l.out, false);
  extents[n++] = tensor_extent("grad_out", b.grad_out, l.out, false);
  extents[n++] = tensor_extent("grad_q", b.grad_q, l.q, true);
  extents[n++] = tensor_extent("grad_k", b.grad_k, l.k, true);
  extents[n++] = tensor_extent("grad_v", b.grad_v, l.v, true);
  if (BufferChecks::optional("grad_sinks", b.grad_sinks.buffer != nullptr, plan.p.per_head.sinks)) {
    const uint64_t heads = uint64_t(plan.p.heads);
    check_binding("grad_sinks", b.grad_sinks.buffer, b.grad_sinks.offset, 4, heads);
    const uint64_t start = b.grad_sinks.buffer->offset() + b.grad_sinks.offset;
    extents[n++] = {"grad_sinks", b.grad_sinks.buffer, start, start + heads * 4, true};
  }
  if (workspace && plan.workspace_bytes > 0) {
    if (!workspace->buffer) throw Error("workspace: the backward pass needs " + std::to_string(plan.workspace_bytes) + " bytes; none given");
    check_binding("workspace", workspace->buffer, workspace->offset, 1, plan.workspace_bytes + plan.alignment);
    const uint64_t start = workspace->buffer->offset() + workspace->offset;
    extents[n++] = {"workspace", workspace->buffer, start, start + plan.workspace_bytes + plan.alignment, true};
  }
  check_extents(c, std::span(extents.data(), n));
}

// The slots of one run.
std::array<SlotBase, BackwardSlots::count> backward_slots(const BackwardCallPlan& plan, const BackwardBuffers& b,
                                                          VkBuffer workspace, uint64_t workspace_offset) {
  const auto tensor = [](const Buffer* buffer) { return buffer ? slot_of(*buffer) : SlotBase{}; };
  const auto slice = [](const BufferSlice& x) {
    return x.buffer ? slot_of(*x.buffer, x.offset) : SlotBase{};
  };
  const AttentionBuffers& f = b.forward;
  std::array<SlotBase, BackwardSlots::count> s{};
  const BackwardSlots S;
  s[S.q] = tensor(f.q);
  s[S.k] = tensor(f.k);
  s[S.v] = tensor(f.v);
  s[S.out] = tensor(f.out);
  s[S.lse] = slice(f.lse);
  s[S.mask] = tensor(f.mask);
  s[S.kv_lengths] = slice(plan.varlen ? f.cu_seqlens_k : f.kv_lengths);
  s[S.workspace] = SlotBase{workspace, align_up(workspace_offset, plan.alignment)};
  for (PerHeadTensor t : kPerHeadTensors) s[S.per_head[t]] = tensor(f[t]);
  s[S.cu_seqlens_q] = slice(f.cu_seqlens_q);
  s[S.grad_out] = tensor(b.grad_out);
  s[S.grad_q] = tensor(b.grad_q);
  s[S.grad_k] = tensor(b.grad_k);
  s[S.grad_v] = tensor(b.grad_v);
  s[S.grad_sinks] = slice(b.grad_sinks);
  return s;
}

}  // namespace
}  // namespace detail

struct PreparedAttentionBackward::Impl {
  std::shared_ptr<detail::ContextImpl> context;
  AttentionSpec spec;
  detail::BackwardCallPlan plan;
  detail::CommandList list;

  void check(const BackwardBuffers& buffers, const BufferSlice* workspace) const {
    detail::check_backward_buffers(*context, plan, buffers, workspace);
  }
  void replay(VkCommandBuffer cmd, const BackwardBuffers& buffers, VkBuffer workspace, uint64_t offset) const {
    list.replay(*context, cmd, detail::backward_slots(plan, buffers, workspace, offset));
  }
  // Plans `spec` on `context` (as for the device `plan_for` describes when given).
  static std::unique_ptr<Impl> make(Context& context, const AttentionSpec& spec, const DeviceInfo* plan_for = nullptr) {
    detail::ContextImpl& c = detail::impl_of(context);
    c.check_usable();
    auto impl = std::make_unique<Impl>();
    impl->context = detail::shared_impl_of(context);
    impl->spec = spec;
    impl->plan = detail::plan_backward(plan_for ? *plan_for : c.info, c.kernel, spec);
    impl->list = detail::CommandList(impl->plan.alignment);
    return impl;
  }
  void emit() { detail::emit_backward(*context, list, plan); }
  void run(const BackwardBuffers& buffers) const {
    // (The scratch is aligned; the workspace slot aligns up, so ask for the alignment's slack too.)
    const uint64_t bytes = plan.workspace_bytes ? plan.workspace_bytes + plan.alignment : 0;
    context->submit_with_scratch(bytes, [&](VkCommandBuffer cmd, VkBuffer scratch) {
      detail::barrier_before_attention(cmd);
      replay(cmd, buffers, scratch, 0);
      detail::barrier_after_attention(cmd);
    });
  }
};

PreparedAttentionBackward::PreparedAttentionBackward(Context& context, const AttentionSpec& spec)
    : impl_(Impl::make(context, spec)) {
  impl_->emit();
}
// As PreparedAttention's profile constructor (prepared_attention.cpp): the two kinds of PlanDoesNotFit.
PreparedAttentionBackward::PreparedAttentionBackward(Context& context, const AttentionSpec& spec, const DeviceInfo& plan_for) {
  std::unique_ptr<Impl> impl = detail::plan_for_profile(plan_for, [&] { return Impl::make(context, spec, &plan_for); });
  const DeviceInfo& here = context.device_info();
  detail::check_profile_plan_fits(plan_for, here, [&] { detail::check_backward_plan_fits(impl->plan, here); });
  impl->emit();  // only once the pipelines are known to be valid here
  detail::check_profile_plan_fits(plan_for, here, [&] { impl->list.check_fits(here); });
  impl_ = std::move(impl);
}
PreparedAttentionBackward::PreparedAttentionBackward(PreparedAttentionBackward&&) noexcept = default;
PreparedAttentionBackward& PreparedAttentionBackward::operator=(PreparedAttentionBackward&&) noexcept = default;
PreparedAttentionBackward::~PreparedAttentionBackward() = default;

const PreparedAttentionBackward::Impl& PreparedAttentionBackward::impl() const {
  if (!impl_) throw Error("PreparedAttentionBackward: used after being moved from");
  return *impl_;
}
const AttentionSpec& PreparedAttentionBackward::spec() const { return impl().spec; }
const BackwardPlan& PreparedAttentionBackward::plan() const { return impl().plan.report; }
uint64_t PreparedAttentionBackward::workspace_bytes() const {
  const Impl& p = impl();
  return p.plan.workspace_bytes ? p.plan.workspace_bytes + p.plan.alignment : 0;
}

void PreparedAttentionBackward::record(VkCommandBuffer cmd, const BackwardBuffers& buffers, BufferSlice workspace) const {
  const Impl& p = impl();
  p.context->check_usable();
  if (cmd == VK_NULL_HANDLE) throw Error("record: command_buffer is VK_NULL_HANDLE");
  p.check(buffers, &workspace);
  if (p.plan.workspace_bytes == 0)
    p.replay(cmd, buffers, VK_NULL_HANDLE, 0);
  else
    p.replay(cmd, buffers, workspace.buffer->handle(), workspace.buffer->offset() + workspace.offset);
}

void PreparedAttentionBackward::run(const BackwardBuffers& buffers) const {
  const Impl& p = impl();
  p.check(buffers, nullptr);
  p.run(buffers);
}

void attention_backward(Context& context, const AttentionSpec& spec, const BackwardBuffers& buffers) {
  const std::unique_ptr<PreparedAttentionBackward::Impl> call = PreparedAttentionBackward::Impl::make(context, spec);
  call->check(buffers, nullptr);
  call->emit();
  call->run(buffers);
}

}  // namespace vkattn
