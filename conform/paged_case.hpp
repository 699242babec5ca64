// A paged-KV-cache call (vkattn/paged_attention.hpp) as a conformance case: the pool, the block table
// (pages shuffled, and shared between sequences), the cache lengths, the tokens appended, the options
// and modifiers. The runner builds it from the seed, runs it on the device with its outputs poisoned
// and guarded, and compares O, LSE and (after an append) both caches with the fp64 reference
// (reference::paged_attention).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <vkattn/vkattn.hpp>

#include "conform/case_modifiers.hpp"
#include "conform/case_runner.hpp"
#include "conform/serving_case.hpp"

namespace vkattn::conform {

struct PagedCase {
  std::string name;
  DType dtype = DType::f32;
  KvQuant quant = KvQuant::none;  // q8_0: the caches hold q8_0 blocks of the drawn values
  int64_t heads = 1, kv_heads = 1, seq_q = 1, dim_qk = 64, dim_v = 64;
  int64_t page_size = 16;
  PageOrder order = PageOrder::nhd;  // of both caches
  std::vector<int32_t> cache_lens;  // one per sequence: the batch
  int64_t seq_new = 0;              // tokens appended (k_new, v_new) before attending
  int64_t spare_pages = 3;          // pool pages no sequence uses (NaN-filled: never read)
  int64_t spare_columns = 1;        // block-table entries past the most any sequence needs (-1)
  // Sequences 0 and 1 share the pages of sequence 0's first `shared_pages` full pages (a common
  // prompt prefix), which neither appends to.
  int64_t shared_pages = 0;
  bool shuffle_pages = true;  // pages handed out in a random order, not 0, 1, 2, ...
  Causal causal = Causal::bottom_right;
  CaseModifiers modifiers;  // the score modifiers (case_modifiers.hpp)
  bool lse = true;
  uint64_t seed = 1;
};

std::string describe(const PagedCase& c);

// The features a case exercises, as (group, value) pairs for `vkattn conform`'s tables: "dtype",
// "layout" ("paged 16"), "heads", "mask" (the causal alignment) and each modifier.
std::vector<std::pair<std::string, std::string>> features(const PagedCase& c);

using PagedResult = ServingResult;

// Runs `c` on `context` (the PreparedAttention of its PagedKv spec, recorded twice on fresh poison: a second step of the
// same plan) and compares with the reference. Throws nothing for a mismatch; an Error from the
// library (a refusal) propagates.
PagedResult run_paged_case(Context& context, const PagedCase& c);

// The same in `vkattn conform`'s frame (case_runner.hpp): skipped on the three-stage path (it takes
// no paged caches) and under a device profile (paged calls are planned for the device they run on).
CaseResult run_paged_case(Context& context, const PagedCase& c, const RunOptions& options);

// The catalog: page sizes 1, 16 and 256; shuffled and shared pages; cache lengths 0, 1, a page edge
// and past it; appends that cross a page boundary; decode and chunked prefill (seq_q > a sequence's
// keys included); GQA; causal in both alignments; every modifier; every dtype; q8_0 caches under every
// kernel form (decode, prefill, modifiers); hnd pages in decode, prefill, appends and q8_0. `long_cases`: a
// sequence of 65,536 keys (lavapipe's loop limit).
std::vector<PagedCase> paged_cases(uint64_t base_seed, bool long_cases);

}  // namespace vkattn::conform
