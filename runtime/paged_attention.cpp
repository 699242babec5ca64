// Paged-KV-cache attention (vkattn/paged_attention.hpp): the recorded work of a paged source's call
// (the append of new tokens, kv_append.comp, then the fused kernels or the three-stage path's GEMMs
// reading the caches through the block table, as plan_paged planned them), what a run of it must be given (check_paged_buffers),
// and the paged family's wrapper over PreparedAttention.
#include "vkattn/paged_attention.hpp"

#include <algorithm>
#include <array>
#include <string>
#include <tuple>

#include "attention_plan.hpp"
#include "attention_record.hpp"
#include "call_buffers.hpp"
#include "command_list.hpp"
#include "context_impl.hpp"
#include "planned_call.hpp"
#include "int_math.hpp"
#include "kv_storage.hpp"
#include "shader_abi.hpp"
#include "vkattn/error.hpp"

namespace vkattn {
namespace detail {
namespace {

uint32_t u32(int64_t v) { return static_cast<uint32_t>(v); }

// k_new and v_new written into the caches at tokens cache_lens[b] .. (kv_append.comp).
void emit_kv_append(ContextImpl& c, CommandList& list, const AttentionProblem& p, const PagedKeys& paged,
                    const TensorLayout& k_new, const TensorLayout& v_new, const AttentionSlots& slots) {
  const uint64_t esize = dtype_size(p.dtype);
  const auto tensor = [&](uint32_t slot, const TensorLayout& t) {
    return Binding{slot, uint64_t(t.offset) * esize, esize, uint64_t(t.required_elements() - t.offset)};
  };
  KvAppendPush push{};
  push.batch = u32(p.batch);
  push.kv_heads = u32(p.kv_heads);
  push.seq_new = u32(paged.seq_new);
  push.dim_qk = u32(p.dim_qk);
  push.dim_v = u32(p.dim_v);
  push.page_size = paged.page_size;
  push.max_pages = u32(paged.max_pages);
  push.num_pages = u32(paged.num_pages);
  const bool hnd = paged.order == PageOrder::hnd;  // rows of a page: nhd (slot, head), hnd (head, slot)
  push.slot_rows = hnd ? 1u : u32(p.kv_heads);
  push.head_rows = hnd ? paged.page_size : 1u;
  push.kn_sb = u32(k_new.stride_batch), push.kn_sh = u32(k_new.stride_head), push.kn_ss = u32(k_new.stride_seq);
  push.vn_sb = u32(v_new.stride_batch), push.vn_sh = u32(v_new.stride_head), push.vn_ss = u32(v_new.stride_seq);
  push.kc_row = u32(paged.k_row), push.vc_row = u32(paged.v_row);
  push.write_v = paged.appends_v ? 1u : 0u;

  Dispatch d;
  d.use(c.pipelines->layout(KernelKind::kv_append));
  const bool q8_0 = p.kv_quant == KvQuant::q8_0;
  d.pipeline = c.pipelines->get(kv_append_pipeline(p.dtype, q8_0 ? KV_FORMAT_Q8_0 : KV_FORMAT_AS_Q));
  d.bind(KV_APPEND_K_NEW_BINDING, tensor(slots.k_new, k_new), offsetof(KvAppendPush, kn_off));
  // k_new alone (V a view of K's rows): K's slots stand in for V's, which write_v 0 leaves unwritten.
  const uint32_t v_new_slot = paged.appends_v ? slots.v_new : slots.k_new;
  const uint32_t v_cache_slot = paged.appends_v ? slots.v : slots.k;
  d.bind(KV_APPEND_V_NEW_BINDING, tensor(v_new_slot, v_new), offsetof(KvAppendPush, vn_off));
  d.bind(KV_APPEND_K_CACHE_BINDING, kv_binding(slots.k, p.dtype, p.kv_quant, 0, paged.k_elements), offsetof(KvAppendPush, kc_off));
  d.bind(KV_APPEND_V_CACHE_BINDING, kv_binding(v_cache_slot, p.dtype, p.kv_quant, 0, paged.v_elements), offsetof(KvAppendPush, vc_off));
  d.bind(KV_APPEND_BLOCK_TABLE_BINDING, Binding{slots.block_table, 0, 4, uint64_t(p.batch * paged.max_pages)}, offsetof(KvAppendPush, bt_off));
  d.bind(KV_APPEND_CACHE_LENS_BINDING, Binding{slots.kv_lengths, 0, 4, uint64_t(p.batch)}, offsetof(KvAppendPush, lens_off));
  d.set_push(push);
  // x: the larger dim's elements, or its q8_0 blocks (one invocation quantizes a block).
  const uint64_t per_row = uint64_t(std::max(p.dim_qk, p.dim_v)) / (q8_0 ? uint64_t(kQ8_0BlockElements) : 1u);
  d.groups = {u32(ceil_div(per_row, 64)), u32(paged.seq_new), u32(p.batch * p.kv_heads)};
  // The caches may still be read (an earlier step's attention) or written (its append) by work
  // recorded before this in the same command buffer.
  list.compute_barrier(VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT, VK_ACCESS_SHADER_WRITE_BIT);
  list.dispatch(d);
  list.compute_barrier(VK_ACCESS_SHADER_WRITE_BIT, VK_ACCESS_SHADER_READ_BIT);  // the new rows, before attending
}

}  // namespace

void emit_paged_attention(ContextImpl& c, CommandList& list, const PathPlan& planned, const AttentionLayouts& layouts,
                          const std::optional<TensorLayout>& k_new, const std::optional<TensorLayout>& v_new,
                          const AttentionSlots& slots) {
  list.own_slot(slots.workspace);
  // k_new alone (V a view of K's rows): its binding stands in for v_new's, which nothing reads.
  // (A cascade's suffix pass reads the table from its prefix on; the append writes through all of it.)
  const PagedKeys& keys = planned.cascade ? planned.cascade->keys
                          : planned.fused ? *planned.fused->paged
                                          : *planned.unfused->paged;
  if (keys.seq_new > 0) emit_kv_append(c, list, planned.problem(), keys, *k_new, v_new ? *v_new : *k_new, slots);
  if (planned.cascade)
    emit_cascade(c, list, *planned.cascade, layouts, slots);
  else if (planned.fused)
    emit_fused_attention(c, list, *planned.fused, layouts, slots);
  else
    emit_unfused_attention(c, list, *planned.unfused, layouts, slots);
}

void check_paged_buffers(const ContextImpl& context, const PlannedCall& call, const AttentionBuffers& b,
                         const BufferSlice* workspace) {
  const PagedAttentionLayouts& layouts = *call.paged_layouts;
  const AttentionProblem& p = call.planned.problem();
  const bool append = call.paged.has_append();
  BufferChecks checks(context, dtype_size(p.dtype));
  checks.tensor("q", b.q, layouts.q, false);
  // k_new alone: V is a view of K's rows, so its Buffer must be K's (the append writes K's rows,
  // which V then reads: one argument, not an output overlapping an input).
  const bool v_in_k = append && !call.paged.appends_v;
  if (v_in_k && b.k && b.v && (b.v->handle() != b.k->handle() || b.v->offset() != b.k->offset()))
    throw Error("v_cache: k_new alone was given (v_cache a view of k_cache's rows), so v_cache must be k_cache's "
                "Buffer; it is another");
  // (As bound: a q8_0 cache in 16-bit units.) Written by an append.
  for (const auto& [name, buffer, cache] : {std::tuple{"k_cache", b.k, &layouts.k_cache},
                                            std::tuple{"v_cache", b.v, &layouts.v_cache}}) {
    const Binding bound = kv_binding(0, p.dtype, p.kv_quant, 0, cache->element_count());
    if (v_in_k && cache == &layouts.v_cache) {
      if (!buffer) throw Error("v_cache: missing (give k_cache's Buffer: v_cache is a view of its rows)");
      continue;  // k_cache's extent, checked above
    }
    checks.add(name, buffer, 0, bound.element_size, 0, bound.elements, append);
  }
  checks.tensor("out", b.out, layouts.out, true);
  checks.add("block_table", b.block_table.buffer, b.block_table.offset, 4, 0, uint64_t(p.batch * call.paged.max_pages),
             false);
  checks.add("cache_lens", b.cache_lens.buffer, b.cache_lens.offset, 4, 0, uint64_t(p.batch), false);
  if (BufferChecks::optional("k_new", b.k_new != nullptr, append)) checks.tensor("k_new", b.k_new, *layouts.k_new, false);
  if (BufferChecks::optional("v_new", b.v_new != nullptr, append && call.paged.appends_v))
    checks.tensor("v_new", b.v_new, *layouts.v_new, false);
  if (BufferChecks::optional("lse", b.lse.buffer != nullptr, layouts.has_lse))
    checks.add("lse", b.lse.buffer, b.lse.offset, 4, 0, uint64_t(p.batch * p.heads * p.seq_q), true);
  checks.head_values(b.per_head(), layouts.per_head());
  checks.workspace(workspace, call.planned.workspace_bytes(),
                   call.planned.cascade  ? "cascade's passes and split-KV partials"
                   : call.planned.unfused ? "the three-stage path's scores"
                                          : "split-KV partials");
  checks.finish();
}

}  // namespace detail

// A thin wrapper: the paged family's layouts and buffers as one AttentionSpec (a PagedKv source) and
// its AttentionBuffers.
struct PreparedPagedAttention::Impl {
  PagedAttentionLayouts layouts;
  PreparedAttention call;
};

namespace {

AttentionBuffers buffers_of(const PagedAttentionBuffers& b) {
  AttentionBuffers a;
  a.q = b.q;
  a.k = b.k_cache;
  a.v = b.v_cache;
  a.out = b.out;
  a.block_table = b.block_table;
  a.cache_lens = b.cache_lens;
  a.k_new = b.k_new;
  a.v_new = b.v_new;
  a.lse = b.lse;
  a.per_head() = b.per_head();
  return a;
}

}  // namespace

PreparedPagedAttention::PreparedPagedAttention(Context& context, const PagedAttentionLayouts& layouts)
    : impl_(std::make_unique<Impl>(Impl{layouts, PreparedAttention(context, AttentionSpec::paged(layouts))})) {}

PreparedPagedAttention::PreparedPagedAttention(PreparedPagedAttention&&) noexcept = default;
PreparedPagedAttention& PreparedPagedAttention::operator=(PreparedPagedAttention&&) noexcept = default;
PreparedPagedAttention::~PreparedPagedAttention() = default;

const PreparedPagedAttention::Impl& PreparedPagedAttention::impl() const {
  if (!impl_)
    throw Error("PreparedPagedAttention: used after being moved from (a moved-from PreparedPagedAttention holds no call)");
  return *impl_;
}

const PagedAttentionLayouts& PreparedPagedAttention::layouts() const { return impl().layouts; }
const AttentionPlan& PreparedPagedAttention::plan() const { return impl().call.plan(); }
uint64_t PreparedPagedAttention::workspace_bytes() const { return impl().call.workspace_bytes(); }

void PreparedPagedAttention::record(VkCommandBuffer command_buffer, const PagedAttentionBuffers& buffers, BufferSlice workspace) const {
  impl().call.record(command_buffer, buffers_of(buffers), workspace);
}

void PreparedPagedAttention::run(const PagedAttentionBuffers& buffers) const { impl().call.run(buffers_of(buffers)); }

void paged_attention(Context& context, const PagedAttentionLayouts& layouts, const PagedAttentionBuffers& buffers) {
  attention(context, AttentionSpec::paged(layouts), buffers_of(buffers));
}

}  // namespace vkattn
