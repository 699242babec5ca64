// check_varlen_attention and check_cu_seqlens: the packed batch's own rules, then the dense rules
// (check_attention) on the packed tensors as one batch, so that both layouts word a bad argument
// the same way.
#include "vkattn/varlen.hpp"

#include <limits>
#include <string>

#include "layout_check.hpp"
#include "size_check.hpp"
#include "vkattn/error.hpp"
#include "vkattn/q8_0.hpp"

namespace vkattn {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

[[noreturn]] void fail(const std::string& message) { throw Error(message); }

void check_packed(const char* name, const TensorLayout& t) {
  if (t.batch != 1)
    fail(std::string(name) + ".batch (" + str(t.batch) +
         ") must be 1: a packed tensor is (1, heads, total, dim), its sequences told apart by cu_seqlens");
}

}  // namespace

VarlenProblem check_varlen_attention(const VarlenAttentionLayouts& l) {
  if (l.batch < 1) fail("batch (" + str(l.batch) + ") must be at least 1 (cu_seqlens hold batch + 1 values)");
  check_packed("q", l.q);
  check_packed("k", l.k);
  check_packed("v", l.v);
  check_packed("out", l.out);

  // ALiBi's batch is the number of sequences, not the packed tensors' 1: checked here, and handed to
  // check_attention as (heads).
  AttentionLayouts dense;
  dense.q = l.q;
  dense.k = l.k;
  dense.v = l.v;
  dense.out = l.out;
  dense.has_lse = l.has_lse;
  dense.options = l.options;
  dense.kv_quant = l.kv_quant;  // check_attention checks q8_0's layouts
  detail::check_head_values_layouts(l.per_head(), l.batch, l.q.heads);
  dense.per_head() = l.per_head();
  if (l.alibi) dense.alibi = HeadValuesLayout{1, l.alibi->heads, 0};

  VarlenProblem p;
  p.attention = check_attention(dense);
  if (l.alibi) p.attention.alibi_per_batch = l.alibi->batch != 1;
  p.batch = l.batch;
  p.kv_quant = l.kv_quant;
  const auto max_len = [](const char* name, int64_t value, int64_t total, const char* total_name) {
    if (value < 0 || value > total)
      fail(std::string(name) + " (" + str(value) + ") must be in [0, " + total_name + " (" + str(total) +
           ")]: a bound on every sequence's length, 0 = the total");
    return value == 0 ? total : value;
  };
  p.max_seq_q = max_len("max_seqlen_q", l.max_seqlen_q, p.total_q(), "total_q");
  p.max_seq_k = max_len("max_seqlen_k", l.max_seqlen_k, p.total_k(), "total_k");
  return p;
}

void check_cu_seqlens(const char* name, std::span<const int32_t> cu, int64_t batch, int64_t total,
                      const char* total_name) {
  const std::string n(name);
  // First, as check_varlen_attention does: batch + 1 would overflow at INT64_MAX, and batch -1 would
  // pass the size check with an empty array, then read cu[0].
  if (batch < 1) fail(n + ": batch (" + str(batch) + ") must be at least 1 (" + n + " holds batch + 1 values)");
  if (batch == std::numeric_limits<int64_t>::max()) fail(n + ": batch (" + str(batch) + ") + 1 overflows int64");
  detail::check_size(name, cu.size(), batch + 1, detail::shape_string({batch + 1}), " (batch + 1)");
  if (cu[0] != 0) fail(n + "[0] (" + str(cu[0]) + ") must be 0");
  for (std::size_t b = 1; b < cu.size(); ++b)
    if (cu[b] < cu[b - 1])
      fail(n + "[" + str(static_cast<int64_t>(b)) + "] (" + str(cu[b]) + ") < " + n + "[" +
           str(static_cast<int64_t>(b - 1)) + "] (" + str(cu[b - 1]) + "): the offsets must be non-decreasing");
  if (cu[static_cast<std::size_t>(batch)] != total)
    fail(n + "[" + str(batch) + "] (" + str(cu[static_cast<std::size_t>(batch)]) + ") must equal " + total_name +
         " (" + str(total) + ")");
}

void check_varlen_values(const VarlenAttentionLayouts& layouts, std::span<const int32_t> cu_q,
                         std::span<const int32_t> cu_k) {
  const VarlenProblem p = check_varlen_attention(layouts);
  check_cu_seqlens("cu_seqlens_q", cu_q, p.batch, p.total_q(), "total_q (q.seq)");
  check_cu_seqlens("cu_seqlens_k", cu_k, p.batch, p.total_k(), "total_k (k.seq)");
  for (std::size_t b = 0; b + 1 < cu_q.size(); ++b) {
    const int64_t seq_q = int64_t(cu_q[b + 1]) - cu_q[b], seq_k = int64_t(cu_k[b + 1]) - cu_k[b];
    if (seq_q > p.max_seq_q)
      fail("cu_seqlens_q: sequence " + str(int64_t(b)) + " has " + str(seq_q) + " queries, more than max_seqlen_q (" +
           str(p.max_seq_q) + ")");
    if (seq_k > p.max_seq_k)
      fail("cu_seqlens_k: sequence " + str(int64_t(b)) + " has " + str(seq_k) + " keys, more than max_seqlen_k (" +
           str(p.max_seq_k) + ")");
  }
}

}  // namespace vkattn
