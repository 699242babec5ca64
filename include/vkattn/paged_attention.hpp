// Attention over a paged KV cache on the GPU (vkattn/kv_cache.hpp has the layouts and the semantics),
// with new tokens optionally appended to the cache first, in the same recorded work: one decode step
// of an inference runtime is one record().
//
// The paged family's own types: a thin wrapper over the one call model (vkattn/attention_spec.hpp),
// PreparedPagedAttention(context, layouts) being PreparedAttention(context, AttentionSpec::paged(layouts))
// with its buffers mapped onto AttentionBuffers (k_cache -> k, v_cache -> v). Same plan, same bytes.
#pragma once

#include <vulkan/vulkan.h>

#include <memory>

#include "vkattn/attention.hpp"
#include "vkattn/buffer.hpp"
#include "vkattn/context.hpp"
#include "vkattn/kv_cache.hpp"

namespace vkattn {

// The buffers of one paged call. The caches start at their Buffer's offset (PagedKvLayout is dense
// from there); Q, O, k_new and v_new follow their layouts (offsets and strides in elements from the
// Buffer's offset); block_table (batch, max_pages) and cache_lens (batch) are int32 from their
// slices. The caches are written when the layouts append (k_new and v_new given), else only read.
struct PagedAttentionBuffers : PerHead<const Buffer*> {  // the per-head tensors, with the layouts'
  const Buffer* q = nullptr;
  const Buffer* k_cache = nullptr;
  const Buffer* v_cache = nullptr;
  const Buffer* out = nullptr;
  BufferSlice block_table;
  BufferSlice cache_lens;
  const Buffer* k_new = nullptr;  // with layouts.k_new
  const Buffer* v_new = nullptr;  // with layouts.v_new
  BufferSlice lse;                // with layouts.has_lse: f32 (batch, heads, seq_q), dense
};

// A paged call planned once and run many times (as PreparedAttention: the constructor checks the
// layouts against the device, chooses the kernel, tiles and key splits, and builds the pipelines and
// the dispatches; record() and run() check the buffers and record). The plan is made for the block
// table's capacity (max_pages * page_size), so one plan serves every step whose cache lengths fit it.
// The lengths are read on the device: where the plan splits the keys (plan().splits > 1), a first
// dispatch reads cache_lens and cuts each sequence's own keys into parts (at most plan().splits per
// sequence, of at most plan().keys_per_split keys, sized so that all parts together about fill the
// device), and the attention dispatch's grid is that count (vkCmdDispatchIndirect): a short sequence
// beside a long one takes few workgroups, an empty one none. The block table and cache_lens values are not read on the host: entries
// outside [0, num_pages) are clamped into it and lengths into [0, capacity - seq_new] on the device,
// for the append as for the attention, every int32 value included (kv_cache.hpp: wrong keys, never
// a read or write out of bounds); check_paged_values checks them where the host
// has them. Thread-safety and lifetime as PreparedAttention.
class PreparedPagedAttention {
 public:
  // Throws Error as check_paged_attention does, or ErrorCode::unsupported for what this device or
  // version cannot run (a cache larger than one storage-buffer binding).
  PreparedPagedAttention(Context& context, const PagedAttentionLayouts& layouts);
  PreparedPagedAttention(PreparedPagedAttention&&) noexcept;
  PreparedPagedAttention& operator=(PreparedPagedAttention&&) noexcept;
  PreparedPagedAttention(const PreparedPagedAttention&) = delete;
  PreparedPagedAttention& operator=(const PreparedPagedAttention&) = delete;
  ~PreparedPagedAttention();

  const PagedAttentionLayouts& layouts() const;
  const AttentionPlan& plan() const;  // path "fused" (a cascade: plan().cascade) or "unfused" (layouts().path)
  uint64_t workspace_bytes() const;   // what record() needs in `workspace`

  // Records the call (the append, a barrier, the attention) into the caller's command buffer, with no
  // submit: the caller orders the writes of the inputs before it and the reads of the outputs (O,
  // LSE, and the caches after an append) after it with its own barriers. A barrier at its start
  // orders the append after earlier shader reads and writes of the caches in the same command
  // buffer. `workspace` as PreparedAttention::record (it holds the parts' list and the indirect
  // dispatch's grid: an application's buffer needs VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT too). Throws
  // Error (records nothing) when a buffer does not fit the layouts.
  void record(VkCommandBuffer command_buffer, const PagedAttentionBuffers& buffers, BufferSlice workspace = {}) const;
  // Runs the call and waits for it.
  void run(const PagedAttentionBuffers& buffers) const;

 private:
  struct Impl;
  const Impl& impl() const;
  std::unique_ptr<Impl> impl_;
};

// Plans, runs and waits: PreparedPagedAttention(context, layouts).run(buffers).
void paged_attention(Context& context, const PagedAttentionLayouts& layouts, const PagedAttentionBuffers& buffers);

}  // namespace vkattn
