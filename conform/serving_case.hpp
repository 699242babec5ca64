// A conformance case of a call whose keys and values come from a serving layout, the source as a
// parameter (as AttentionSpec's KvSource is): a paged KV cache (vkattn/paged_attention.hpp: the pool,
// the block table with pages shuffled and shared, the cache lengths, the tokens appended) or packed
// variable-length sequences (vkattn/varlen_attention.hpp: the sequences' query and key counts, the
// row strides). The fields every source has (dtypes, heads, dims, causal, the score modifiers) are
// the case's; the source's own are its KvSource's. The runner builds the case from its seed, runs the
// PreparedAttention of its spec twice on fresh poison, guarded, and compares O, LSE (and an append's
// caches, the three-stage path's weights) with the fp64 reference (reference::paged_attention,
// reference::varlen_attention). The dense source is the attention cases' (attention_case.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <vkattn/vkattn.hpp>

#include "conform/case_modifiers.hpp"
#include "conform/case_runner.hpp"

namespace vkattn::conform {

// Keys and values in a paged KV cache.
struct PagedSource {
  int64_t seq_q = 1;  // queries per sequence
  int64_t page_size = 16;
  PageOrder order = PageOrder::nhd;  // of both caches
  std::vector<int32_t> cache_lens;   // one per sequence: the batch
  int64_t seq_new = 0;               // tokens appended (k_new, v_new) before attending
  int64_t spare_pages = 3;           // pool pages no sequence uses (NaN-filled: never read)
  int64_t spare_columns = 1;         // block-table entries past the most any sequence needs (-1)
  // Sequences 0 and 1 share the pages of sequence 0's first `shared_pages` full pages (a common
  // prompt prefix), which neither appends to.
  int64_t shared_pages = 0;
  bool shuffle_pages = true;  // pages handed out in a random order, not 0, 1, 2, ...
  // V as the first dim_v columns of K's rows (k_cache.prefix_view, MLA's latent cache): one cache in
  // one Buffer, given as both; an append gives k_new alone.
  bool v_view = false;
  // Cascade: every sequence (not just 0 and 1) starts with sequence 0's first shared_pages pages, and
  // the call is given them as shared_prefix_pages (read once for the batch).
  bool cascade = false;
};

// Keys and values as packed variable-length sequences (cu_seqlens).
struct PackedSource {
  // Each sequence's queries and keys (the same length: the batch); 0 is an empty sequence.
  std::vector<int32_t> seq_q, seq_k;
  // max_seqlen_q and max_seqlen_k as given to the call: the longest sequence's (tight), or 0 (the
  // totals: a loose bound, more query tiles and key splits than any sequence needs).
  bool loose_max = false;
  // Elements between the rows of Q, K, V and O past their heads x dim, and before their first row
  // (non-dense row strides, tensors not at their buffer's start); the gaps hold NaN.
  int64_t row_pad = 0;
  // The plan must split the key range at least this many ways (the case is there for split-KV).
  uint32_t min_splits = 1;
};

struct ServingCase {
  std::string name;
  DType dtype = DType::f32;
  // q8_0: K and V (the caches, or the packed rows: row_pad then a multiple of 32) held as q8_0
  // blocks of the drawn values.
  KvQuant quant = KvQuant::none;
  int64_t heads = 1, kv_heads = 1, dim_qk = 64, dim_v = 64;
  Causal causal = Causal::bottom_right;
  CaseModifiers modifiers;  // the score modifiers (case_modifiers.hpp)
  bool lse = true;
  uint64_t seed = 1;
  std::variant<PagedSource, PackedSource> kv;
};

std::string describe(const ServingCase& c);

// The features a case exercises, as (group, value) pairs for `vkattn conform`'s tables: "dtype",
// "layout" ("paged 16", "paged hnd", "append", "varlen"), "heads", "mask" (the causal alignment) and
// each modifier.
std::vector<std::pair<std::string, std::string>> features(const ServingCase& c);

// One serving case run on the device and compared with its fp64 reference.
struct ServingResult {
  bool ok = false;
  std::string text;    // what went wrong (empty when ok)
  std::string plan;    // "subgroup-decode 2 splits", for reports
  double worst = 0.0;  // the largest error as a fraction of its tolerance
  // Set (and ok false, text empty) when the case did not run: the plan made for `plan_for` does not
  // fit this device (PlanDoesNotFit's message), or that plan differs in what the case is there for.
  std::string skip_reason;
};

// Runs `c` on `context` on `path` and compares with the reference. A paged cache runs on either
// path (the three-stage one reading it through the block table; not a cascade or q8_0 there, see
// why_not_on); packed sequences on either, the three-stage path comparing the weights P too, where
// a q8_0 case must be refused (ErrorCode::unsupported, naming the fused path), which is its pass. Throws nothing for a mismatch; an Error from the library (a refusal) propagates.
// With `plan_for`, the call runs with the plan made for that device description (a device profile,
// PreparedAttention(context, spec, plan_for)): skipped, saying why, where that plan does not fit
// here, or where it does not make the choice the case is there for (the cascade, split-KV, a refusal).
ServingResult run_serving_case(Context& context, const ServingCase& c, AttentionPath path = AttentionPath::automatic,
                               const DeviceInfo* plan_for = nullptr);

// The same in `vkattn conform`'s frame (case_runner.hpp), on the path and with the device profile of
// `options`; skipped on the three-stage path for a q8_0 case or a cascade (fused kernels only).
CaseResult run_serving_case(Context& context, const ServingCase& c, const RunOptions& options);

// Empty when `c` runs on `path`, else why not: a paged q8_0 cache or a cascade on the three-stage path.
std::string why_not_on(const ServingCase& c, AttentionPath path);

// The catalogs (catalog_serving.cpp). Paged: page sizes 1, 16 and 256; shuffled and shared pages;
// cache lengths 0, 1, a page edge and past it; appends that cross a page boundary; decode and chunked
// prefill (seq_q > a sequence's keys included); GQA; causal in both alignments; every modifier; every
// dtype; q8_0 caches under every kernel form; hnd pages in decode, prefill, appends and q8_0. Packed:
// empty sequences, sequences with more queries than keys, one long sequence among short ones, decode,
// MHA and GQA, causal in both alignments and none, every modifier, forced split-KV, padded row
// strides, every dtype. `long_cases`: a paged sequence of 65,536 keys, a packed one of 70,000
// (lavapipe's loop limit).
std::vector<ServingCase> paged_cases(uint64_t base_seed, bool long_cases);
std::vector<ServingCase> packed_cases(uint64_t base_seed, bool long_cases);

// The reference's packed output, O (total_q, heads, dim_v) and LSE (heads, total_q), as the dense
// comparison's (1, heads, total_q, dim_v) and (1, heads, total_q): compare_outputs on packed rows.
reference::Outputs as_batch_one(const reference::VarlenOutputs& packed);

}  // namespace vkattn::conform
