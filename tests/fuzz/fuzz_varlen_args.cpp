// libFuzzer target for the packed variable-length checks (core/varlen.cpp): check_varlen_attention
// on VarlenAttentionLayouts (packed tensors or any fields, sizes and strides anywhere in int64, batch,
// max_seqlen_q/k, q8_0, path and weights, the score modifiers at their edges: fuzz_modifiers.hpp),
// then check_varlen_values and check_cu_seqlens on offset arrays of bounded length (mostly valid
// partitions, sometimes any int32, any claimed batch). Each must return or throw vkattn::Error with a
// one-line message; never crash, overflow (UBSan) or accept what the contract (varlen.hpp) refuses.
// Only the checks run: nothing is allocated from the claimed sizes.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "fuzz_modifiers.hpp"
#include "fuzz_values.hpp"
#include "vkattn/error.hpp"
#include "vkattn/q8_0.hpp"
#include "vkattn/varlen.hpp"

namespace {

using vkattn::TensorLayout;

using vkattn::fuzz::any_enum;
using vkattn::fuzz::interesting;

// A packed tensor (1, heads, total, dim), mostly agreeing with `heads`/`total`/`dim`; sometimes every
// field fuzzed (a batch other than 1, strides, an offset).
TensorLayout packed(FuzzedDataProvider& f, vkattn::DType dtype, int64_t heads, int64_t total, int64_t dim) {
  auto size = [&](int64_t same) { return f.ConsumeIntegralInRange<int>(0, 3) != 0 ? same : interesting(f); };
  if (f.ConsumeIntegralInRange<int>(0, 3) != 0) {
    TensorLayout t = vkattn::packed_layout(f.ConsumeIntegralInRange<int>(0, 7) ? dtype : any_enum<vkattn::DType>(f, 3),
                                           size(total), size(heads), size(dim));
    if (f.ConsumeIntegralInRange<int>(0, 3) == 0) t.offset = interesting(f);
    return t;
  }
  TensorLayout t;
  t.dtype = any_enum<vkattn::DType>(f, 3);
  t.batch = size(1);
  t.heads = size(heads);
  t.seq = size(total);
  t.dim = size(dim);
  t.stride_batch = interesting(f);
  t.stride_head = interesting(f);
  t.stride_seq = interesting(f);
  t.offset = interesting(f);
  return t;
}

[[noreturn]] void violated(const char* what) {
  std::fprintf(stderr, "fuzz_varlen_args: accepted arguments break the contract: %s\n", what);
  std::abort();
}

void one_line(const vkattn::Error& e) {
  const std::string message = e.what();
  if (message.empty() || message.find('\n') != std::string::npos) {
    std::fprintf(stderr, "fuzz_varlen_args: an error message that is not one line: '%s'\n", message.c_str());
    std::abort();
  }
}

void check_accepted(const vkattn::VarlenAttentionLayouts& l, const vkattn::VarlenProblem& p) {
  for (const TensorLayout* t : {&l.q, &l.k, &l.v, &l.out}) {
    if (t->batch != 1) violated("a packed tensor of batch other than 1");
    if (t->heads < 1 || t->seq < 1 || t->dim < 1) violated("a size below 1");
    if (t->stride_batch < 0 || t->stride_head < 0 || t->stride_seq < 0 || t->offset < 0) violated("a negative stride or offset");
  }
  if (l.batch < 1 || p.batch != l.batch) violated("a batch below 1, or not the one given");
  if (p.total_q() != l.q.seq || p.total_k() != l.k.seq) violated("totals other than the packed rows");
  if (p.max_seq_q < 0 || p.max_seq_q > p.total_q() || p.max_seq_k < 0 || p.max_seq_k > p.total_k())
    violated("a max_seqlen outside [0, total]");
  if ((l.max_seqlen_q == 0 && p.max_seq_q != p.total_q()) || (l.max_seqlen_q > 0 && p.max_seq_q != l.max_seqlen_q) ||
      (l.max_seqlen_k == 0 && p.max_seq_k != p.total_k()) || (l.max_seqlen_k > 0 && p.max_seq_k != l.max_seqlen_k))
    violated("max_seqlen resolved to another value");
  const vkattn::AttentionProblem& a = p.attention;
  if (a.dim_qk < 1 || a.dim_qk > vkattn::kMaxHeadDim || a.dim_v < 1 || a.dim_v > vkattn::kMaxHeadDim)
    violated("a head dim outside 1..kMaxHeadDim");
  if (a.kv_heads < 1 || a.heads % a.kv_heads != 0) violated("heads not divisible by kv_heads");
  if (p.kv_quant == vkattn::KvQuant::q8_0) {
    for (const TensorLayout* t : {&l.k, &l.v})
      if (t->dim % vkattn::kQ8_0BlockElements != 0 || t->stride_head % 32 != 0 || t->stride_seq % 32 != 0 ||
          t->offset % 32 != 0)
        violated("q8_0 K/V not in whole blocks");
  } else if (p.kv_quant != vkattn::KvQuant::none) {
    violated("an invalid kv_quant");
  }
  if (const char* what = vkattn::fuzz::modifiers_violation(l.options, l.alibi, l.sinks, a, l.batch)) violated(what);
}

// batch + 1 offsets from 0 to `total` (small totals: a partition; else any int32), or any values.
std::vector<int32_t> offsets(FuzzedDataProvider& f, int64_t batch, int64_t total) {
  const std::size_t n = batch >= 0 && batch < 64 && f.ConsumeIntegralInRange<int>(0, 3) != 0
                            ? static_cast<std::size_t>(batch + 1)
                            : f.ConsumeIntegralInRange<std::size_t>(0, 65);
  std::vector<int32_t> cu(n);
  if (f.ConsumeIntegralInRange<int>(0, 3) != 0 && total >= 0 && total <= std::numeric_limits<int32_t>::max()) {
    for (int32_t& x : cu) x = f.ConsumeIntegralInRange<int32_t>(0, static_cast<int32_t>(total));
    std::sort(cu.begin(), cu.end());
    if (!cu.empty()) {
      cu.front() = 0;
      cu.back() = static_cast<int32_t>(total);
    }
  } else {
    for (int32_t& x : cu) x = f.ConsumeIntegral<int32_t>();
  }
  return cu;
}

void check_offsets_accepted(std::span<const int32_t> cu, int64_t batch, int64_t total, int64_t max_len) {
  if (int64_t(cu.size()) != batch + 1 || cu.front() != 0 || cu.back() != total) violated("offsets of the wrong size or ends");
  for (std::size_t b = 1; b < cu.size(); ++b) {
    if (cu[b] < cu[b - 1]) violated("decreasing offsets");
    if (int64_t(cu[b]) - cu[b - 1] > max_len) violated("a sequence longer than its max_seqlen");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  FuzzedDataProvider f(data, size);
  vkattn::VarlenAttentionLayouts l;
  const vkattn::DType dtype = any_enum<vkattn::DType>(f, 3);
  const int64_t heads = interesting(f), kv_heads = f.ConsumeBool() ? heads : interesting(f);
  const int64_t total_q = interesting(f), total_k = interesting(f);
  const int64_t dim = f.ConsumeBool() ? 32 * f.ConsumeIntegralInRange<int64_t>(1, 8) : interesting(f);
  const int64_t dim_v = f.ConsumeBool() ? dim : interesting(f);
  l.q = packed(f, dtype, heads, total_q, dim);
  l.k = packed(f, dtype, kv_heads, total_k, dim);
  l.v = packed(f, dtype, kv_heads, total_k, dim_v);
  l.out = packed(f, dtype, heads, total_q, dim_v);
  l.kv_quant = any_enum<vkattn::KvQuant>(f, 2);
  l.batch = f.ConsumeBool() ? f.ConsumeIntegralInRange<int64_t>(1, 8) : interesting(f);
  l.max_seqlen_q = f.ConsumeBool() ? 0 : interesting(f);
  l.max_seqlen_k = f.ConsumeBool() ? 0 : interesting(f);
  l.has_lse = f.ConsumeBool();
  l.weights = f.ConsumeBool();
  l.path = any_enum<vkattn::AttentionPath>(f, 3);
  l.options.causal = any_enum<vkattn::Causal>(f, 3);
  if (f.ConsumeBool()) l.options.scale = f.ConsumeFloatingPoint<float>();
  vkattn::fuzz::draw_modifiers(f, l.options, l.alibi, l.sinks, l.batch, heads, interesting);

  try {
    const vkattn::VarlenProblem p = vkattn::check_varlen_attention(l);
    check_accepted(l, p);
    const std::vector<int32_t> cu_q = offsets(f, l.batch, p.total_q()), cu_k = offsets(f, l.batch, p.total_k());
    try {
      vkattn::check_varlen_values(l, cu_q, cu_k);
      check_offsets_accepted(cu_q, p.batch, p.total_q(), p.max_seq_q);
      check_offsets_accepted(cu_k, p.batch, p.total_k(), p.max_seq_k);
    } catch (const vkattn::Error& e) {
      one_line(e);
    }
  } catch (const vkattn::Error& e) {
    one_line(e);
  }

  // check_cu_seqlens on its own: any claimed batch and total (a caller's, unchecked).
  const int64_t batch = f.ConsumeBool() ? l.batch : interesting(f), total = f.ConsumeBool() ? total_q : interesting(f);
  const std::vector<int32_t> cu = offsets(f, batch, total);
  try {
    vkattn::check_cu_seqlens("cu_seqlens_q", cu, batch, total, "total_q");
    check_offsets_accepted(cu, batch, total, std::numeric_limits<int64_t>::max());
  } catch (const vkattn::Error& e) {
    one_line(e);
  }
  return 0;
}
