// `vkattn bench --paged PAGE_SIZE`: the bench's shape with K and V in a paged KV cache
// (vkattn/kv_cache.hpp), timed through the PreparedAttention of a PagedKv spec as the dense bench times its
// call, and checked (--check) against reference::paged_attention on the benched buffers.
#pragma once

#include "bench_common.hpp"
#include "bench_result.hpp"
#include "vkattn/context.hpp"

namespace vkattn::cli {

// The pool holds exactly the pages the sequences need (ceil(len_b / page_size) each), handed out in
// a shuffled order (seeded by --seed), so consecutive pages of a sequence are scattered through it;
// the rows past a sequence's last token in its last page are NaN, which the kernels must not read.
// Block table (batch, max_pages) int32 with max_pages = the longest sequence's pages, -1 past a
// sequence's last page; cache_lens int32 (batch). No append. Throws ShapeSkipped when the buffers
// exceed --max-memory or the device's limits, Error otherwise.
BenchResult bench_paged(Context& context, const BenchOptions& o, const BenchShape& shape, DType dtype);

}  // namespace vkattn::cli
