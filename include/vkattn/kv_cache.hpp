// A paged KV cache (FlashAttention's and vLLM's layout) and the attention over it, with new tokens
// optionally appended first: the layouts, and the checks of them and of the block table's values.
// The semantics (the contract of issue 14):
//   - K and V caches are dense (num_pages, page_size, kv_heads, dim), or (num_pages, kv_heads,
//     page_size, dim) with PageOrder::hnd (FlashInfer's HND). block_table (batch, max_pages)
//     int32 and cache_lens (batch) int32: sequence b's keys are its tokens 0 .. len_b - 1, token t
//     being row t % page_size of page block_table[b][t / page_size]. Any page size >= 1; several
//     sequences may share a page (read only). Table entries past a sequence's last page are unused
//     and may hold anything (-1, say).
//   - Append (k_new, v_new (batch, kv_heads, seq_new, dim)): written at tokens cache_lens[b] ..
//     cache_lens[b] + seq_new - 1, whose pages must already be in the table, before attending;
//     len_b = cache_lens[b] + seq_new (else len_b = cache_lens[b]). A q8_0 cache stores them
//     quantized (quantize_q8_0). An appended row must belong to its sequence alone: no other token,
//     of this sequence or another, may map to it (two writers, or a reader racing a writer).
//   - Q (batch, heads, seq_q, dim_qk), O (batch, heads, seq_q, dim_v), LSE (batch, heads, seq_q).
//     Each sequence is a dense problem of seq_k = len_b keys: causal and the alignment are per
//     sequence (bottom-right: off = len_b - seq_q), and so is every score modifier
//     (AttentionOptions and the per-head tensors, docs/semantics.md, "Score modifiers"). A sequence of no keys gives O = 0 and LSE = -inf
//     (the sink's logit where the head has one). No explicit mask or kv_lengths: cache_lens are the key lengths.
//   - Values outside the contract (check_paged_values refuses them where the host has them; the
//     device reads them unchecked) follow one rule on the device, for the attention and the append
//     alike and for every int32 value (INT32_MIN and INT32_MAX included: no sum overflows): each
//     cache length is clamped into [0, capacity - seq_new] (so len_b = clamp(cache_lens[b], 0,
//     capacity - seq_new) + seq_new; -5 appends at token 0, 100 or INT32_MAX past a capacity of 64
//     at capacity - seq_new), and each table entry a token uses into [0, num_pages) (-1 reads and
//     appends page 0, num_pages or INT32_MAX page num_pages - 1). The result is wrong keys, and an
//     append through a bad value may overwrite rows of other sequences (two writers of one row leave
//     one's value), but nothing outside the caches is read or written. With shared_prefix_pages
//     (cascade), the attention reads every sequence's prefix through sequence 0's table entries and
//     a length below the prefix as the prefix (the append still follows the rule above).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "vkattn/problem.hpp"
#include "vkattn/types.hpp"

namespace vkattn {

// How a page orders its tokens and KV heads.
//   nhd: (page_size, kv_heads, dim), FlashAttention's and vLLM's layout: a token's heads side by side.
//   hnd: (kv_heads, page_size, dim), FlashInfer's HND: each head's tokens side by side, so one head's
//        keys of a page are one contiguous run. On CPU devices (lavapipe) decode reads it in about
//        1.1x a dense cache's time; nhd's strided rows take 1.3-2x (docs/semantics.md, "Paged KV cache").
enum class PageOrder { nhd, hnd };
const char* to_string(PageOrder order);  // "nhd" | "hnd"

// K or V cache, dense (num_pages, page_size, kv_heads, dim) from the start of its buffer, or
// (num_pages, kv_heads, page_size, dim) with PageOrder::hnd. Element (page p, slot s, head g, d) is
// index ((p * page_size + s) * kv_heads + g) * row + d, or ((p * kv_heads + g) * page_size + s) * row + d,
// where row = row_elements(): dim, or row_stride where a cache's rows are wider than the dims it
// reads (a view). With KvQuant::q8_0 that index is cut into 34-byte blocks of 32 (types.hpp,
// KvQuant), so dim and row_stride must be multiples of 32.
//
// A view of another cache's rows (multi-head latent attention, DeepSeek's MLA): V as the first
// dim_v columns of K's rows is k_cache.prefix_view(dim_v), given the K cache's Buffer as v_cache.
// Reading shared bytes is allowed; an append then writes k_new alone (PagedAttentionLayouts).
struct PagedKvLayout {
  DType dtype = DType::f32;  // the call's dtype (q's); with q8_0 the storage is the blocks instead
  KvQuant quant = KvQuant::none;
  int64_t num_pages = 0, page_size = 0, kv_heads = 0, dim = 0;
  PageOrder order = PageOrder::nhd;
  int64_t row_stride = 0;  // elements from one (page, slot, head) row to the next; 0: dim (rows packed)

  static PagedKvLayout dense(DType dtype, int64_t num_pages, int64_t page_size, int64_t kv_heads, int64_t dim,
                             KvQuant quant = KvQuant::none, PageOrder order = PageOrder::nhd);
  // The first `prefix_dim` columns of this cache's rows, as a cache of that dim (same pages, rows and
  // buffer): MLA's V over its latent K cache.
  PagedKvLayout prefix_view(int64_t prefix_dim) const {
    PagedKvLayout v = *this;
    v.row_stride = row_elements();
    v.dim = prefix_dim;
    return v;
  }
  int64_t row_elements() const { return row_stride != 0 ? row_stride : dim; }
  int64_t index(int64_t page, int64_t slot, int64_t head, int64_t d) const {
    if (order == PageOrder::hnd) return ((page * kv_heads + head) * page_size + slot) * row_elements() + d;
    return ((page * page_size + slot) * kv_heads + head) * row_elements() + d;
  }
  // The elements the cache spans: every row whole (num_pages * page_size * kv_heads * row_elements()).
  int64_t element_count() const { return num_pages * page_size * kv_heads * row_elements(); }
  // The dims in storage order: (num_pages, page_size, kv_heads, dim), or with hnd pages
  // (num_pages, kv_heads, page_size, dim).
  std::array<int64_t, 4> storage_shape() const {
    if (order == PageOrder::hnd) return {num_pages, kv_heads, page_size, dim};
    return {num_pages, page_size, kv_heads, dim};
  }
  // Bytes of the cache: element_count() * dtype size, or its q8_0 blocks.
  int64_t required_bytes() const;
  // "q8_0 (64, 16, 2, 128)", "f16 hnd (64, 2, 16, 128)": dims in storage order; a view adds
  // " of rows 576".
  std::string describe() const;
};

// The tensors of one paged call, described without data. The block table is int32 (batch,
// max_pages), dense; cache_lens int32 (batch).
struct PagedAttentionLayouts : PerHeadLayouts {  // the per-head tensors' layouts (vkattn/per_head.hpp)
  TensorLayout q;                   // (batch, heads, seq_q, dim_qk)
  PagedKvLayout k_cache, v_cache;   // dims dim_qk and dim_v; the same pages, page size and heads
  int64_t max_pages = 0;            // the block table's columns
  // (batch, kv_heads, seq_new, dim_qk | dim_v), in the call's dtype: both, or neither, or k_new
  // alone where v_cache is a view of k_cache's rows (v_cache.row_elements() == k_cache's, v_cache.dim
  // <= k_cache.dim: k_cache.prefix_view(dim_v)); the run is then given one Buffer for both caches,
  // and V's rows are the first dim_v columns of the rows K's append writes.
  std::optional<TensorLayout> k_new, v_new;
  // v_cache reads the first dim_v columns of k_cache's rows (layouts alone can say so; the
  // buffers must agree).
  bool v_views_k() const {
    return v_cache.row_elements() == k_cache.row_elements() && v_cache.dim <= k_cache.dim &&
           v_cache.row_stride != 0;
  }
  TensorLayout out;                 // (batch, heads, seq_q, dim_v)
  bool has_lse = false;
  AttentionOptions options;
  // Cascade (shared-prefix) attention: every sequence's first shared_prefix_pages table entries are
  // the same pages (a prompt the batch shares) and every sequence holds at least those pages' tokens
  // (cache_lens[b] >= shared_prefix_pages * page_size). The call then reads those pages once for all
  // the batch's query rows (a GQA group's rows of every sequence stacked against its KV head), each
  // sequence's own pages separately, and merges the two; the answers are those of the same call
  // without it, up to rounding (the two parts are stored in the call's dtype before the merge).
  // 0: off. The prefix must be visible to every query row, so it takes no window, no ALiBi, no
  // top-left causal, and bottom-right causal only with seq_q <= seq_new + 1 (decode); Q's rows of a
  // head must be one run (q.stride_head == seq_q * q.stride_seq) when a KV head serves several query
  // heads. shared_prefix_pages() (below) finds the pages a host's block table shares.
  int64_t shared_prefix_pages = 0;
  // automatic: the fused kernels, or on a CPU device past head dim 256 the three-stage path where
  // its products have enough rows (as a dense call's, docs/api.md); fused; or unfused: the
  // three-stage path, its GEMMs reading the caches through the block table (scores over the table's
  // whole capacity; no q8_0 caches, no cascade). The weights P are not returned either way.
  AttentionPath path = AttentionPath::automatic;
};

struct PagedProblem {
  // Q, O and the options resolved as for a dense call; its seq_k is capacity(), the most keys a
  // sequence can have. Use sequence() for one sequence's rules.
  AttentionProblem attention;
  int64_t num_pages = 0, page_size = 0, max_pages = 0, seq_new = 0;
  KvQuant quant = KvQuant::none;
  bool appends_v = false;  // an append writes v_new too (else k_new alone: V is a view of K's rows)
  int64_t shared_prefix_pages = 0;  // the layouts' (cascade)
  int64_t prefix_tokens() const { return shared_prefix_pages * page_size; }
  bool has_append() const { return seq_new > 0; }
  int64_t capacity() const { return max_pages * page_size; }
  // The dense problem of a sequence of seq_k keys (its length after the append).
  AttentionProblem sequence(int64_t seq_k) const {
    AttentionProblem p = attention;
    p.seq_k = seq_k;
    return p;
  }
};

// Checks the layouts (sizes, strides, dtypes, dims 1..576 (kMaxHeadDim), GQA divisibility, the caches agreeing in
// pages, page size, heads, quant and order, q8_0's dim a multiple of 32, the capacity max_pages *
// page_size within int32 and holding the append, the options and modifiers) and throws vkattn::Error
// naming the argument and its values.
PagedProblem check_paged_attention(const PagedAttentionLayouts& layouts);

// The checks that need the values (a host that has them, the reference): block_table (batch *
// max_pages values) and cache_lens (batch). cache_lens[b] in [0, capacity - seq_new]; the table
// entries a sequence uses (its first ceil(len_b / page_size)) in [0, num_pages); every appended row
// held by its own token alone. Throws Error naming the entry and its value.
// With shared_prefix_pages, also that every sequence's first entries are sequence 0's and its
// length covers them.
void check_paged_values(const PagedProblem& problem, std::span<const int32_t> block_table,
                        std::span<const int32_t> cache_lens);

// The pages a batch's block table shares from its start: the most leading entries every sequence has
// equal to sequence 0's and wholly within its cache length (cache_lens[b] >= pages * page_size), so
// that PagedAttentionLayouts::shared_prefix_pages may be set to it (0: none; a batch of one shares
// nothing with anyone). Host values: block_table (batch * max_pages), cache_lens (batch).
int64_t shared_prefix_pages(std::span<const int32_t> block_table, std::span<const int32_t> cache_lens,
                            int64_t max_pages, int64_t page_size);

}  // namespace vkattn
