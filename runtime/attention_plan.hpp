// Choosing how an attention call runs: the kernel and its tile sizes (specialization constants;
// fused_kernels.hpp), the key-range split (split-KV), the workspace, and every check against the
// device's limits. Nothing here records commands, so a plan can be made (and errors raised) before
// anything is dispatched. plan_fused is a composition of named steps (plan_steps.hpp).
#pragma once

#include <cstdint>
#include <optional>

#include "fused_kernels.hpp"
#include "pipelines.hpp"
#include "vkattn/attention.hpp"
#include "vkattn/kv_cache.hpp"
#include "vkattn/problem.hpp"
#include "vkattn/varlen.hpp"

namespace vkattn::detail {

// K and V as a paged KV cache (vkattn/kv_cache.hpp) instead of dense tensors: the kernels look each
// key's row up in the block table (PAGE_SIZE specialization constant) and bind the caches whole.
struct PagedKeys {
  uint32_t page_size = 0;
  PageOrder order = PageOrder::nhd;
  int64_t cache_kv_heads = 0;  // the caches' (a cascade's prefix pass sees one KV head per batch entry)
  // A page's key rows in the cache views (SPEC_ATTENTION_PAGE_STRIDE): nhd pages hold page_size rows
  // of all heads, hnd pages kv_heads runs of page_size rows.
  uint32_t page_rows() const {
    return order == PageOrder::hnd ? page_size * static_cast<uint32_t>(cache_kv_heads) : page_size;
  }
  int64_t max_pages = 0, num_pages = 0;
  // The table as read: sequence b's page i is entry table_offset + b * table_row_stride + i of the
  // binding (a cascade's passes: the suffix from column shared_prefix_pages, the prefix every row
  // from row 0's). table_row_stride < 0: max_pages (the table as given).
  int64_t table_offset = 0, table_row_stride = -1;
  int64_t row_stride() const { return table_row_stride < 0 ? max_pages : table_row_stride; }
  // Entries a chunk of `batches` sequences spans from its first row's first.
  int64_t table_span(int64_t batches) const { return (batches - 1) * row_stride() + max_pages; }
  int64_t seq_new = 0;                           // tokens appended before attending
  int64_t k_elements = 0, v_elements = 0;        // of the caches (num_pages * page_size * kv_heads * row)
  int64_t k_row = 0, v_row = 0;                  // elements per cache row (a view's are wider than its dim)
  bool appends_v = true;                         // else k_new alone: V is a view of K's rows
};

// A packed variable-length batch (vkattn/varlen.hpp) instead of dense batches: the layouts are the
// packed tensors (batch 1, seq = total_q or total_k rows) and the grid's z covers `batch` sequences
// (SPEC_ATTENTION_VARLEN; the kernels read each one's rows from cu_seqlens). The host does not know
// the lengths: the query tiles and the key splits are sized by the longest sequence, max_seq_q
// queries and max_seq_k keys, and the device clamps every sequence to what the grid covers.
struct VarlenRows {
  int64_t batch = 0;
  int64_t max_seq_q = 0, max_seq_k = 0;
};

// Split-KV over a work list built on the device from the key lengths (a paged call's cache_lens, a
// packed batch's cu_seqlens_k, a dense call's kv_lengths without a mask; attention_work_list.comp,
// shader_abi.h "Work lists"): each sequence's own keys in items of a chunk chosen there, the split
// dispatch's grid the item count. Planned where the call is split, covers its splits in one dispatch
// per range, and the list fits the workspace budget (FusedPlan::work_list).
struct WorkListPlan {
  uint32_t max_items = 0;     // batch_chunk x splits: the items never exceed it, nor the partials' slots
  uint32_t target_items = 0;  // items the chunk aims at (the device's wanted workgroups)
  uint32_t min_keys = 0;      // the chunk's least keys (max: FusedPlan::keys_per_split)
  uint64_t offset = 0;        // bytes into the workspace (aligned)
  uint64_t words = 0;         // the list's 32-bit words
};

struct FusedPlan {
  AttentionProblem problem;  // (a varlen call's: batch 1, seq_q and seq_k the totals)
  // Set for a paged call (plan_paged): the layouts' K and V are then the caches seen as (batch,
  // kv_heads, capacity, dim) tensors of batch stride 0 and seq stride kv_heads * dim.
  std::optional<PagedKeys> paged;
  // Set for a packed variable-length call (plan_varlen): one chunk, one range of query tiles, K and V
  // bound whole, and split-KV partials of every packed row ([split][head][packed row]).
  std::optional<VarlenRows> varlen;
  KernelConfig config;
  uint32_t splits = 1;
  uint32_t keys_per_split = 0;
  // Splits count from each workgroup's first key in a two-sided window (MOD_BAND_SPLITS), not key 0.
  bool band_splits = false;
  // Splits one dispatch covers (K and V are bound from its first key): all of them unless one KV
  // head is larger than a binding or the grid's z dimension is exceeded.
  uint32_t splits_per_dispatch = 1;
  uint32_t query_tiles = 0;
  // Query tiles are dispatched (and, when split, combined) in ranges of tiles_per_range tiles, the
  // last one shorter: the partials of one range fit the workspace budget (fused_workspace_budget)
  // and a range never exceeds maxComputeWorkGroupCount[0]. query_ranges = ceil(query_tiles / it).
  uint32_t tiles_per_range = 0, query_ranges = 1;
  // Dispatches cover chunks of batch_chunk batches x head_chunk query heads (whole GQA groups), so
  // that no binding exceeds maxStorageBufferRange; one chunk covers everything when it fits.
  int64_t batch_chunk = 0, head_chunk = 0;
  // Split-KV partials of one query-tile range of a chunk (the workspace is reused by every range).
  uint64_t partial_o_bytes = 0, partial_lse_bytes = 0, workspace_bytes = 0;
  // The subgroup kernel's careful pass (KernelConfig::careful_pass): its ballots, one uvec4 per
  // workgroup of a dispatch, at bytes redo_offset (aligned) of the workspace.
  uint64_t redo_offset = 0, redo_bytes = 0;
  uint64_t alignment = 16;  // storage-buffer offset alignment used for every binding
  uint32_t combine_workgroup = 64;
  std::optional<WorkListPlan> work_list;
};

// Largest offset/index the kernels can address (32-bit indices in this version).
inline constexpr uint64_t kMaxIndex = UINT32_MAX;
// Longest sequence (queries or keys) the kernels take: they compute diagonals in 32-bit signed ints.
inline constexpr uint64_t kMaxSequence = INT32_MAX;

// The checks of a call that need no buffer: the layouts (check_attention), 16-bit storage for
// f16/bf16 and the 32-bit sequence limit. The buffers are checked by check_call_buffers.
AttentionProblem check_attention_layouts(const DeviceInfo& device, const AttentionLayouts& layouts);

// Plans the fused path from the tensors' layouts alone (check_attention_layouts and the fused
// kernels' limits; throws Error): a pure function of the problem and the device description, so it
// can be tested on any device's limits without that device (tests/unit_planner_presets.cpp).
// The subgroup kernel packs a GQA group's heads into its rows (KernelConfig::pack_group) when one
// head's query rows fill less than a workgroup's tile;
// packing_allowed = false plans without (plan_fused does so itself when packed partials would need
// more than one range of query tiles, which the packed kernel does not do).
// `paged`: K and V are a paged cache (plan_paged builds the layouts); their bytes must fit one binding.
// `varlen`: the layouts are packed tensors of a variable-length batch (plan_varlen); the tiles, splits
// and kernel are chosen for `batch` sequences of max_seq_q x max_seq_k, and every tensor must fit one
// binding (no chunks) and the query tiles one dispatch (no ranges): throws ErrorCode::unsupported if not.
FusedPlan plan_fused(const DeviceInfo& device, KernelVariant variant, const AttentionLayouts& layouts,
                      bool packing_allowed = true, const PagedKeys* paged = nullptr,
                      const VarlenRows* varlen = nullptr);

// A paged call planned (plan_paged): its checked problem, the dense view of its tensors the fused
// kernels run on (K and V: the caches as (batch, kv_heads, capacity, dim) of batch stride 0) and the
// plan (plan.paged set).
// Cascade (shared-prefix) attention of a paged call (PagedAttentionLayouts::shared_prefix_pages,
// runtime/paged_cascade.cpp): after the append, the passes' key lengths (cascade_lengths.comp); the
// prefix pass, whose batch is the KV heads and whose rows are a head's group of every sequence
// (kv_heads, batch, group * seq_q) against the prefix pages (table row 0, row stride 0); the suffix
// pass, the call itself against each sequence's pages past the prefix; and their merge into O and
// LSE (cascade_merge.comp). The passes' results and lengths live in the workspace after the larger of
// the two passes' own scratch (the passes run one after the other and share it).
struct CascadePlan {
  PagedKeys keys;  // the call's own (its append's): the whole table
  FusedPlan prefix, suffix;
  AttentionLayouts prefix_layouts, suffix_layouts;  // their O in the workspace (element offsets)
  int64_t prefix_tokens = 0;
  // Byte offsets in the workspace: the lengths (batch suffix, then kv_heads prefix), each pass's LSE.
  uint64_t lengths_offset = 0, prefix_lse_offset = 0, suffix_lse_offset = 0;
  uint64_t workspace_bytes = 0;
};

// A paged cache as the kernels address it: (batch, kv_heads, capacity, dim) of batch stride 0 whose
// key rows the block table places (paged_plan.cpp).
TensorLayout paged_cache_view(DType dtype, int64_t batch, const PagedKvLayout& cache, int64_t capacity);
// The cascade of a paged call with shared_prefix_pages, from its dense view and keys (paged_cascade.cpp).
CascadePlan plan_cascade(const DeviceInfo& device, KernelVariant variant, const PagedAttentionLayouts& layouts,
                         const PagedProblem& problem, const AttentionLayouts& dense, const PagedKeys& keys);


// The layouts of one chunk: tensors rebased to (b0, h0) and cut to nb batches x nh query heads
// (plan_chunks.cpp).
AttentionLayouts chunk_layouts(const AttentionLayouts& layouts, int64_t group, int64_t b0, int64_t nb, int64_t h0,
                               int64_t nh);
}  // namespace vkattn::detail
