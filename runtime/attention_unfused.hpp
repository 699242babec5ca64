// The three-stage attention path (docs/design.md, "How it works"), used when the caller wants the weights P or asks
// for it: scores S = scale·Q·Kᵀ (gemm.comp, f32) → masked row softmax in place (attention_softmax.comp)
// → O = P·V (gemm.comp). S lives in the caller's weights buffer when given, else in the workspace.
// The (batch, head, query-row) space is cut into chunks whose scores fit one storage-buffer binding;
// each chunk's scores are dense, so a chunk is a contiguous range of P's rows.
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>

#include "command_list.hpp"
#include "context_impl.hpp"
#include "attention_plan.hpp"
#include "gemm.hpp"
#include "vkattn/attention.hpp"
#include "vkattn/problem.hpp"

namespace vkattn::detail {

struct UnfusedPlan {
  AttentionProblem problem;
  int64_t batch_chunk = 0, head_chunk = 0, row_chunk = 0;  // chunk extents
  uint32_t chunks = 0;
  uint64_t chunk_scores_bytes = 0;  // f32 scores of the largest chunk
  uint64_t workspace_bytes = 0;     // scores of one chunk when no weights buffer is given, else 0
  bool weights = false;             // P goes to the caller's weights buffer
  uint64_t alignment = 16;
  uint32_t softmax_workgroup = 128;  // a power of two
  // The softmax reads and writes P by quads (attention_softmax_quads): CPU devices with shaderInt64,
  // seq_k % 4 == 0; a chunk whose scores start off a 16-byte grid at replay runs the plain build.
  bool softmax_quads = false;
  GemmChoice gemm;  // the GEMM kernel of the plan's device (scores and P·V)
  // The query heads of a GQA/MQA group are the rows of one product with their shared K (and V):
  // group x rows per chunk, so K and V are read once per group, not once per head (decode: M = 1 a
  // head otherwise). Set when every chunk holds whole groups and each group's rows are evenly
  // spaced in Q and O (one row per chunk, or whole heads stored head after head).
  bool pack_group_rows = false;
  // The rows of the largest chunk's GEMMs (M of the scores' and P·V's products).
  int64_t gemm_rows() const { return pack_group_rows ? problem.group_size() * row_chunk : row_chunk; }
  // A packed variable-length batch of this many sequences (0: a dense call). The problem is then the
  // batch-1 call of total_q queries and total_k keys, and the row softmax confines each row to its
  // sequence's keys (FLAG_VARLEN: cu_seqlens_q at the block-table slot, cu_seqlens_k at the key
  // lengths'); P is (heads, total_q, total_k), 0 outside each row's sequence.
  int64_t varlen_batch = 0;
  // A paged KV cache (plan_paged): K and V are its (batch, kv_heads, capacity, dim) views, read by
  // the GEMMs through the block table (GEMM_FLAG_B_PAGED_*), and each row's keys end at its
  // sequence's cache length plus the appended tokens (the softmax's FLAG_CACHE_LENGTHS). The scores
  // cover the table's whole capacity; keys past a sequence's end get weight 0 and are never
  // multiplied into O.
  std::optional<PagedKeys> paged;
};

struct AttentionSlots;

// Checks the layouts (check_attention_layouts) and the limits of the three kernels on `device`;
// throws Error. `weights`: the caller's buffer receives P (else the scores go to the workspace).
// `paged`: K and V are a paged cache's views (plan_paged), whose bindings it has checked.
UnfusedPlan make_unfused_plan(const DeviceInfo& device, const AttentionLayouts& layouts, bool weights,
                              const PagedKeys* paged = nullptr);

// Every chunk's three dispatches, with the barriers between them, appended to `list`. The scores
// are the weights slot when the plan has weights, else the workspace slot.
void emit_unfused_attention(ContextImpl& context, CommandList& list, const UnfusedPlan& plan,
                            const AttentionLayouts& layouts, const AttentionSlots& slots);

}  // namespace vkattn::detail
