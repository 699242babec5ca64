// The score modifiers (docs/semantics.md, "Score modifiers") as the argument fuzzers draw them, and what an
// accepted call must then satisfy. Shared by fuzz_check_attention, fuzz_varlen_args and
// fuzz_paged_args, since the dense, packed and paged checks take the same AttentionOptions and
// ALiBi/sinks layouts and must accept and refuse them alike. The values are the edges where a check
// or the window arithmetic after it can go wrong: window sides -1 (unbounded), 0, just past 2^31 and
// 2^32 (int32 code), up to INT64_MAX (i + off + R overflows) and below -1; softcaps 0, negative,
// denormal, FLT_MIN, tiny, huge, FLT_MAX, NaN and infinities.
#pragma once

#include <fuzzer/FuzzedDataProvider.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>

#include "vkattn/problem.hpp"
#include "vkattn/types.hpp"

namespace vkattn::fuzz {

inline int64_t window_side(FuzzedDataProvider& f) {
  static constexpr int64_t kSides[] = {-1,
                                       0,
                                       1,
                                       -2,
                                       4096,
                                       std::numeric_limits<int32_t>::max(),
                                       int64_t{1} << 31,
                                       (int64_t{1} << 31) + 1,
                                       int64_t{1} << 32,
                                       int64_t{1} << 62,
                                       std::numeric_limits<int64_t>::max() - 1,
                                       std::numeric_limits<int64_t>::max(),
                                       std::numeric_limits<int64_t>::min(),
                                       std::numeric_limits<int64_t>::min() + 1};
  switch (f.ConsumeIntegralInRange<int>(0, 2)) {
    case 0:
      return f.ConsumeIntegralInRange<int64_t>(-2, 64);
    case 1:
      return f.PickValueInArray(kSides);
    default:
      return f.ConsumeIntegral<int64_t>();
  }
}

inline float softcap_value(FuzzedDataProvider& f) {
  static constexpr float kCaps[] = {0.0f,
                                    -0.0f,
                                    -1.0f,
                                    30.0f,
                                    1e-30f,
                                    1e30f,
                                    std::numeric_limits<float>::denorm_min(),
                                    std::numeric_limits<float>::min(),
                                    std::numeric_limits<float>::max(),
                                    -std::numeric_limits<float>::max(),
                                    std::numeric_limits<float>::quiet_NaN(),
                                    std::numeric_limits<float>::infinity(),
                                    -std::numeric_limits<float>::infinity()};
  return f.ConsumeBool() ? f.PickValueInArray(kCaps) : f.ConsumeFloatingPoint<float>();
}

// ALiBi slopes or sink logits: (heads) or (batch, heads) for `batch` (the call's, or its number of
// sequences), mostly agreeing, sometimes any size or offset from `any`.
template <typename Any>
HeadValuesLayout head_values(FuzzedDataProvider& f, int64_t batch, int64_t heads, Any any) {
  HeadValuesLayout v;
  v.batch = f.ConsumeBool() ? 1 : (f.ConsumeBool() ? batch : any(f));
  v.heads = f.ConsumeIntegralInRange<int>(0, 3) ? heads : any(f);
  v.offset = f.ConsumeBool() ? 0 : any(f);
  return v;
}

// Draws the window, alignment, softcap, ALiBi and sinks (each present or not); `batch` is what an
// ALiBi (batch, heads) must match.
template <typename Any>
void draw_modifiers(FuzzedDataProvider& f, AttentionOptions& options, std::optional<HeadValuesLayout>& alibi,
                    std::optional<HeadValuesLayout>& sinks, int64_t batch, int64_t heads, Any any) {
  if (f.ConsumeBool()) options.window = Window{window_side(f), window_side(f)};
  if (f.ConsumeBool()) options.align = static_cast<Align>(f.ConsumeIntegralInRange<int>(0, 7) ? f.ConsumeIntegralInRange<int>(0, 1)
                                                                                              : f.ConsumeIntegral<int8_t>());
  if (f.ConsumeBool()) options.softcap = softcap_value(f);
  if (f.ConsumeBool()) alibi = head_values(f, batch, heads, any);
  if (f.ConsumeBool()) sinks = head_values(f, batch, heads, any);
}

// What an accepted call's modifiers must be (nullptr when they are): `p` the resolved problem,
// `batch` the ALiBi batch the call allows.
inline const char* modifiers_violation(const AttentionOptions& options, const std::optional<HeadValuesLayout>& alibi,
                                       const std::optional<HeadValuesLayout>& sinks, const AttentionProblem& p,
                                       int64_t batch) {
  if (options.window && (options.window->left < -1 || options.window->right < -1)) return "a window side below -1";
  if (p.window_left < -1 || p.window_right < -1) return "a resolved window side below -1";
  if (options.softcap && !(std::isfinite(*options.softcap) && *options.softcap > 0.0f))
    return "a softcap that is not finite and positive";
  if (options.softcap && *options.softcap < std::numeric_limits<float>::min()) return "a subnormal softcap";
  if (p.align != Align::top_left && p.align != Align::bottom_right) return "an invalid alignment";
  if (p.causal != Causal::none && options.align && (*options.align == Align::top_left) != (p.causal == Causal::top_left))
    return "an alignment that disagrees with causal";
  if (p.causal != Causal::none && p.window_right != 0) return "causal without a right side of 0";
  if (alibi && (alibi->heads != p.heads || alibi->offset < 0 || (alibi->batch != 1 && alibi->batch != batch)))
    return "an ALiBi layout that does not fit";
  if (sinks && (sinks->heads != p.heads || sinks->offset < 0 || sinks->batch != 1)) return "a sinks layout that does not fit";
  // The band of the first and last query rows: what every kernel and the reference compute from the
  // accepted sides (i + off - L, i + off + R + 1), so with sides up to INT64_MAX this arithmetic must
  // not overflow (UBSan) and must stay within [0, seq_k].
  for (const int64_t i : {int64_t{0}, p.seq_q - 1}) {
    const int64_t begin = p.visible_key_begin(i), end = p.visible_key_end(i);
    if (begin < 0 || begin > p.seq_k || end < 0 || end > p.seq_k) return "a visible key range outside [0, seq_k]";
  }
  return nullptr;
}

}  // namespace vkattn::fuzz
