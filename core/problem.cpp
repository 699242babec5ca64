// check_attention: the one set of argument rules (the contract: docs/semantics.md) that the Vulkan path and the CPU
// reference both apply, so that whatever one rejects the other rejects with the same message.
#include "vkattn/problem.hpp"

#include <algorithm>
#include <array>
#include <string>

#include "layout_check.hpp"
#include "options_check.hpp"
#include "vkattn/error.hpp"
#include "vkattn/q8_0.hpp"
#include "window_rule.hpp"

namespace vkattn {

int64_t AttentionProblem::causal_key_end(int64_t i) const {
  switch (causal) {
    case Causal::none:
      return seq_k;
    case Causal::top_left:
      return i + 1;
    case Causal::bottom_right:
      return i + 1 + seq_k - seq_q;
  }
  return seq_k;
}

int64_t AttentionProblem::visible_key_begin(int64_t i) const {
  if (window_left < 0) return 0;
  return detail::window_key_begin(i + diagonal_offset(), window_left, seq_k);
}

int64_t AttentionProblem::visible_key_end(int64_t i) const {
  if (window_right < 0) return seq_k;
  return detail::window_key_end(i + diagonal_offset(), window_right, seq_k);
}

namespace {

std::string str(int64_t v) { return std::to_string(v); }

// Exact extents of int64 layouts. Unsigned: every term is >= 0 once summed (sizes >= 1 and strides
// >= 0 are checked first), and three products of int64s (each < 2^126) can exceed a signed 128 bits.
__extension__ typedef unsigned __int128 uint128;

[[noreturn]] void fail(const std::string& message) { throw Error(message); }

void check_sizes(const char* name, const TensorLayout& t) {
  const std::array<std::pair<const char*, int64_t>, 4> sizes = {
      {{"batch", t.batch}, {"heads", t.heads}, {"seq", t.seq}, {"dim", t.dim}}};
  for (const auto& [field, value] : sizes) {
    if (value < 1) fail(std::string(name) + "." + field + " (" + str(value) + ") must be at least 1");
  }
}

// Index arithmetic everywhere is int64; a layout whose last element lies beyond 2^62 is refused
// before anything multiplies its sizes.
void check_extent(const char* name, uint128 end) {
  if (end > (static_cast<uint128>(1) << 62))
    fail(std::string(name) + ": sizes and strides reach past element 2^62; the layout is too large");
}

void check_strides(const char* name, const TensorLayout& t) {
  const std::array<std::pair<const char*, int64_t>, 4> nonneg = {{{"stride_batch", t.stride_batch},
                                                                   {"stride_head", t.stride_head},
                                                                   {"stride_seq", t.stride_seq},
                                                                   {"offset", t.offset}}};
  for (const auto& [field, value] : nonneg) {
    if (value < 0) fail(std::string(name) + "." + field + " (" + str(value) + ") must be >= 0");
  }
  check_extent(name, static_cast<uint128>(t.offset) + static_cast<uint128>(t.batch - 1) * t.stride_batch +
                         static_cast<uint128>(t.heads - 1) * t.stride_head +
                         static_cast<uint128>(t.seq - 1) * t.stride_seq + t.dim);
}

void check_equal(const char* a_name, int64_t a, const char* b_name, int64_t b) {
  if (a != b) fail(std::string(a_name) + " (" + str(a) + ") must equal " + b_name + " (" + str(b) + ")");
}

void check_head_dim(const char* name, int64_t dim) {
  if (dim > kMaxHeadDim) {
    fail(std::string(name) + " (" + str(dim) + ") exceeds the maximum head dim " + str(kMaxHeadDim));
  }
}

// Distinct output elements must have distinct indices, or two workgroups would race on one element.
// Sorting the dims of size > 1 by stride, each stride must reach past everything the smaller dims
// span; the contiguous last dim spans `dim` elements.
void check_no_self_overlap(const char* name, const TensorLayout& t) {
  struct Dim {
    int64_t size, stride;
  };
  std::array<Dim, 4> dims = {{{t.batch, t.stride_batch}, {t.heads, t.stride_head}, {t.seq, t.stride_seq},
                              {t.dim, 1}}};
  std::sort(dims.begin(), dims.end(), [](const Dim& a, const Dim& b) { return a.stride < b.stride; });
  int64_t extent = 1;  // elements spanned by the dims seen so far
  for (const Dim& d : dims) {
    if (d.size <= 1) continue;
    if (d.stride < extent) {
      fail(std::string(name) + ": strides (" + str(t.stride_batch) + ", " + str(t.stride_head) + ", " +
           str(t.stride_seq) + ", 1) make distinct elements of shape (" + str(t.batch) + ", " +
           str(t.heads) + ", " + str(t.seq) + ", " + str(t.dim) + ") overlap");
    }
    extent += (d.size - 1) * d.stride;
  }
}

void check_mask(const MaskLayout& m, const AttentionProblem& p) {
  if (m.type != MaskType::boolean && m.type != MaskType::f32 && m.type != MaskType::f16) {
    fail("mask: invalid type " + str(static_cast<int>(m.type)));
  }
  if (m.batch != 1 && m.batch != p.batch) {
    fail("mask: batch " + str(m.batch) + " does not broadcast to batch " + str(p.batch) + " (must be 1 or " +
         str(p.batch) + ")");
  }
  if (m.heads != 1 && m.heads != p.heads) {
    fail("mask: heads " + str(m.heads) + " does not broadcast to heads " + str(p.heads) + " (must be 1 or " +
         str(p.heads) + ")");
  }
  if (m.seq_q != p.seq_q) fail("mask: seq_q (" + str(m.seq_q) + ") must equal q.seq (" + str(p.seq_q) + ")");
  if (m.seq_k != p.seq_k) fail("mask: seq_k (" + str(m.seq_k) + ") must equal k.seq (" + str(p.seq_k) + ")");
  const std::array<std::pair<const char*, int64_t>, 4> nonneg = {{{"stride_batch", m.stride_batch},
                                                                   {"stride_head", m.stride_head},
                                                                   {"stride_q", m.stride_q},
                                                                   {"offset", m.offset}}};
  for (const auto& [field, value] : nonneg) {
    if (value < 0) fail(std::string("mask.") + field + " (" + str(value) + ") must be >= 0");
  }
  check_extent("mask", static_cast<uint128>(m.offset) + static_cast<uint128>(m.batch - 1) * m.stride_batch +
                           static_cast<uint128>(m.heads - 1) * m.stride_head +
                           static_cast<uint128>(m.seq_q - 1) * m.stride_q + m.seq_k);
}

// The score modifiers (options_check.hpp) and the per-head tensors' shapes. Resolves the call's
// alignment and the visible band (causal folded in).
void check_modifiers(const AttentionLayouts& layouts, AttentionProblem& p) {
  const AttentionOptions& o = layouts.options;
  const detail::CheckedOptions checked = detail::check_score_options(o);
  p.align = checked.align;
  if (p.causal != Causal::none) p.window_right = 0;
  if (checked.window) {
    const Window& w = *checked.window;
    p.window_left = w.left;
    if (w.right >= 0) p.window_right = p.window_right >= 0 ? std::min(p.window_right, w.right) : w.right;
  }
  p.num_splits = o.num_splits;
  detail::check_head_values_layouts(layouts.per_head(), p.batch, p.heads);
  for (PerHeadTensor t : kPerHeadTensors) p.per_head[t] = layouts[t].has_value();
  p.alibi_per_batch = layouts.alibi && layouts.alibi->batch != 1;
}

}  // namespace

namespace detail {

void check_tensor_layout(const char* name, const TensorLayout& t) {
  check_sizes(name, t);
  check_strides(name, t);
}

void check_q8_0_layout(const char* name, const TensorLayout& t) {
  const std::string n(name);
  if (t.dim % kQ8_0BlockElements != 0)
    fail(n + ".dim (" + str(t.dim) + ") must be a multiple of 32 for q8_0 (its blocks are 32 elements of a row)");
  // (A batch stride of a single batch is never applied: not judged.)
  const std::pair<const char*, int64_t> fields[] = {{"stride_batch", t.batch > 1 ? t.stride_batch : 0},
                                                    {"stride_head", t.stride_head},
                                                    {"stride_seq", t.stride_seq},
                                                    {"offset", t.offset}};
  for (const auto& [field, value] : fields)
    if (value % kQ8_0BlockElements != 0)
      fail(n + "." + field + " (" + str(value) + ") must be a multiple of 32 for q8_0 (every row starts a block)");
}

void check_head_values_layout(PerHeadTensor tensor, const HeadValuesLayout& l, int64_t batch, int64_t heads) {
  const char* name = to_string(tensor);
  const bool per_batch_allowed = allows_batch_rows(tensor);
  const std::string shape = l.describe();
  if (l.heads != heads || (l.batch != 1 && (!per_batch_allowed || l.batch != batch))) {
    fail(std::string(name) + ": shape " + shape + " must be (heads) = (" + str(heads) + ")" +
         (per_batch_allowed ? " or (batch, heads) = (" + str(batch) + ", " + str(heads) + ")" : std::string()));
  }
  if (l.offset < 0) fail(std::string(name) + ".offset (" + str(l.offset) + ") must be >= 0");
  check_extent(name, static_cast<uint128>(l.offset) + static_cast<uint128>(l.batch) * static_cast<uint128>(l.heads));
}

void check_head_values_layouts(const PerHeadLayouts& layouts, int64_t batch, int64_t heads) {
  for (PerHeadTensor t : kPerHeadTensors)
    if (layouts[t]) check_head_values_layout(t, *layouts[t], batch, heads);
}

}  // namespace detail

AttentionProblem check_attention(const AttentionLayouts& layouts) {
  const TensorLayout& q = layouts.q;
  const TensorLayout& k = layouts.k;
  const TensorLayout& v = layouts.v;
  const TensorLayout& out = layouts.out;

  const std::array<std::pair<const char*, const TensorLayout*>, 4> tensors = {
      {{"q", &q}, {"k", &k}, {"v", &v}, {"out", &out}}};
  for (const auto& [name, t] : tensors) check_sizes(name, *t);
  for (const auto& [name, t] : tensors) check_strides(name, *t);

  for (const auto& [name, t] : {std::pair<const char*, const TensorLayout*>{"k", &k}, {"v", &v}, {"out", &out}}) {
    if (t->dtype != q.dtype) {
      fail(std::string(name) + ".dtype (" + to_string(t->dtype) + ") must equal q.dtype (" + to_string(q.dtype) +
           ")");
    }
  }

  if (q.dtype != DType::f32 && q.dtype != DType::f16 && q.dtype != DType::bf16)
    fail("q.dtype: invalid value " + str(static_cast<int>(q.dtype)));

  check_equal("k.batch", k.batch, "q.batch", q.batch);
  check_equal("v.batch", v.batch, "q.batch", q.batch);
  check_equal("out.batch", out.batch, "q.batch", q.batch);
  check_equal("out.heads", out.heads, "q.heads", q.heads);
  check_equal("v.heads", v.heads, "k.heads", k.heads);
  if (q.heads % k.heads != 0) {
    fail("k.heads (" + str(k.heads) + ") must divide q.heads (" + str(q.heads) +
         ") (GQA requires heads % kv_heads == 0)");
  }
  check_equal("v.seq", v.seq, "k.seq", k.seq);
  check_equal("out.seq", out.seq, "q.seq", q.seq);
  check_equal("k.dim", k.dim, "q.dim", q.dim);
  check_equal("out.dim", out.dim, "v.dim", v.dim);
  check_head_dim("q.dim", q.dim);
  check_head_dim("v.dim", v.dim);

  check_no_self_overlap("out", out);
  if (layouts.kv_quant != KvQuant::none && layouts.kv_quant != KvQuant::q8_0)
    fail("kv_quant: invalid value " + str(static_cast<int>(layouts.kv_quant)));
  if (layouts.kv_quant == KvQuant::q8_0) {
    detail::check_q8_0_layout("k", k);
    detail::check_q8_0_layout("v", v);
  }

  AttentionProblem p;
  p.batch = q.batch;
  p.heads = q.heads;
  p.kv_heads = k.heads;
  p.seq_q = q.seq;
  p.seq_k = k.seq;
  p.dim_qk = q.dim;
  p.dim_v = v.dim;
  p.dtype = q.dtype;
  p.kv_quant = layouts.kv_quant;
  detail::check_causal(layouts.options);
  p.causal = layouts.options.causal;

  if (layouts.mask) check_mask(*layouts.mask, p);
  check_modifiers(layouts, p);

  p.scale = detail::checked_scale(layouts.options, p.dim_qk);
  p.has_mask = layouts.mask.has_value();
  p.has_kv_lengths = layouts.has_kv_lengths;
  p.has_lse = layouts.has_lse;
  return p;
}

}  // namespace vkattn
