// One attention call, described without buffers: its queries and output, where its keys and values
// come from (a KvSource: dense tensors, a paged KV cache, or packed variable-length sequences), its
// options and score modifiers, and which optional tensors it takes and gives. The same spec serves
// every source: PreparedAttention plans it once and runs it many times. Nothing here depends on Vulkan.
#pragma once

#include <optional>
#include <variant>

#include "vkattn/kv_cache.hpp"
#include "vkattn/problem.hpp"
#include "vkattn/types.hpp"
#include "vkattn/varlen.hpp"

namespace vkattn {

// Keys and values as 4-D tensors, (batch, kv_heads, seq_k, dim) or a (batch, seq_k, kv_heads, dim)
// array viewed in place (TensorLayout::bshd).
struct DenseKv {
  TensorLayout k, v;
};

// Keys and values in a paged KV cache (vkattn/kv_cache.hpp has the layouts and the semantics): token
// t of sequence b is row t % page_size of page block_table[b][t / page_size]; each sequence's length
// is its cache length (AttentionBuffers::cache_lens), and causal masking is bottom-right aligned to
// it. With k_new and v_new (batch, kv_heads, seq_new, dim), those tokens are appended to the caches at
// each sequence's end before the attention, in the same recorded work. The caches' quant is the
// call's KvQuant.
struct PagedKv {
  PagedKvLayout k_cache, v_cache;  // dims dim_qk and dim_v; the same pages, page size and heads
  int64_t max_pages = 0;           // the block table's columns
  std::optional<TensorLayout> k_new, v_new;
  int64_t shared_prefix_pages = 0;  // cascade: PagedAttentionLayouts::shared_prefix_pages
};

// Packed variable-length sequences (FlashAttention's varlen layout, vkattn/varlen.hpp): the
// sequences of a batch laid end to end in Q (total_q, heads, dim), K and V (total_k, kv_heads, dim)
// and O, told apart by cu_seqlens_q and cu_seqlens_k (batch + 1 int32 offsets each); each sequence
// attends to its own keys only. max_seqlen_q and max_seqlen_k bound every sequence's lengths (0: the
// totals); the plan is sized by them.
struct PackedKv {
  TensorLayout k, v;  // packed_layout(dtype, total_k, kv_heads, dim)
  int64_t batch = 0;  // sequences
  int64_t max_seqlen_q = 0, max_seqlen_k = 0;
};

using KvSource = std::variant<DenseKv, PagedKv, PackedKv>;

const char* to_string(const KvSource& source);  // "dense" | "paged" | "packed"

struct AttentionArgs;  // vkattn/attention.hpp: a dense call's tensors in buffers

// An attention call whose keys and values come from any KvSource. Which optional tensors each source
// takes:
//   mask, kv_lengths: dense only (a paged call's sequences end at their cache lengths, a packed
//                     call's at its offsets);
//   weights:          dense and packed (the three-stage path computes them);
//   lse and the per-head tensors (vkattn/per_head.hpp): every source.
// A paged call runs on either path; its three-stage path does not return the weights.
struct AttentionSpec : PerHeadLayouts {  // the per-head tensors' layouts (vkattn/per_head.hpp)
  TensorLayout q;    // dense, paged: (batch, heads, seq_q, dim_qk); packed: packed_layout(total_q, heads, dim_qk)
  KvSource kv;       // DenseKv{} unless set
  TensorLayout out;  // as q, with dim_v
  AttentionOptions options;
  std::optional<MaskLayout> mask;  // dense: an explicit mask, broadcast over batch and heads
  bool kv_lengths = false;         // dense: the runs give int32 (batch) key lengths
  bool lse = false;                // the runs give an f32 LSE buffer
  bool weights = false;            // the runs give an f32 weights buffer (the three-stage path computes P)
  // How K and V are stored: as q.dtype, or ggml's q8_0 blocks (vkattn/q8_0.hpp). A paged call's
  // cache layouts carry it too and must agree.
  KvQuant kv_quant = KvQuant::none;
  AttentionPath path = AttentionPath::automatic;

  // A dense call's spec from its tensors' layouts (AttentionLayouts, as check_attention takes them).
  static AttentionSpec dense(const AttentionLayouts& layouts, bool weights = false,
                             AttentionPath path = AttentionPath::automatic);
  // The spec of a paged or a packed call described by its family's layouts.
  static AttentionSpec paged(const PagedAttentionLayouts& layouts);
  static AttentionSpec packed(const VarlenAttentionLayouts& layouts);
  // The spec of a dense call's arguments: their layouts, the optional tensors given, options and
  // path (defined by the Vulkan runtime, which has AttentionArgs).
  static AttentionSpec of(const AttentionArgs& args);

  // The spec seen as its source's family layouts, which the checks and the planner take. Each
  // throws Error when the spec's source is another, or when the spec gives a tensor or a path the
  // source does not take (see above).
  AttentionLayouts dense_layouts() const;
  PagedAttentionLayouts paged_layouts() const;
  VarlenAttentionLayouts packed_layouts() const;
};

}  // namespace vkattn
