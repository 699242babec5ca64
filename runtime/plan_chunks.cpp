// Step plan_chunks (plan_steps.hpp): a storage binding holds at most maxStorageBufferRange bytes and
// the grid's y and z dimensions count heads and batches, so a large call runs as chunks of whole
// batches x whole GQA groups, each bound from its own first element; and chunk_layouts, the layouts
// of one chunk.
#include <algorithm>
#include <string>

#include "kv_storage.hpp"
#include "plan_steps.hpp"
#include "vkattn/error.hpp"

namespace vkattn::detail {
namespace {

std::string str(uint64_t v) { return std::to_string(v); }

TensorLayout rebase(TensorLayout l, int64_t b0, int64_t nb, int64_t h0, int64_t nh) {
  l.offset += b0 * l.stride_batch + h0 * l.stride_head;
  l.batch = nb;
  l.heads = nh;
  return l;
}

// Most bytes the binding of elements [first, end) spans, as attention.cpp binds it: from the first
// element's byte rounded down to the offset alignment (at most alignment - 1 bytes earlier: the
// bound holds for every chunk, whichever offset it starts at) to the last whole 32-bit word.
uint64_t binding_bytes(int64_t first, int64_t end, uint64_t esize, uint64_t alignment) {
  return alignment - 1 + (uint64_t(end - first) * esize + 3) / 4 * 4;
}
// The same for K or V (kv_storage.hpp: q8_0 blocks).
uint64_t kv_binding_bytes(const TensorLayout& t, KvQuant quant, uint64_t alignment) {
  return alignment - 1 + (kv_bytes(t.dtype, quant, t.required_elements()) - kv_bytes(t.dtype, quant, t.offset) + 3) / 4 * 4;
}

// Whether every binding of a chunk fits in one descriptor range (K and V whole, or only the others
// when K and V are bound by key range).
bool chunk_fits(const AttentionLayouts& a, uint64_t alignment, uint64_t max_range, bool with_kv = true) {
  const auto bytes = [&](const TensorLayout& l) {
    return binding_bytes(l.offset, l.required_elements(), dtype_size(l.dtype), alignment);
  };
  if (bytes(a.q) > max_range || bytes(a.out) > max_range) return false;
  if (with_kv && (kv_binding_bytes(a.k, a.kv_quant, alignment) > max_range ||
                  kv_binding_bytes(a.v, a.kv_quant, alignment) > max_range))
    return false;
  const uint64_t rows = uint64_t(a.q.batch * a.q.heads * a.q.seq);
  if (a.has_lse && rows * 4 + alignment > max_range) return false;
  return !a.mask || binding_bytes(a.mask->offset, a.mask->required_elements(), mask_type_size(a.mask->type),
                                  alignment) <= max_range;
}

// A packed batch runs as one chunk: its sequences' rows are anywhere in the tensors, and each
// workgroup's batch index is a sequence (the grid's z), not a batch of the tensors.
void check_varlen_fits(const PlanInputs& in, const ChunkPlan& chunks) {
  const DeviceInfo& device = in.device;
  const uint64_t max_range = device.max_storage_buffer_range, max_z = device.max_workgroup_count[2];
  if (chunks.head_chunk < in.problem.heads || !chunk_fits(in.layouts, chunks.alignment, max_range, true))
    throw unsupported("binding: a packed variable-length call binds q, k, v, out and the LSE whole, and one of them "
                      "spans more than maxStorageBufferRange (" + str(max_range) + " bytes) of " + device.name +
                      " (q " + in.layouts.q.describe() + ", k " + in.layouts.k.describe() + ")");
  if (uint64_t(in.varlen->batch) > max_z)
    throw unsupported("grid: a packed batch of " + str(uint64_t(in.varlen->batch)) +
                      " sequences exceeds maxComputeWorkGroupCount[2] (" + str(max_z) + ") of " + device.name);
}

// As many whole batches as fit, then as many whole GQA groups of one batch; else key ranges.
void cut_to_bindings(const PlanInputs& in, ChunkPlan& chunks) {
  const AttentionLayouts& layouts = in.layouts;
  const uint64_t max_range = in.device.max_storage_buffer_range, alignment = chunks.alignment;
  const int64_t group = in.group();
  // A paged cache is bound whole (any key may sit in any page): plan_paged checked that it fits, and
  // only the other tensors are cut into chunks.
  const bool with_kv = !in.paged;
  const auto fits = [&](int64_t nb, int64_t nh, bool kv) {
    return chunk_fits(chunk_layouts(layouts, group, 0, nb, 0, nh), alignment, max_range, kv);
  };
  // As many whole batches as fit (the bindings grow with the batches: a binary search).
  if (!fits(chunks.batch_chunk, chunks.head_chunk, with_kv)) {
    int64_t fit = 1, fails = chunks.batch_chunk;
    while (fails - fit > 1) {
      const int64_t mid = fit + (fails - fit) / 2;
      (fits(mid, chunks.head_chunk, with_kv) ? fit : fails) = mid;
    }
    chunks.batch_chunk = fit;
  }
  while (chunks.head_chunk > group && !fits(1, chunks.head_chunk, with_kv)) chunks.head_chunk -= group;
  if (fits(chunks.batch_chunk, chunks.head_chunk, with_kv)) return;
  chunks.key_ranges = true;
  if (!fits(1, group, false))
    throw unsupported("binding: the queries, output, mask or LSE of one batch x one GQA group span more than "
                      "maxStorageBufferRange (" + str(max_range) + " bytes) of " + in.device.name + " (q " +
                      layouts.q.describe() + ")");
}

}  // namespace

// Chunks: everything at once when it fits; else as many whole batches as fit in one binding, and
// when one batch alone does not, one batch at a time and as many whole GQA groups of heads as fit;
// else (one KV head alone is larger than a binding) one GQA group with K and V bound by key range,
// one range per dispatch (key_ranges). The grid's y dimension (heads) caps the chunk too.
ChunkPlan plan_chunks(const PlanInputs& in) {
  const DeviceInfo& device = in.device;
  const AttentionProblem& p = in.problem;
  ChunkPlan chunks;
  chunks.alignment = std::max<uint64_t>(device.min_storage_buffer_offset_alignment, 16);
  const uint64_t max_y = device.max_workgroup_count[1], max_z = device.max_workgroup_count[2];
  const int64_t group = in.group();
  if (uint64_t(group) > max_y)
    throw unsupported("grid: a GQA group of " + str(group) + " query heads exceeds maxComputeWorkGroupCount[1] (" +
                      str(max_y) + ") of " + device.name);
  chunks.batch_chunk = std::min<int64_t>(p.batch, int64_t(max_z));
  chunks.head_chunk = std::min<int64_t>(p.heads, int64_t(max_y) / group * group);
  // Per-batch ALiBi slopes are indexed b * heads + h with the chunk's heads: whole rows of them only.
  if (p.alibi_per_batch && chunks.head_chunk < p.heads) chunks.batch_chunk = 1;
  if (in.varlen) {
    check_varlen_fits(in, chunks);
    chunks.batch_chunk = in.varlen->batch;
  } else if (chunks.head_chunk < p.heads || chunks.batch_chunk < p.batch ||
             !chunk_fits(in.layouts, chunks.alignment, device.max_storage_buffer_range, !in.paged)) {
    cut_to_bindings(in, chunks);
  }
  return chunks;
}

AttentionLayouts chunk_layouts(const AttentionLayouts& layouts, int64_t group, int64_t b0, int64_t nb, int64_t h0,
                               int64_t nh) {
  AttentionLayouts l = layouts;
  l.q = rebase(layouts.q, b0, nb, h0, nh);
  l.out = rebase(layouts.out, b0, nb, h0, nh);
  l.k = rebase(layouts.k, b0, nb, h0 / group, nh / group);
  l.v = rebase(layouts.v, b0, nb, h0 / group, nh / group);
  if (l.mask) {
    MaskLayout& m = *l.mask;
    if (m.batch > 1) m.offset += b0 * m.stride_batch, m.batch = nb;
    if (m.heads > 1) m.offset += h0 * m.stride_head, m.heads = nh;
  }
  // Per-head values: the chunk's heads from h0 (the kernels index them by the chunk's heads; plan_fused
  // keeps per-batch slopes to one batch per chunk when it cuts the heads).
  for (PerHeadTensor t : kPerHeadTensors) {
    if (!l[t]) continue;
    HeadValuesLayout& a = *l[t];
    if (a.batch > 1) a.offset += b0 * a.heads, a.batch = nb;
    a.offset += h0, a.heads = nh;
  }
  return l;
}

}  // namespace vkattn::detail
