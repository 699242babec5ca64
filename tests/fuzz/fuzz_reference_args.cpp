// libFuzzer target for the fp64 CPU reference's argument checking (vkattn::reference::attention,
// core/reference.cpp): layouts with fuzzed strides and offsets, value spans shorter or longer than
// the layouts need, kv_lengths of any count and value, masks of every type and broadcast, restricted
// rows (out of range, repeated), a NaN or infinite scale, and NaN/Inf in the data. Every input must
// give outputs or a vkattn::Error; never a read outside a span (ASan), undefined behaviour (UBSan) or
// another exception.
//
// Unlike check_attention's target this one runs the computation, so the sizes are bounded before the
// call (every size <= 9, every span <= 4096 values): a fuzzer must never allocate gigabytes.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "vkattn/error.hpp"
#include "vkattn/reference.hpp"

namespace {

using vkattn::TensorLayout;

constexpr int64_t kMaxSize = 9;
constexpr std::size_t kMaxSpan = 4096;

int64_t small(FuzzedDataProvider& f) {
  // Mostly 1..kMaxSize; sometimes 0 or negative, which the checks must refuse.
  return f.ConsumeIntegralInRange<int>(0, 15) == 0 ? f.ConsumeIntegralInRange<int64_t>(-2, 0)
                                                   : f.ConsumeIntegralInRange<int64_t>(1, kMaxSize);
}

int64_t stride(FuzzedDataProvider& f) {
  return f.ConsumeIntegralInRange<int>(0, 15) == 0 ? f.ConsumeIntegralInRange<int64_t>(-3, -1)
                                                   : f.ConsumeIntegralInRange<int64_t>(0, 100);
}

TensorLayout layout(FuzzedDataProvider& f, int64_t batch, int64_t heads, int64_t seq, int64_t dim) {
  auto maybe = [&](int64_t v) { return f.ConsumeIntegralInRange<int>(0, 7) == 0 ? small(f) : v; };
  batch = maybe(batch);
  heads = maybe(heads);
  seq = maybe(seq);
  dim = maybe(dim);
  const vkattn::DType dtype = f.ConsumeIntegralInRange<int>(0, 15) == 0 ? vkattn::DType::f16 : vkattn::DType::f32;
  TensorLayout t;
  switch (f.ConsumeIntegralInRange<int>(0, 2)) {
    case 0:
      t = TensorLayout::bhsd(dtype, batch, heads, seq, dim);
      break;
    case 1:
      t = TensorLayout::bshd(dtype, batch, seq, heads, dim);
      break;
    default:
      t.dtype = dtype;
      t.batch = batch;
      t.heads = heads;
      t.seq = seq;
      t.dim = dim;
      t.stride_batch = stride(f);
      t.stride_head = stride(f);
      t.stride_seq = stride(f);
  }
  if (f.ConsumeIntegralInRange<int>(0, 3) == 0) t.offset = f.ConsumeIntegralInRange<int64_t>(-1, 64);
  return t;
}

float value(FuzzedDataProvider& f) {
  static constexpr float kSpecial[] = {0.0f,
                                       -0.0f,
                                       1.0f,
                                       -1.0f,
                                       std::numeric_limits<float>::quiet_NaN(),
                                       std::numeric_limits<float>::infinity(),
                                       -std::numeric_limits<float>::infinity(),
                                       std::numeric_limits<float>::max(),
                                       -std::numeric_limits<float>::max(),
                                       std::numeric_limits<float>::denorm_min()};
  switch (f.ConsumeIntegralInRange<int>(0, 7)) {
    case 0:
      return f.PickValueInArray(kSpecial);
    case 1:
      return f.ConsumeFloatingPoint<float>();
    default:
      return static_cast<float>(f.ConsumeIntegralInRange<int>(-8, 8)) * 0.25f;
  }
}

// A span of values for a layout: usually exactly what it needs, sometimes one short or longer.
std::vector<float> values(FuzzedDataProvider& f, int64_t required) {
  int64_t n = std::max<int64_t>(required, 0);
  switch (f.ConsumeIntegralInRange<int>(0, 7)) {
    case 0:
      n = n - 1;
      break;
    case 1:
      n = n + f.ConsumeIntegralInRange<int64_t>(1, 16);
      break;
    case 2:
      n = f.ConsumeIntegralInRange<int64_t>(0, 64);
      break;
    default:
      break;
  }
  n = std::clamp<int64_t>(n, 0, static_cast<int64_t>(kMaxSpan));
  std::vector<float> v(static_cast<std::size_t>(n));
  const float fill = value(f);
  for (float& x : v) x = f.remaining_bytes() > 0 && f.ConsumeBool() ? value(f) : fill;
  return v;
}

int64_t required(const TensorLayout& t) {
  // Bounded inputs keep this exact; a negative stride or offset may make it negative (refused later).
  return t.required_elements();
}

[[noreturn]] void violated(const char* what) {
  std::fprintf(stderr, "fuzz_reference_args: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  FuzzedDataProvider f(data, size);
  const int64_t batch = small(f), heads = small(f), seq_q = small(f), seq_k = small(f), dim = small(f);
  const int64_t kv_heads = f.ConsumeBool() ? heads : small(f);
  const int64_t dim_v = f.ConsumeBool() ? dim : small(f);

  vkattn::reference::Inputs in;
  in.q_layout = layout(f, batch, heads, seq_q, dim);
  in.k_layout = layout(f, batch, kv_heads, seq_k, dim);
  in.v_layout = layout(f, batch, kv_heads, seq_k, dim_v);
  const std::vector<float> q = values(f, required(in.q_layout));
  const std::vector<float> k = values(f, required(in.k_layout));
  const std::vector<float> v = values(f, required(in.v_layout));
  in.q = q;
  in.k = k;
  in.v = v;

  std::vector<float> mask;
  if (f.ConsumeBool()) {
    const auto type = static_cast<vkattn::MaskType>(f.ConsumeIntegralInRange<int>(0, 2));
    const int64_t mb = f.ConsumeBool() ? 1 : small(f), mh = f.ConsumeBool() ? 1 : small(f);
    vkattn::MaskLayout m = vkattn::MaskLayout::dense(type, mb, mh, f.ConsumeIntegralInRange<int>(0, 7) ? seq_q : small(f),
                                                     f.ConsumeIntegralInRange<int>(0, 7) ? seq_k : small(f));
    if (f.ConsumeIntegralInRange<int>(0, 3) == 0) {
      m.stride_batch = stride(f);
      m.stride_head = stride(f);
      m.stride_q = stride(f);
    }
    if (f.ConsumeIntegralInRange<int>(0, 3) == 0) m.offset = f.ConsumeIntegralInRange<int64_t>(-1, 64);
    in.mask_layout = m;
    mask = values(f, m.required_elements());
    in.mask = mask;
  }

  std::vector<int32_t> kv_lengths;
  if (f.ConsumeBool()) {
    const int64_t count = f.ConsumeIntegralInRange<int>(0, 3) ? batch : f.ConsumeIntegralInRange<int64_t>(0, 12);
    for (int64_t b = 0; b < count; ++b)
      kv_lengths.push_back(f.ConsumeIntegralInRange<int>(0, 3) ? f.ConsumeIntegralInRange<int32_t>(0, static_cast<int32_t>(std::max<int64_t>(seq_k, 0)))
                                                               : f.ConsumeIntegral<int32_t>());
    in.kv_lengths = kv_lengths;
  }

  std::vector<int64_t> rows;
  if (f.ConsumeIntegralInRange<int>(0, 3) == 0) {
    const int count = f.ConsumeIntegralInRange<int>(0, 6);
    for (int r = 0; r < count; ++r)
      rows.push_back(f.ConsumeIntegralInRange<int>(0, 7) ? f.ConsumeIntegralInRange<int64_t>(0, std::max<int64_t>(seq_q, 0)) : f.ConsumeIntegral<int64_t>());
  }

  in.options.causal = static_cast<vkattn::Causal>(f.ConsumeIntegralInRange<int>(0, 2));
  if (f.ConsumeBool()) in.options.scale = value(f);
  in.weights = f.ConsumeBool();

  try {
    const vkattn::reference::Outputs o = vkattn::reference::attention(in, rows);
    const std::size_t out_count = static_cast<std::size_t>(o.batch * o.heads * o.seq_q * o.dim_v);
    const std::size_t row_count = static_cast<std::size_t>(o.batch * o.heads * o.seq_q);
    if (o.out.size() != out_count || o.lse.size() != row_count) violated("outputs of the wrong size");
    if (in.weights && o.weights.size() != row_count * static_cast<std::size_t>(o.seq_k)) violated("weights of the wrong size");
    // A fully masked row is exactly 0 with LSE -inf, never NaN.
    for (std::size_t r = 0; r < row_count; ++r) {
      if (o.lse[r] == -std::numeric_limits<double>::infinity()) {
        for (int64_t d = 0; d < o.dim_v; ++d)
          if (o.out[r * static_cast<std::size_t>(o.dim_v) + static_cast<std::size_t>(d)] != 0.0) violated("a fully masked row that is not 0");
      }
    }
  } catch (const vkattn::Error& e) {
    const std::string message = e.what();
    if (message.empty() || message.find('\n') != std::string::npos) violated("an error message that is not one line");
  }
  return 0;
}
