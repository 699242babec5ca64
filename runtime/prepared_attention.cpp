// The public attention entry points. A PreparedAttention plans a call once (path, tiles, limits)
// and keeps its command list; record() and run() check the call's buffers and replay the list.
// attention(), record_attention() and plan_attention() are conveniences over the same steps.
#include <algorithm>
#include <array>
#include <optional>
#include <string>

#include "attention_plan.hpp"
#include "int_math.hpp"
#include "attention_record.hpp"
#include "attention_unfused.hpp"
#include "call_buffers.hpp"
#include "command_list.hpp"
#include "context_impl.hpp"
#include "dropout_output.hpp"
#include "plan_fit.hpp"
#include "planned_call.hpp"
#include "vkattn/attention.hpp"
#include "vkattn/error.hpp"

namespace vkattn {
namespace detail {
AttentionPlan report_of(const PathPlan& planned) {
  AttentionPlan plan;
  plan.workspace_bytes = planned.workspace_bytes();
  if (planned.unfused) {
    const UnfusedPlan& up = *planned.unfused;
    plan.path = "unfused";
    plan.kernel = "gemm";
    plan.scores_bytes = up.chunk_scores_bytes;
    plan.chunks = up.chunks;
    return plan;
  }
  const FusedPlan& lp = *planned.fused;
  plan.rows_per_workgroup = lp.config.rows;
  plan.threads_per_row = lp.config.threads_per_row;
  plan.keys_per_tile = lp.config.keys_per_tile;
  plan.splits = lp.splits;
  plan.keys_per_split = lp.keys_per_split;
  plan.path = "fused";
  plan.kernel = lp.config.name();
  plan.cascade = planned.cascade.has_value();
  plan.chunks = uint32_t(ceil_div(uint64_t(lp.problem.batch), uint64_t(lp.batch_chunk)) *
                         ceil_div(uint64_t(lp.problem.heads), uint64_t(lp.head_chunk)) * lp.query_ranges *
                         ceil_div(lp.splits, lp.splits_per_dispatch));
  return plan;
}

CallNeeds needs_of(const PathPlan& planned, const AttentionLayouts& layouts, bool weights) {
  return call_needs(planned.problem(), layouts, weights, planned.workspace_bytes(),
                    planned.unfused ? "the unfused path's scores" : "split-KV partials");
}

void check_path(AttentionPath path) {
  if (path != AttentionPath::automatic && path != AttentionPath::fused && path != AttentionPath::unfused)
    throw Error("path: invalid value " + std::to_string(static_cast<int>(path)) + " (expected automatic, fused or unfused)");
}

// Past kCpuSubgroupMaxHeadDim on a CPU device, the three-stage plan of a call whose GEMMs have at
// least kCpuWideGemmRows rows (prefill, or a GQA/MQA group's decode rows packed): there its GEMMs
// are faster than the fused kernels, which run these dims on the decode form or rowwise for their
// JIT time. Lavapipe, Mesa 22.3.6, f16 over 8192 keys: B1 H8 512x512 d512 prefill 177-199 ms against
// 412 for the subgroup kernel and 1004-1016 for rowwise; MLA decode (16 heads on one KV head,
// 576/512) 36 ms against 128 for the decode form, GQA 32/8 d512 decode (4 rows) 174 against 235,
// but d512 MHA decode (1 row) 148 against 116 and GQA 16/8 d320 (2 rows) 103 against 74. None
// (the fused path) otherwise: q8_0 K/V, GPUs, and a call the three-stage path cannot take (a decode
// past its key limits on lavapipe, which the fused path's splits cover). A paged call (`paged`, from
// plan_paged) takes the same rule: MLA's decode from its latent cache, pages of 64, 38 ms against 131.
std::optional<UnfusedPlan> wide_heads_three_stage(const DeviceInfo& device, const AttentionLayouts& layouts,
                                                  const PagedKeys* paged) {
  const int64_t widest = std::max(layouts.q.dim, layouts.v.dim);
  if (!device.is_cpu() || widest <= kCpuSubgroupMaxHeadDim || layouts.kv_quant != KvQuant::none) return std::nullopt;
  if (layouts.q.seq >= kCpuPrefillRows) return make_unfused_plan(device, layouts, false, paged);  // its errors are the call's
  UnfusedPlan plan;
  try {
    plan = make_unfused_plan(device, layouts, false, paged);
  } catch (const Error&) {
    return std::nullopt;
  }
  if (plan.gemm_rows() < kCpuWideGemmRows) return std::nullopt;
  return plan;
}

PathPlan plan_path(const DeviceInfo& device, KernelVariant variant, const AttentionLayouts& layouts,
                           bool weights, AttentionPath path, const VarlenRows* varlen) {
  check_path(path);
  PathPlan planned;
  bool unfused = path == AttentionPath::unfused;
  if (weights) {
    if (path == AttentionPath::fused)
      throw Error("path: fused, but the weights P were requested; only the unfused (three-stage) path computes them "
                  "(use path auto or unfused)");
    unfused = true;
  }
  if (unfused)
    planned.unfused = make_unfused_plan(device, layouts, weights);
  else if (path == AttentionPath::automatic)
    planned.unfused = wide_heads_three_stage(device, layouts);
  if (!planned.unfused)
    planned.fused = plan_fused(device, variant, layouts, true, nullptr, varlen);
  else if (varlen)
    planned.unfused->varlen_batch = varlen->batch;
  return planned;
}

void emit_attention(ContextImpl& c, CommandList& list, const PathPlan& planned, const AttentionLayouts& layouts,
                    const AttentionSlots& slots) {
  list.own_slot(slots.workspace);
  if (planned.unfused)
    emit_unfused_attention(c, list, *planned.unfused, layouts, slots);
  else
    emit_fused_attention(c, list, *planned.fused, layouts, slots);
}

void barrier_before_attention(VkCommandBuffer cmd) {
  VkMemoryBarrier barrier{};
  barrier.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  barrier.srcAccessMask = VK_ACCESS_HOST_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                          VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT;
  barrier.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
  vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                       VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &barrier, 0, nullptr, 0, nullptr);
}

void barrier_after_attention(VkCommandBuffer cmd) {
  VkMemoryBarrier barrier{};
  barrier.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                       0, 1, &barrier, 0, nullptr, 0, nullptr);
}

}  // namespace detail

AttentionSpec AttentionSpec::of(const AttentionArgs& args) {
  AttentionLayouts layouts;
  layouts.q = args.q.layout;
  layouts.k = args.k.layout;
  layouts.v = args.v.layout;
  layouts.out = args.out.layout;
  if (args.mask.buffer) layouts.mask = args.mask.layout;
  for (PerHeadTensor t : kPerHeadTensors)
    if (args[t].buffer) layouts[t] = args[t].layout;
  layouts.has_kv_lengths = args.kv_lengths.buffer != nullptr;
  layouts.has_lse = args.lse.buffer != nullptr;
  layouts.options = args.options;
  layouts.kv_quant = args.kv_quant;
  return AttentionSpec::dense(layouts, args.weights.buffer != nullptr, args.path);
}

AttentionBuffers AttentionBuffers::of(const AttentionArgs& args) {
  AttentionBuffers b;
  b.q = args.q.buffer;
  b.k = args.k.buffer;
  b.v = args.v.buffer;
  b.out = args.out.buffer;
  b.mask = args.mask.buffer;
  for (PerHeadTensor t : kPerHeadTensors) b[t] = args[t].buffer;
  b.lse = args.lse;
  b.kv_lengths = args.kv_lengths;
  b.weights = args.weights;
  return b;
}

struct PreparedAttention::Impl {
  std::shared_ptr<detail::ContextImpl> context;
  AttentionSpec spec;
  detail::PlannedCall call;
  std::optional<detail::BackwardCallPlan> dropout;  // with dropout: its output pass (dropout_output.hpp)
  AttentionPlan report;
  detail::CommandList list;

  uint64_t workspace_bytes() const { return call.planned.workspace_bytes(); }
  // The buffer checks of every run (planned_call.hpp); `workspace` null for vkattn's scratch.
  void check(const AttentionBuffers& buffers, const BufferSlice* workspace) const {
    detail::check_call(*context, call, buffers, workspace);
  }
  // `workspace`: where the workspace starts (its buffer, byte and texel view).
  void replay(VkCommandBuffer cmd, const AttentionBuffers& buffers, const detail::SlotBase& workspace) const {
    list.replay(*context, cmd, detail::slots_of(call, buffers, workspace));
  }
  void record(VkCommandBuffer cmd, const AttentionBuffers& buffers, const BufferSlice& workspace) const {
    replay(cmd, buffers, workspace_bytes() == 0 ? detail::SlotBase{} : detail::slot_of(*workspace.buffer, workspace.offset));
  }
  void run(const AttentionBuffers& buffers) const {
    context->submit_with_scratch(workspace_bytes(), [&](VkCommandBuffer cmd, VkBuffer scratch) {
      detail::barrier_before_attention(cmd);
      replay(cmd, buffers, detail::SlotBase{scratch, 0, context->scratch_texel_view()});
      detail::barrier_after_attention(cmd);
    });
  }

  // Plans `spec` on `context` (as for the device `plan_for` describes when given); the command list
  // is emitted apart (emit), so the one-call conveniences check the buffers before any pipeline is built.
  static std::unique_ptr<Impl> plan(Context& context, const AttentionSpec& spec, const DeviceInfo* plan_for = nullptr) {
    detail::ContextImpl& c = detail::impl_of(context);
    c.check_usable();
    auto impl = std::make_unique<Impl>();
    impl->context = detail::shared_impl_of(context);
    impl->spec = spec;
    impl->call = detail::plan_call(plan_for ? *plan_for : c.info, c.kernel, spec);
    impl->dropout = detail::plan_dropout_output(plan_for ? *plan_for : c.info, c.kernel, spec);
    impl->report = detail::report_of(impl->call.planned);
    impl->list = detail::CommandList(impl->call.planned.alignment());
    return impl;
  }
  // Builds the pipelines (if this Context has not yet) and the command list.
  void emit() {
    detail::emit_call(*context, list, call);
    if (dropout) detail::emit_dropout_output(*context, list, *dropout, detail::AttentionSlots{});
  }
};

PreparedAttention::PreparedAttention(Context& context, const AttentionSpec& spec) : impl_(Impl::plan(context, spec)) {
  impl_->emit();
}

PreparedAttention::PreparedAttention(Context& context, const AttentionSpec& spec, const DeviceInfo& profile) {
  std::unique_ptr<Impl> impl = detail::plan_for_profile(profile, [&] { return Impl::plan(context, spec, &profile); });
  const DeviceInfo& here = context.device_info();
  detail::check_profile_plan_fits(profile, here, [&] {
    detail::check_plan_fits(impl->call.planned, detail::planning_layouts(impl->call), spec.weights, here);
  });
  impl->emit();  // only once the pipelines are known to be valid here
  detail::check_profile_plan_fits(profile, here, [&] { impl->list.check_fits(here); });
  impl_ = std::move(impl);
}

PreparedAttention::PreparedAttention(PreparedAttention&&) noexcept = default;
PreparedAttention& PreparedAttention::operator=(PreparedAttention&&) noexcept = default;
PreparedAttention::~PreparedAttention() = default;

const PreparedAttention::Impl& PreparedAttention::impl() const {
  if (!impl_)
    throw Error("PreparedAttention: used after being moved from (a moved-from PreparedAttention holds no call)");
  return *impl_;
}

const AttentionSpec& PreparedAttention::spec() const { return impl().spec; }
const AttentionPlan& PreparedAttention::plan() const { return impl().report; }
uint64_t PreparedAttention::workspace_bytes() const { return impl().workspace_bytes(); }

void PreparedAttention::record(VkCommandBuffer command_buffer, const AttentionBuffers& buffers, BufferSlice workspace) const {
  const Impl& p = impl();
  p.context->check_usable();
  if (command_buffer == VK_NULL_HANDLE) throw Error("record: command_buffer is VK_NULL_HANDLE");
  p.check(buffers, &workspace);
  p.record(command_buffer, buffers, workspace);
}

void PreparedAttention::run(const AttentionBuffers& buffers) const {
  const Impl& p = impl();
  p.check(buffers, nullptr);
  p.run(buffers);
}

void detail::record_with_scratch(const PreparedAttention& prepared, VkCommandBuffer cmd, const AttentionBuffers& buffers,
                                 VkBuffer scratch, VkBufferView scratch_texel) {
  const PreparedAttention::Impl& p = prepared.impl();
  p.check(buffers, nullptr);
  p.replay(cmd, buffers, detail::SlotBase{scratch, 0, scratch_texel});
}

AttentionPlan plan_attention(const Context& context, const AttentionArgs& args) {
  const detail::ContextImpl& c = detail::impl_of(context);
  const detail::PlannedCall call = detail::plan_call(c.info, c.kernel, AttentionSpec::of(args));
  detail::check_call(c, call, AttentionBuffers::of(args), nullptr);
  return detail::report_of(call.planned);
}

void record_attention(Context& context, VkCommandBuffer command_buffer, const AttentionArgs& args, BufferSlice workspace) {
  detail::impl_of(context).check_usable();
  if (command_buffer == VK_NULL_HANDLE) throw Error("record_attention: command_buffer is VK_NULL_HANDLE");
  const std::unique_ptr<PreparedAttention::Impl> call = PreparedAttention::Impl::plan(context, AttentionSpec::of(args));
  const AttentionBuffers buffers = AttentionBuffers::of(args);
  call->check(buffers, &workspace);
  call->emit();
  call->record(command_buffer, buffers, workspace);
}

void attention(Context& context, const AttentionSpec& spec, const AttentionBuffers& buffers) {
  const std::unique_ptr<PreparedAttention::Impl> call = PreparedAttention::Impl::plan(context, spec);
  call->check(buffers, nullptr);
  call->emit();
  call->run(buffers);
}

void attention(Context& context, const AttentionArgs& args) {
  attention(context, AttentionSpec::of(args), AttentionBuffers::of(args));
}

}  // namespace vkattn
