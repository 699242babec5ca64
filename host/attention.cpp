// The public attention entry points: plan, record into a caller's command buffer, or run and wait.
#include <algorithm>
#include <string>

#include "attention_plan.hpp"
#include "attention_push.hpp"
#include "attention_record.hpp"
#include "attention_unfused.hpp"
#include "binding.hpp"
#include "call_buffers.hpp"
#include "context_impl.hpp"
#include "vkattn/attention.hpp"
#include "vkattn/error.hpp"

namespace vkattn {
namespace detail {
namespace {

// A tensor's binding starts at its first element (its layout offset), so chunks bind only their part.
Binding bind_from(const Buffer& buffer, int64_t offset, uint64_t element_size, int64_t end, uint64_t alignment) {
  return bind(buffer.handle(), buffer.offset() + uint64_t(offset) * element_size, element_size, uint64_t(end - offset),
              alignment);
}

Binding bind_slice(const BufferSlice& slice, uint64_t element_size, uint64_t elements, uint64_t alignment) {
  return bind(slice.buffer->handle(), slice.buffer->offset() + slice.offset, element_size, elements, alignment);
}

uint32_t u32(int64_t v) { return static_cast<uint32_t>(v); }

}  // namespace

void barrier_before_attention(VkCommandBuffer cmd) {
  VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  barrier.srcAccessMask = VK_ACCESS_HOST_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                          VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT;
  barrier.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
  vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                       VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &barrier, 0, nullptr, 0, nullptr);
}

void barrier_after_attention(VkCommandBuffer cmd) {
  VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                       0, 1, &barrier, 0, nullptr, 0, nullptr);
}

void compute_barrier(VkCommandBuffer cmd, VkAccessFlags before, VkAccessFlags after) {
  VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  barrier.srcAccessMask = before;
  barrier.dstAccessMask = after;
  vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &barrier, 0,
                       nullptr, 0, nullptr);
}

void barrier_between_dispatches(VkCommandBuffer cmd) {
  constexpr VkAccessFlags read_write = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
  compute_barrier(cmd, read_write, read_write);
}

namespace {

// The dispatches (and combines) of a chunk, range of query tiles by range; `args` are the chunk's
// (see chunk_args).
void record_chunk(ContextImpl& c, VkCommandBuffer cmd, const LaunchPlan& plan, const AttentionArgs& args,
                  VkBuffer workspace, uint64_t workspace_offset) {
  AttentionProblem p = plan.problem;
  p.batch = args.q.layout.batch;
  p.heads = args.q.layout.heads;
  p.kv_heads = args.k.layout.heads;
  const KernelConfig& cfg = plan.config;
  const uint64_t esize = dtype_size(p.dtype), align = plan.alignment;
  const std::string dtype = to_string(p.dtype);
  const bool split = plan.splits > 1;

  const auto bind_tensor = [&](const TensorRef& t) {
    return bind_from(*t.buffer, t.layout.offset, esize, t.layout.required_elements(), align);
  };
  Binding q = bind_tensor(args.q), o = bind_tensor(args.out);
  const uint64_t rows_total = uint64_t(p.batch) * p.heads * p.seq_q;
  Binding lse = args.lse.buffer ? bind_slice(args.lse, 4, rows_total, align) : bind_dummy(c);
  Binding mask = args.mask.buffer ? bind_from(*args.mask.buffer, args.mask.layout.offset, mask_type_size(args.mask.layout.type),
                                              args.mask.layout.required_elements(), align)
                                  : bind_dummy(c);
  Binding kv_len = args.kv_lengths.buffer ? bind_slice(args.kv_lengths, 4, p.batch, align) : bind_dummy(c);
  Binding partial_o = bind_dummy(c), partial_lse = bind_dummy(c);
  if (split) {
    const uint64_t base = (workspace_offset + align - 1) / align * align;
    const uint64_t lse_base = base + (plan.partial_o_bytes + align - 1) / align * align;
    partial_o.info = {workspace, base, plan.partial_o_bytes};
    partial_lse.info = {workspace, lse_base, plan.partial_lse_bytes};
  }

  AttentionPush push{};
  push.seq_q = u32(p.seq_q);
  push.seq_k = u32(p.seq_k);
  push.heads = u32(p.heads);
  push.group = u32(p.group_size());
  push.splits = plan.splits;
  push.keys_per_split = plan.keys_per_split;
  push.flags = mask_flags(p.causal, args.mask);
  if (args.kv_lengths.buffer) push.flags |= kFlagKvLengths;
  if (args.lse.buffer) push.flags |= kFlagWriteLse;
  if (split) push.flags |= kFlagPartial;
  push.scale = p.scale;
  const TensorLayout &ql = args.q.layout, &kl = args.k.layout, &vl = args.v.layout, &ol = args.out.layout;
  push.q_sb = u32(ql.stride_batch), push.q_sh = u32(ql.stride_head), push.q_ss = u32(ql.stride_seq);
  push.q_off = q.element_offset;
  push.k_sb = u32(kl.stride_batch), push.k_sh = u32(kl.stride_head), push.k_ss = u32(kl.stride_seq);

  push.v_sb = u32(vl.stride_batch), push.v_sh = u32(vl.stride_head), push.v_ss = u32(vl.stride_seq);

  push.o_sb = u32(ol.stride_batch), push.o_sh = u32(ol.stride_head), push.o_ss = u32(ol.stride_seq);
  push.o_off = o.element_offset;
  if (args.mask.buffer) {
    mask_strides(args.mask.layout, push.m_sb, push.m_sh, push.m_ss);
    push.m_off = mask.element_offset;
  }
  push.lse_off = lse.element_offset;
  push.kv_len_off = kv_len.element_offset;

  const KernelLayout& layout = c.pipelines->layout(KernelKind::attention);
  const VkPipeline fused = c.pipelines->get(
      KernelKind::attention, std::string(cfg.rowwise ? "attention_rowwise_" : "attention_fused_") + dtype,
      {cfg.rows, cfg.threads_per_row, cfg.keys_per_tile, u32(p.dim_qk), u32(p.dim_v), cfg.workgroup_size()});
  VkPipeline combine = VK_NULL_HANDLE;
  if (split)
    combine = c.pipelines->get(KernelKind::combine, "attention_combine_" + dtype, {u32(p.dim_v), plan.combine_workgroup});

  const KernelLayout& clayout = c.pipelines->layout(KernelKind::combine);
  CombinePush cpush{};
  cpush.splits = plan.splits;
  cpush.heads = u32(p.heads);
  cpush.seq_q = u32(p.seq_q);
  cpush.o_sb = push.o_sb, cpush.o_sh = push.o_sh, cpush.o_ss = push.o_ss, cpush.o_off = push.o_off;
  cpush.lse_off = lse.element_offset;
  cpush.write_lse = args.lse.buffer ? 1u : 0u;

  // One range of query tiles at a time (LaunchPlan::tiles_per_range): its split dispatches write the
  // workspace, its combine reads it back, and the next range reuses it.
  for (uint32_t t0 = 0; t0 < plan.query_tiles; t0 += plan.tiles_per_range) {
    const uint32_t tiles = std::min(plan.tiles_per_range, plan.query_tiles - t0);
    const uint64_t row_base = uint64_t(t0) * cfg.rows;
    const uint64_t range_rows = std::min<uint64_t>(uint64_t(tiles) * cfg.rows, uint64_t(p.seq_q) - row_base);
    if (split) {
      // The workspace may still be read by the previous range's combine pass, or by an earlier one
      // recorded in this command buffer (write-after-read), and was written by the previous range's
      // split dispatches (write-after-write).
      compute_barrier(cmd, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT, VK_ACCESS_SHADER_WRITE_BIT);
    } else if (t0 > 0) {
      // Ranges write disjoint rows of O and LSE, but through the same bindings, and the placeholder
      // buffer sits in both write-only (partial) and read-only (mask, kv_lengths) slots: without
      // this barrier synchronization validation, which sees bindings and not rows, reports hazards
      // (measured: read-after-write on the placeholder). Unsplit ranges exist only past
      // maxComputeWorkGroupCount[0] tiles: one barrier per 65535 or more workgroups.
      compute_barrier(cmd, VK_ACCESS_SHADER_WRITE_BIT, VK_ACCESS_SHADER_WRITE_BIT);
    }

    // One dispatch per range of splits; K and V are bound from the range's first key (binding_key in
    // attention_common.glsl), so a KV head longer than one binding runs as several dispatches.
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, fused);
    push.tile_base = t0;
    for (uint32_t s0 = 0; s0 < plan.splits; s0 += plan.splits_per_dispatch) {
      const uint32_t n = std::min(plan.splits_per_dispatch, plan.splits - s0);
      const int64_t k0 = int64_t(s0) * plan.keys_per_split;
      const int64_t nk = std::min<int64_t>(int64_t(n) * plan.keys_per_split, p.seq_k - k0);
      const auto key_range = [&](TensorLayout l) {
        l.offset += k0 * l.stride_seq;
        l.seq = nk;
        return l;
      };
      const TensorLayout k_range = key_range(kl), v_range = key_range(vl);
      Binding k = bind_from(*args.k.buffer, k_range.offset, esize, k_range.required_elements(), align);
      Binding v = bind_from(*args.v.buffer, v_range.offset, esize, v_range.required_elements(), align);
      push.k_off = k.element_offset;
      push.v_off = v.element_offset;
      push.splits = n;
      push.split_base = s0;
      const Binding* bindings[9] = {&q, &k, &v, &o, &lse, &mask, &kv_len, &partial_o, &partial_lse};
      push_bindings(c, cmd, layout.pipeline_layout, bindings, 9);
      vkCmdPushConstants(cmd, layout.pipeline_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(push), &push);
      vkCmdDispatch(cmd, tiles, u32(p.heads), u32(p.batch) * n);
    }

    if (!split) continue;
    compute_barrier(cmd, VK_ACCESS_SHADER_WRITE_BIT, VK_ACCESS_SHADER_READ_BIT);  // the partials, before the combine

    const uint64_t rows = uint64_t(p.batch) * p.heads * range_rows;
    cpush.rows = u32(int64_t(rows));
    cpush.row_base = u32(int64_t(row_base));
    cpush.range_rows = u32(int64_t(range_rows));
    const Binding* cbindings[4] = {&partial_o, &partial_lse, &o, &lse};
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, combine);
    push_bindings(c, cmd, clayout.pipeline_layout, cbindings, 4);
    vkCmdPushConstants(cmd, clayout.pipeline_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(cpush), &cpush);
    const uint64_t gx = std::min<uint64_t>(rows, c.info.max_workgroup_count[0]);
    vkCmdDispatch(cmd, u32(int64_t(gx)), u32(int64_t((rows + gx - 1) / gx)), 1);
  }
}

}  // namespace

void record_planned_attention(ContextImpl& c, VkCommandBuffer cmd, const LaunchPlan& plan, const AttentionArgs& args,
                              VkBuffer workspace, uint64_t workspace_offset) {
  const AttentionProblem& p = plan.problem;
  if (plan.batch_chunk == p.batch && plan.head_chunk == p.heads) {
    record_chunk(c, cmd, plan, args, workspace, workspace_offset);
    return;
  }
  for (int64_t b0 = 0; b0 < p.batch; b0 += plan.batch_chunk)
    for (int64_t h0 = 0; h0 < p.heads; h0 += plan.head_chunk) {
      const int64_t nb = std::min(plan.batch_chunk, p.batch - b0), nh = std::min(plan.head_chunk, p.heads - h0);
      record_chunk(c, cmd, plan, chunk_args(args, p.group_size(), b0, nb, h0, nh), workspace, workspace_offset);
    }
}

void check_path(AttentionPath path) {
  if (path != AttentionPath::automatic && path != AttentionPath::fused && path != AttentionPath::unfused)
    throw Error("path: invalid value " + std::to_string(static_cast<int>(path)) + " (expected automatic, fused or unfused)");
}

PlannedAttention plan_any_path(const ContextImpl& context, const AttentionArgs& args, const BufferSlice* workspace) {
  check_path(args.path);
  PlannedAttention planned;
  bool unfused = args.path == AttentionPath::unfused;
  if (args.weights.buffer) {
    if (args.path == AttentionPath::fused)
      throw Error("path: fused, but the weights P were requested; only the unfused (three-stage) path computes them "
                  "(use path auto or unfused)");
    unfused = true;
  }
  if (unfused)
    planned.unfused = make_unfused_plan(context.info, args);
  else
    planned.fused = make_launch_plan(context.info, context.kernel, args);
  const uint64_t need = planned.workspace_bytes();
  if (workspace && need > 0) {
    if (!workspace->buffer || !workspace->buffer->valid())
      throw Error(std::string("workspace: this call (") + (planned.unfused ? "the unfused path's scores" : "split-KV partials") +
                  ") needs a workspace of " + std::to_string(need) + " bytes (plan_attention().workspace_bytes)");
    if (workspace->offset > workspace->buffer->size() || workspace->buffer->size() - workspace->offset < need)
      throw Error("workspace: needs " + std::to_string(need) + " bytes, the slice holds " +
                  std::to_string(workspace->buffer->size() - std::min(workspace->offset, workspace->buffer->size())));
  }
  check_call_buffers(context, args, planned.unfused ? planned.unfused->problem : planned.fused->problem, workspace, need);
  return planned;
}

void record_any_path(ContextImpl& c, VkCommandBuffer cmd, const PlannedAttention& planned, const AttentionArgs& args,
                     VkBuffer workspace, uint64_t workspace_offset) {
  if (planned.unfused)
    record_unfused_attention(c, cmd, *planned.unfused, args, workspace, workspace_offset);
  else
    record_planned_attention(c, cmd, *planned.fused, args, workspace, workspace_offset);
}

}  // namespace detail

AttentionPlan plan_attention(const Context& context, const AttentionArgs& args) {
  const detail::PlannedAttention planned = detail::plan_any_path(context.impl(), args);
  AttentionPlan plan;
  plan.workspace_bytes = planned.workspace_bytes();
  if (planned.unfused) {
    const detail::UnfusedPlan& up = *planned.unfused;
    plan.path = "unfused";
    plan.kernel = "gemm";
    plan.scores_bytes = up.chunk_scores_bytes;
    plan.chunks = up.chunks;
    return plan;
  }
  const detail::LaunchPlan& lp = *planned.fused;
  plan.rows_per_workgroup = lp.config.rows;
  plan.threads_per_row = lp.config.threads_per_row;
  plan.keys_per_tile = lp.config.keys_per_tile;
  plan.splits = lp.splits;
  plan.keys_per_split = lp.keys_per_split;
  plan.path = "fused";
  plan.kernel = lp.config.rowwise ? "rowwise" : "tiled";
  const auto ceil_div = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  plan.chunks = uint32_t(ceil_div(lp.problem.batch, lp.batch_chunk) * ceil_div(lp.problem.heads, lp.head_chunk) *
                         lp.query_ranges * ceil_div(lp.splits, lp.splits_per_dispatch));
  return plan;
}

void record_attention(Context& context, VkCommandBuffer command_buffer, const AttentionArgs& args, BufferSlice workspace) {
  context.impl().check_usable();
  if (command_buffer == VK_NULL_HANDLE) throw Error("record_attention: command_buffer is VK_NULL_HANDLE");
  const detail::PlannedAttention planned = detail::plan_any_path(context.impl(), args, &workspace);
  VkBuffer ws = VK_NULL_HANDLE;
  uint64_t ws_offset = 0;
  if (planned.workspace_bytes() > 0) {
    ws = workspace.buffer->handle();
    ws_offset = workspace.buffer->offset() + workspace.offset;
  }
  detail::record_any_path(context.impl(), command_buffer, planned, args, ws, ws_offset);
}

void attention(Context& context, const AttentionArgs& args) {
  detail::ContextImpl& c = context.impl();
  const detail::PlannedAttention planned = detail::plan_any_path(c, args);
  c.submit_with_scratch(planned.workspace_bytes(), [&](VkCommandBuffer cmd, VkBuffer workspace) {
    detail::barrier_before_attention(cmd);
    detail::record_any_path(c, cmd, planned, args, workspace, 0);
    detail::barrier_after_attention(cmd);
  });
}

}  // namespace vkattn
