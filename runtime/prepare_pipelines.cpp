// Context::prepare_pipelines: building the common pipelines up front, so that an application pays for
// them at start-up (and can save them with save_pipeline_cache) instead of on its first real call.
//
// It runs real, tiny attention calls rather than listing pipeline keys: the keys (tile sizes, kernel
// variant, split-KV) are chosen by the planner from the problem and the device, and going through
// attention() keeps this list from drifting from what the planner picks. It also makes drivers that
// compile lazily, at the first dispatch (lavapipe's JIT), compile now.
#include <string>
#include <vector>

#include "vkattn/attention.hpp"
#include "vkattn/buffer.hpp"
#include "vkattn/context.hpp"
#include "vkattn/error.hpp"

namespace vkattn {

namespace {

// One call of batch 1, `heads` query heads on one KV head, seq_q x seq_k, head dim `dim`, on
// zero-filled buffers.
void run_once(Context& context, DType dtype, int64_t seq_q, int64_t seq_k, int64_t dim, int64_t heads = 1) {
  const TensorLayout q_layout = TensorLayout::bhsd(dtype, 1, heads, seq_q, dim);
  const TensorLayout kv_layout = TensorLayout::bhsd(dtype, 1, 1, seq_k, dim);
  const uint64_t esize = dtype_size(dtype);
  auto zeros = [&](int64_t elements) {
    const uint64_t bytes = static_cast<uint64_t>(elements) * esize;
    Buffer buffer = Buffer::allocate(context, bytes);
    buffer.fill(0);
    return buffer;
  };
  Buffer q = zeros(q_layout.element_count()), k = zeros(kv_layout.element_count());
  Buffer v = zeros(kv_layout.element_count()), out = zeros(q_layout.element_count());
  AttentionArgs args;
  args.q = {&q, q_layout};
  args.k = {&k, kv_layout};
  args.v = {&v, kv_layout};
  args.out = {&out, q_layout};
  attention(context, args);
}

}  // namespace

void Context::prepare_pipelines(DType dtype, const std::vector<int64_t>& head_dims) {
  impl();  // a moved-from Context throws, even with no head dims
  for (const int64_t dim : head_dims) {
    if (dim < 1 || dim > kMaxHeadDim)
      throw Error("prepare_pipelines: head dim " + std::to_string(dim) + " is outside 1.." + std::to_string(kMaxHeadDim));
    // A kernel is one pipeline for a split call (writing the partials the combine reads) and another
    // for a call in one piece: one key is always one piece; 4096 keys on a query row, or 64 keys on
    // 64 rows of one head, too few workgroups to fill a device, are split.
    // Decode against a KV cache; the decode kernels keep the query heads of a GQA group in one
    // workgroup, a pipeline per group size: the common ones.
    for (const int64_t group : {1, 2, 4, 8})
      for (const int64_t keys : {4096, 1}) run_once(*this, dtype, 1, keys, dim, group);
    // Prefill: the multi-row kernel (on CPU devices the subgroup kernel's two passes).
    for (const auto& [rows, keys] : {std::pair<int64_t, int64_t>{64, 64}, {64, 1}})
      run_once(*this, dtype, rows, keys, dim);
  }
}

}  // namespace vkattn
