// Planning a paged-KV-cache call (vkattn/kv_cache.hpp): the caches are seen as dense (batch, kv_heads,
// capacity, dim) tensors of batch stride 0, whose key rows the kernels look up in the block table,
// and the dense planners do the rest: the fused one (kernel, tiles, splits by the table's capacity,
// lavapipe's loop limit, chunks of the other tensors) or the three-stage one (its GEMMs read the
// caches through the table).
#include <algorithm>
#include <string>

#include "attention_record.hpp"
#include "vkattn/error.hpp"

namespace vkattn::detail {
namespace {

std::string str(uint64_t v) { return std::to_string(v); }

}  // namespace

// The cache as the kernels address it: key j of sequence b, KV head g is row page * page_rows + slot
// of the view (PagedKeys::page_rows), plus g * stride_head; the view's seq is the capacity (the most
// keys a sequence has). nhd pages: rows of kv_heads * row, heads row apart; hnd: rows of row, heads
// page_size * row apart (row = the cache's row_elements(): its dim, or a view's wider rows).
TensorLayout paged_cache_view(DType dtype, int64_t batch, const PagedKvLayout& cache, int64_t capacity) {
  TensorLayout t;
  t.dtype = dtype;
  t.batch = batch;
  t.heads = cache.kv_heads;
  t.seq = capacity;
  t.dim = cache.dim;
  t.stride_batch = 0;
  const bool hnd = cache.order == PageOrder::hnd;
  const int64_t row = cache.row_elements();  // a view's rows are wider than its dim
  t.stride_head = hnd ? cache.page_size * row : row;
  t.stride_seq = hnd ? row : cache.kv_heads * row;
  return t;
}

PagedCall plan_paged(const DeviceInfo& device, KernelVariant variant, const PagedAttentionLayouts& layouts) {
  PagedCall call;
  call.problem = check_paged_attention(layouts);
  const PagedProblem& pp = call.problem;

  AttentionLayouts& d = call.dense;
  d.q = layouts.q;
  d.out = layouts.out;
  d.k = paged_cache_view(layouts.q.dtype, layouts.q.batch, layouts.k_cache, pp.capacity());
  d.v = paged_cache_view(layouts.q.dtype, layouts.q.batch, layouts.v_cache, pp.capacity());
  d.has_kv_lengths = true;  // the cache lengths, bound where the key lengths are
  d.has_lse = layouts.has_lse;
  d.options = layouts.options;
  d.per_head() = layouts.per_head();
  d.kv_quant = pp.quant;

  PagedKeys keys;
  keys.page_size = static_cast<uint32_t>(pp.page_size);
  keys.order = layouts.k_cache.order;
  keys.cache_kv_heads = layouts.k_cache.kv_heads;
  keys.max_pages = pp.max_pages;
  keys.num_pages = pp.num_pages;
  keys.seq_new = pp.seq_new;
  keys.k_elements = layouts.k_cache.element_count();
  keys.v_elements = layouts.v_cache.element_count();
  keys.k_row = layouts.k_cache.row_elements();
  keys.v_row = layouts.v_cache.row_elements();
  keys.appends_v = pp.appends_v;
  // Both caches are bound whole (any key may be in any page), and indexed with 32 bits.
  const uint64_t alignment = std::max<uint64_t>(device.min_storage_buffer_offset_alignment, 16);
  for (const auto& [name, cache] : {std::pair{"k_cache", &layouts.k_cache}, std::pair{"v_cache", &layouts.v_cache}}) {
    const uint64_t bytes = uint64_t(cache->required_bytes());
    if (bytes + alignment > device.max_storage_buffer_range || uint64_t(cache->element_count()) > kMaxIndex)
      throw unsupported(std::string("binding: ") + name + " " + cache->describe() + " holds " + str(bytes) +
                        " bytes; a paged cache is bound whole and must fit one binding (maxStorageBufferRange " +
                        str(device.max_storage_buffer_range) + " bytes of " + device.name + ")");
  }
  const uint64_t table_bytes = uint64_t(pp.attention.batch) * uint64_t(pp.max_pages) * 4;
  if (table_bytes + alignment > device.max_storage_buffer_range)
    throw unsupported("binding: block_table (" + str(uint64_t(pp.attention.batch)) + ", " + str(uint64_t(pp.max_pages)) +
                      ") exceeds maxStorageBufferRange (" + str(device.max_storage_buffer_range) + " bytes) of " +
                      device.name);
  // The append: one workgroup row per new token, one layer per (sequence, KV head).
  if (uint64_t(pp.seq_new) > device.max_workgroup_count[1] ||
      uint64_t(pp.attention.batch * pp.attention.kv_heads) > device.max_workgroup_count[2])
    throw unsupported("grid: appending " + str(uint64_t(pp.seq_new)) + " tokens to " +
                      str(uint64_t(pp.attention.batch)) + " x " + str(uint64_t(pp.attention.kv_heads)) +
                      " (batch x kv_heads) exceeds maxComputeWorkGroupCount of " + device.name);
  check_path(layouts.path);
  PathPlan& planned = call.planned;
  if (pp.shared_prefix_pages > 0) {
    if (layouts.path == AttentionPath::unfused)
      throw unsupported("path: unfused, but shared_prefix_pages is " + str(uint64_t(pp.shared_prefix_pages)) +
                        "; the cascade runs on the fused path (use path auto or fused, or no shared prefix)");
    planned.cascade = plan_cascade(device, variant, layouts, pp, d, keys);
    planned.fused = planned.cascade->suffix;
    return call;
  }
  if (layouts.path == AttentionPath::unfused)
    planned.unfused = make_unfused_plan(device, d, false, &keys);
  else if (layouts.path == AttentionPath::automatic)
    planned.unfused = wide_heads_three_stage(device, d, &keys);
  if (!planned.unfused) planned.fused = plan_fused(device, variant, d, true, &keys);
  return call;
}

}  // namespace vkattn::detail
