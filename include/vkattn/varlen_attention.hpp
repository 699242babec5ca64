// Packed variable-length batches on the GPU (vkattn/varlen.hpp has the layouts and the semantics):
// FlashAttention's varlen call, the sequences of a batch laid end to end in Q, K, V and O and told
// apart by cu_seqlens_q and cu_seqlens_k, on the fused kernels, or on the three-stage path when the
// weights are asked for (or the path is).
//
// The varlen family's own types: a thin wrapper over the one call model (vkattn/attention_spec.hpp),
// PreparedVarlenAttention(context, layouts) being PreparedAttention(context, AttentionSpec::packed(layouts))
// with its buffers mapped onto AttentionBuffers. Same plan, same bytes.
#pragma once

#include <vulkan/vulkan.h>

#include <memory>

#include "vkattn/attention.hpp"
#include "vkattn/buffer.hpp"
#include "vkattn/context.hpp"
#include "vkattn/varlen.hpp"

namespace vkattn {

// The buffers of one varlen call. Q, K, V and O follow their layouts (offsets and strides in elements
// from the Buffer's offset); cu_seqlens_q and cu_seqlens_k (batch + 1) are int32 from their slices.
struct VarlenAttentionBuffers : PerHead<const Buffer*> {  // the per-head tensors, with the layouts'
  const Buffer* q = nullptr;
  const Buffer* k = nullptr;
  const Buffer* v = nullptr;
  const Buffer* out = nullptr;
  BufferSlice cu_seqlens_q;
  BufferSlice cu_seqlens_k;
  BufferSlice lse;                // with layouts.has_lse: f32 (heads, total_q), dense
  BufferSlice weights;            // with layouts.weights: f32 (heads, total_q, total_k), dense
};

// A varlen call planned once and run many times (as PreparedAttention: the constructor checks the
// layouts against the device, chooses the kernel, tiles and key splits, and builds the pipelines and
// the dispatches; record() and run() check the buffers and record). The grid and the key splits are
// sized by layouts.max_seqlen_q and max_seqlen_k (0: the totals), so one plan serves every batch of
// `batch` sequences whose lengths they bound: the offsets are read on the device only (where the
// fused path splits the keys, a first dispatch cuts each sequence's own keys into at most
// plan().splits parts, and the attention dispatch's grid is their count). Offsets that
// break the contract are clamped there (each into [0, total], each sequence's end to at least its
// start): wrong results, never a read or write out of bounds. A sequence longer than the bounds:
// varlen.hpp says exactly what happens (its first max_seqlen_q rows right over its first
// max_seqlen_k keys, its rows past max_seqlen_q left unwritten). check_varlen_values checks
// them where the host has them. Thread-safety and lifetime as PreparedAttention.
class PreparedVarlenAttention {
 public:
  // Throws Error as check_varlen_attention does (and for weights asked of path fused), or
  // ErrorCode::unsupported for what this device or version cannot run (on the fused path: a tensor
  // larger than one storage-buffer binding, more sequences or query tiles than one dispatch's grid
  // holds; on the three-stage path: q8_0 K and V, and the dense path's limits for one batch-1 call
  // of total_q queries and total_k keys).
  PreparedVarlenAttention(Context& context, const VarlenAttentionLayouts& layouts);
  PreparedVarlenAttention(PreparedVarlenAttention&&) noexcept;
  PreparedVarlenAttention& operator=(PreparedVarlenAttention&&) noexcept;
  PreparedVarlenAttention(const PreparedVarlenAttention&) = delete;
  PreparedVarlenAttention& operator=(const PreparedVarlenAttention&) = delete;
  ~PreparedVarlenAttention();

  const VarlenAttentionLayouts& layouts() const;
  const AttentionPlan& plan() const;  // path "fused" (the kernel, tiles, splits) or "unfused"
  uint64_t workspace_bytes() const;   // what record() needs in `workspace`

  // Records the call into the caller's command buffer, with no submit: the caller orders the writes
  // of the inputs before it and the reads of O and LSE after it with its own barriers. `workspace` as
  // PreparedAttention::record (an application's buffer needs the indirect usage too). Throws Error (records nothing) when a buffer does not fit the layouts.
  void record(VkCommandBuffer command_buffer, const VarlenAttentionBuffers& buffers, BufferSlice workspace = {}) const;
  // Runs the call and waits for it.
  void run(const VarlenAttentionBuffers& buffers) const;

 private:
  struct Impl;
  const Impl& impl() const;
  std::unique_ptr<Impl> impl_;
};

// Plans, runs and waits: PreparedVarlenAttention(context, layouts).run(buffers).
void varlen_attention(Context& context, const VarlenAttentionLayouts& layouts, const VarlenAttentionBuffers& buffers);

}  // namespace vkattn
