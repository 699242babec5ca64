// libFuzzer target for vkattn::check_attention (core/problem.cpp): any layouts, masks and options —
// sizes and strides anywhere in int64 (0, negative, 2^31, 2^62, INT64_MAX), offsets, dtype, mask type
// and causal values outside their enums, a NaN or infinite scale — must give an AttentionProblem or a
// vkattn::Error with a one-line message; never a crash, undefined behaviour (signed overflow in the
// extent arithmetic) or another exception. Only the checks run: nothing is allocated from the sizes.
//
// What is accepted must be what the contract says (docs/semantics.md): sizes >= 1, dims <= 256, GQA
// divisibility, agreeing shapes and dtypes, a finite scale, a broadcasting mask, and an output whose
// distinct elements have distinct indices (verified element by element when the output is small).
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "fuzz_modifiers.hpp"
#include "fuzz_values.hpp"
#include "vkattn/error.hpp"
#include "vkattn/problem.hpp"

namespace {

using vkattn::TensorLayout;

using vkattn::fuzz::any_enum;
using vkattn::fuzz::interesting;

// A layout: dense BHSD or BSHD (shapes that mostly agree, so the fuzzer gets past the first checks),
// or every field fuzzed.
TensorLayout layout(FuzzedDataProvider& f, const TensorLayout& like) {
  const vkattn::DType dtype = f.ConsumeBool() ? like.dtype : any_enum<vkattn::DType>(f, 3);
  const int mode = f.ConsumeIntegralInRange<int>(0, 3);
  auto size = [&](int64_t same) { return f.ConsumeIntegralInRange<int>(0, 3) != 0 ? same : interesting(f); };
  TensorLayout t;
  if (mode == 0 || mode == 1) {
    const int64_t b = size(like.batch), h = size(like.heads), s = size(like.seq), d = size(like.dim);
    t = mode == 0 ? TensorLayout::bhsd(dtype, b, h, s, d) : TensorLayout::bshd(dtype, b, s, h, d);
    if (f.ConsumeBool()) t.offset = interesting(f);
  } else {
    t.dtype = dtype;
    t.batch = size(like.batch);
    t.heads = size(like.heads);
    t.seq = size(like.seq);
    t.dim = size(like.dim);
    t.stride_batch = interesting(f);
    t.stride_head = interesting(f);
    t.stride_seq = interesting(f);
    t.offset = interesting(f);
  }
  return t;
}

// Checks, element by element, that distinct elements of a small layout have distinct indices.
bool indices_distinct(const TensorLayout& t) {
  std::vector<int64_t> indices;
  for (int64_t b = 0; b < t.batch; ++b)
    for (int64_t h = 0; h < t.heads; ++h)
      for (int64_t s = 0; s < t.seq; ++s)
        for (int64_t d = 0; d < t.dim; ++d) indices.push_back(t.index(b, h, s, d));
  std::sort(indices.begin(), indices.end());
  return std::adjacent_find(indices.begin(), indices.end()) == indices.end();
}

[[noreturn]] void violated(const char* what) {
  std::fprintf(stderr, "fuzz_check_attention: accepted arguments break the contract: %s\n", what);
  std::abort();
}

void check_accepted(const vkattn::AttentionLayouts& l, const vkattn::AttentionProblem& p) {
  for (const TensorLayout* t : {&l.q, &l.k, &l.v, &l.out}) {
    if (t->batch < 1 || t->heads < 1 || t->seq < 1 || t->dim < 1) violated("a size below 1");
    if (t->stride_batch < 0 || t->stride_head < 0 || t->stride_seq < 0 || t->offset < 0) violated("a negative stride or offset");
    if (t->dtype != l.q.dtype) violated("dtypes differ");
    // The extents were checked: this index arithmetic must not overflow (UBSan would say so).
    if (t->required_elements() < t->dim) violated("required_elements below dim");
  }
  if (p.dtype != vkattn::DType::f32 && p.dtype != vkattn::DType::f16 && p.dtype != vkattn::DType::bf16)
    violated("an invalid dtype");
  if (p.dim_qk < 1 || p.dim_qk > vkattn::kMaxHeadDim || p.dim_v < 1 || p.dim_v > vkattn::kMaxHeadDim)
    violated("a head dim outside 1..kMaxHeadDim");
  if (p.kv_heads < 1 || p.heads % p.kv_heads != 0) violated("heads not divisible by kv_heads");
  if (p.batch != l.k.batch || p.batch != l.v.batch || p.batch != l.out.batch || p.heads != l.out.heads ||
      l.k.heads != l.v.heads || l.k.seq != l.v.seq || l.out.seq != l.q.seq || l.k.dim != l.q.dim ||
      l.out.dim != l.v.dim)
    violated("shapes that do not agree");
  if (!std::isfinite(p.scale)) violated("a non-finite scale");
  if (l.options.scale && p.scale != *l.options.scale) violated("a scale other than the one given");
  if (p.causal != vkattn::Causal::none && p.causal != vkattn::Causal::top_left && p.causal != vkattn::Causal::bottom_right)
    violated("an invalid causal value");
  if (l.mask) {
    const vkattn::MaskLayout& m = *l.mask;
    if ((m.batch != 1 && m.batch != p.batch) || (m.heads != 1 && m.heads != p.heads) || m.seq_q != p.seq_q ||
        m.seq_k != p.seq_k)
      violated("a mask that does not broadcast");
    if (m.type != vkattn::MaskType::boolean && m.type != vkattn::MaskType::f32 && m.type != vkattn::MaskType::f16)
      violated("an invalid mask type");
    if (m.required_elements() < m.seq_k) violated("mask required_elements below seq_k");
  }
  // The modifiers as docs/semantics.md, "Score modifiers" allows them.
  if (const char* what = vkattn::fuzz::modifiers_violation(l.options, l.alibi, l.sinks, p, p.batch)) violated(what);
  const TensorLayout& o = l.out;
  // In double: the product of checked sizes may exceed int64 (the check bounds each, not all).
  const double elements = static_cast<double>(o.batch) * static_cast<double>(o.heads) * static_cast<double>(o.seq) *
                          static_cast<double>(o.dim);
  if (elements <= 4096 && !indices_distinct(o))
    violated("an output whose distinct elements share an index");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  FuzzedDataProvider f(data, size);
  vkattn::AttentionLayouts l;
  TensorLayout base;
  base.dtype = any_enum<vkattn::DType>(f, 3);
  base.batch = interesting(f);
  base.heads = interesting(f);
  base.seq = interesting(f);
  base.dim = interesting(f);
  l.q = layout(f, base);
  TensorLayout kv_like = l.q;
  kv_like.heads = f.ConsumeBool() ? l.q.heads : interesting(f);
  kv_like.seq = f.ConsumeBool() ? l.q.seq : interesting(f);
  l.k = layout(f, kv_like);
  kv_like.dim = f.ConsumeBool() ? l.q.dim : interesting(f);
  l.v = layout(f, kv_like);
  TensorLayout out_like = l.q;
  out_like.dim = l.v.dim;
  l.out = layout(f, out_like);
  if (f.ConsumeBool()) {
    vkattn::MaskLayout m;
    const auto type = any_enum<vkattn::MaskType>(f, 3);
    const int64_t mb = f.ConsumeBool() ? 1 : (f.ConsumeBool() ? l.q.batch : interesting(f));
    const int64_t mh = f.ConsumeBool() ? 1 : (f.ConsumeBool() ? l.q.heads : interesting(f));
    const int64_t sq = f.ConsumeIntegralInRange<int>(0, 3) ? l.q.seq : interesting(f);
    const int64_t sk = f.ConsumeIntegralInRange<int>(0, 3) ? l.k.seq : interesting(f);
    if (f.ConsumeBool()) {
      m = vkattn::MaskLayout::dense(type, mb, mh, sq, sk);
    } else {
      m.type = type;
      m.batch = mb;
      m.heads = mh;
      m.seq_q = sq;
      m.seq_k = sk;
      m.stride_batch = interesting(f);
      m.stride_head = interesting(f);
      m.stride_q = interesting(f);
    }
    if (f.ConsumeBool()) m.offset = interesting(f);
    l.mask = m;
  }
  l.has_kv_lengths = f.ConsumeBool();
  l.has_lse = f.ConsumeBool();
  l.options.causal = any_enum<vkattn::Causal>(f, 3);
  if (f.ConsumeBool()) {
    static constexpr float kScales[] = {0.0f,
                                        -0.0f,
                                        1.0f,
                                        -1.0f,
                                        std::numeric_limits<float>::quiet_NaN(),
                                        std::numeric_limits<float>::infinity(),
                                        -std::numeric_limits<float>::infinity(),
                                        std::numeric_limits<float>::max(),
                                        std::numeric_limits<float>::denorm_min()};
    l.options.scale = f.ConsumeBool() ? f.PickValueInArray(kScales) : f.ConsumeFloatingPoint<float>();
  }
  // The score modifiers, read last so the corpus' earlier inputs keep their meaning: a window (sides
  // anywhere in int64), an alignment (any enum value), a softcap (NaN, inf, 0, negative, tiny), ALiBi
  // slopes and sinks of any shape and offset.
  // (The window sides and softcaps from fuzz_modifiers.hpp: -1, 0, past 2^31, INT64_MAX; FLT_MAX,
  // denormal, NaN, +-inf.)
  if (f.ConsumeBool()) l.options.window = vkattn::Window{vkattn::fuzz::window_side(f), vkattn::fuzz::window_side(f)};
  if (f.ConsumeBool()) l.options.align = any_enum<vkattn::Align>(f, 2);
  if (f.ConsumeBool()) l.options.softcap = vkattn::fuzz::softcap_value(f);
  for (std::optional<vkattn::HeadValuesLayout>* values : {&l.alibi, &l.sinks}) {
    if (!f.ConsumeBool()) continue;
    vkattn::HeadValuesLayout v;
    v.batch = f.ConsumeBool() ? 1 : (f.ConsumeBool() ? l.q.batch : interesting(f));
    v.heads = f.ConsumeIntegralInRange<int>(0, 3) ? l.q.heads : interesting(f);
    v.offset = f.ConsumeBool() ? 0 : interesting(f);
    *values = v;
  }

  try {
    const vkattn::AttentionProblem p = vkattn::check_attention(l);
    check_accepted(l, p);
  } catch (const vkattn::Error& e) {
    const std::string message = e.what();
    if (message.empty() || message.find('\n') != std::string::npos) {
      std::fprintf(stderr, "fuzz_check_attention: an error message that is not one line: '%s'\n", message.c_str());
      std::abort();
    }
  }
  return 0;
}
