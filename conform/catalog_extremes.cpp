// The extremes of the score modifiers' values, on every path: window sides at and past 2^31 and up to
// 2^63 - 1 (any side that reaches past every key is the same as -1), and sides just inside the call's
// reach (the kernels' window arithmetic at its widest); softcaps from the smallest normal f32 to
// FLT_MAX (a large cap is how users write "almost no cap": tanh(x) for tiny x must not cancel);
// ALiBi slopes up to +-FLT_MAX-sized (the bias saturates like every score term, never +inf -> NaN) and
// subnormal; sink logits of +-FLT_MAX. Dense calls (section "extremes"), paged caches, packed batches
// and the multi-head layer ("extremes-paged", "extremes-varlen", "extremes-layer").
// Distinct windows and softcaps are distinct pipelines: the cases reuse a few values.
#include <cstdint>
#include <limits>

#include "conform/catalog_sections.hpp"

namespace vkattn::conform::detail {
namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr float kFloatMax = std::numeric_limits<float>::max();
constexpr float kFloatMin = std::numeric_limits<float>::min();  // the smallest normal f32

CaseSection section(const char* name, const char* suite, const char* title) {
  CaseSection s;
  s.name = name;
  s.suite = suite;
  s.title = title;
  return s;
}

// The dense cases' starting points, numbered from 12000 in the order they are made (each case's seed
// is its number, so the order is the cases' identity).
class DenseCases {
 public:
  explicit DenseCases(uint64_t base_seed) : base_seed_(base_seed) {}
  AttentionCase operator()(DType dtype, int64_t seq_q, int64_t seq_k, int64_t dim) {
    AttentionCase c;
    c.dtype = dtype;
    c.seq_q = seq_q;
    c.seq_k = seq_k;
    c.dim_qk = c.dim_v = dim;
    c.seed = case_seed(base_seed_, number_++);
    return c;
  }

 private:
  uint64_t base_seed_;
  uint64_t number_ = 12000;
};

// Windows past 2^31 and up to 2^63 - 1, and sides just inside the call's reach (cases 0-5).
void add_window_extremes(DenseCases& base, std::vector<AttentionCase>& cases) {
  // Windows: both sides 2^63 - 1 (no key hidden), GQA.
  AttentionCase c = base(DType::f32, 37, 53, 40);
  c.heads = 4;
  c.kv_heads = 2;
  c.modifiers.options.window = Window{kInt64Max, kInt64Max};
  cases.push_back(c);
  // 0 : 2^31 - 1 (its right side once wrapped to negative in 32 bits: every row masked).
  c = base(DType::f16, 29, 45, 32);
  c.modifiers.options.window = Window{0, kInt32Max};
  c.poison_hidden_kv = true;
  cases.push_back(c);
  // 2^32 : 0 (once cut to 32 bits as 0 : 0), key lengths.
  c = base(DType::bf16, 21, 40, 24);
  c.batch = 2;
  c.modifiers.options.window = Window{int64_t(1) << 32, 0};
  c.kv_lengths = {40, 13};
  c.poison_hidden_kv = true;
  cases.push_back(c);
  // Sides just inside the call's reach (seq_q + seq_k - 1: bounded, yet wider than every key), top-left
  // with seq_q > seq_k (rows whose diagonal lies past every key) and causal bottom-right.
  c = base(DType::f32, 53, 37, 40);
  c.modifiers.options.window = Window{89, 89};
  c.modifiers.options.align = Align::top_left;
  c.poison_hidden_kv = true;
  cases.push_back(c);
  c = base(DType::f32, 37, 53, 40);
  c.modifiers.options.window = Window{89, -1};
  c.causal = Causal::bottom_right;
  c.poison_hidden_kv = true;
  cases.push_back(c);
  // Decode against a long cache with split keys, a side of 2^31 - 1 on each side.
  c = base(DType::f16, 2, 3000, 64);
  c.heads = 8;
  c.kv_heads = 2;
  c.modifiers.options.window = Window{kInt32Max, kInt32Max};
  c.modifiers.options.align = Align::top_left;
  cases.push_back(c);
}

// Softcaps from the smallest normal f32 to FLT_MAX (cases 6-9).
void add_softcap_extremes(DenseCases& base, std::vector<AttentionCase>& cases) {
  // Softcaps: 1e4 and 1e8 (once off by 2.4e-5 and 8e-2: 1 - e^-2|x| cancelled), FLT_MAX (scores of
  // f32 range through it), and the smallest normal cap (every score +-FLT_MIN: uniform rows).
  AttentionCase c = base(DType::f32, 29, 41, 64);
  c.modifiers.options.softcap = 1e4f;
  c.qk_range = 3.0f;
  cases.push_back(c);
  c = base(DType::f32, 17, 23, 64);
  c.modifiers.options.softcap = 1e8f;
  c.qk_range = 30.0f;
  c.causal = Causal::bottom_right;
  cases.push_back(c);
  c = base(DType::bf16, 17, 23, 64);
  c.modifiers.options.softcap = kFloatMax;
  c.qk_range = 1e20f;  // scores beyond the f32 range: saturated, then capped
  c.mask = MaskKind::boolean;
  c.mask_blank_rows = {3};
  cases.push_back(c);
  c = base(DType::f16, 21, 30, 40);
  c.modifiers.options.softcap = kFloatMin;
  c.modifiers.sinks = true;
  cases.push_back(c);
}

// ALiBi slopes of -2e38, FLT_MAX-sized and subnormal (cases 10-12).
void add_alibi_extremes(DenseCases& base, std::vector<AttentionCase>& cases) {
  // ALiBi: slopes of -2e38 (once -slope * |d| overflowed to +inf, and the row's softmax to NaN),
  // FLT_MAX-sized (bias -FLT_MAX: saturated scores), subnormal (bias about 0).
  AttentionCase c = base(DType::f32, 19, 45, 48);
  c.heads = 6;
  c.kv_heads = 2;
  c.modifiers.alibi_batch = 1;
  c.modifiers.alibi_scale = -2e38f;
  cases.push_back(c);
  c = base(DType::f16, 33, 33, 64);
  c.batch = 2;
  c.heads = 3;
  c.kv_heads = 3;
  c.modifiers.alibi_batch = 2;
  c.modifiers.alibi_scale = kFloatMax;
  c.causal = Causal::top_left;
  c.poison_hidden_kv = true;
  cases.push_back(c);
  c = base(DType::bf16, 30, 17, 32);
  c.heads = 2;
  c.modifiers.alibi_batch = 1;
  c.modifiers.alibi_scale = 1e-39f;
  c.modifiers.options.align = Align::top_left;
  c.mask = MaskKind::f32;
  cases.push_back(c);
}

// Sinks of +-FLT_MAX (cases 13-14), then every extreme at once (case 15).
void add_sink_extremes(DenseCases& base, std::vector<AttentionCase>& cases) {
  // Sinks of +FLT_MAX (the sink takes every row: O about 0, LSE = FLT_MAX) and -FLT_MAX (no share;
  // fully masked rows give LSE = -FLT_MAX), the latter in decode's combine.
  AttentionCase c = base(DType::f32, 9, 4, 64);
  c.causal = Causal::bottom_right;
  c.heads = 2;
  c.modifiers.sinks = true;
  c.modifiers.sink_value = kFloatMax;
  cases.push_back(c);
  c = base(DType::f16, 1, 3000, 64);
  c.heads = 8;
  c.kv_heads = 2;
  c.modifiers.sinks = true;
  c.modifiers.sink_value = -kFloatMax;
  cases.push_back(c);
  // Everything at once.
  c = base(DType::f32, 31, 57, 64);
  c.batch = 2;
  c.heads = 4;
  c.kv_heads = 2;
  c.modifiers.options.window = Window{kInt64Max, 0};
  c.causal = Causal::bottom_right;
  c.modifiers.alibi_batch = 2;
  c.modifiers.alibi_scale = -2e38f;
  c.modifiers.options.softcap = 1e8f;
  c.modifiers.sinks = true;
  c.mask = MaskKind::f16;
  c.kv_lengths = {57, 20};
  c.poison_hidden_kv = true;
  cases.push_back(c);
}

CaseSection dense(uint64_t base_seed) {
  CaseSection s = section("extremes", "conformance-extremes",
                          "extreme modifier values: windows past 2^31, huge and tiny softcaps, FLT_MAX ALiBi slopes and sinks");
  DenseCases base(base_seed);
  add_window_extremes(base, s.cases);
  add_softcap_extremes(base, s.cases);
  add_alibi_extremes(base, s.cases);
  add_sink_extremes(base, s.cases);
  s.quick = {1, 7, 10, 15};  // 0 : 2^31 - 1; softcap 1e8; ALiBi -2e38; all at once
  return s;
}

CaseSection paged(uint64_t base_seed) {
  CaseSection s = section("extremes-paged", "conformance-extremes", "paged KV cache under extreme modifier values");
  const auto add = [&](ServingCase c) {
    c.seed = case_seed(base_seed, 12100 + s.serving_cases.size());
    s.serving_cases.push_back(std::move(c));
  };
  add({.name = "window 2^63-1 : 2^31-1 with an append, softcap 1e30, ALiBi -2e38, sinks FLT_MAX", .dtype = DType::f32,
       .heads = 4, .kv_heads = 2, .causal = Causal::none,
       .modifiers = {.options = {.window = Window{kInt64Max, kInt32Max}, .softcap = 1e30f},
                     .alibi_batch = 3, .sinks = true, .alibi_scale = -2e38f, .sink_value = kFloatMax},
       .kv = PagedSource{.seq_q = 2, .page_size = 16, .cache_lens = {100, 0, 257}, .seq_new = 1}});
  add({.name = "window 2^32 : 0, decode, ALiBi FLT_MAX", .dtype = DType::f16, .heads = 8, .kv_heads = 2,
       .modifiers = {.options = {.window = Window{int64_t(1) << 32, 0}}, .alibi_batch = 1, .alibi_scale = kFloatMax},
       .kv = PagedSource{.cache_lens = {0, 1, 16, 37}}});
  s.quick = {0, 1};
  return s;
}

CaseSection varlen(uint64_t base_seed) {
  CaseSection s = section("extremes-varlen", "conformance-extremes", "packed variable-length batches under extreme modifier values");
  const auto add = [&](ServingCase c) {
    c.seed = case_seed(base_seed, 12200 + s.serving_cases.size());
    s.serving_cases.push_back(std::move(c));
  };
  add({.name = "window 2^31-1 : 2^31-1, softcap 1e30, ALiBi -2e38, sinks -FLT_MAX", .dtype = DType::f32, .heads = 4,
       .kv_heads = 2,
       .modifiers = {.options = {.window = Window{kInt32Max, kInt32Max}, .softcap = 1e30f},
                     .alibi_batch = 3, .sinks = true, .alibi_scale = -2e38f, .sink_value = -kFloatMax},
       .kv = PackedSource{.seq_q = {20, 1, 45}, .seq_k = {60, 0, 45}}});
  add({.name = "window 0 : 2^63-1 top-left, ALiBi FLT_MAX", .dtype = DType::bf16, .heads = 2, .kv_heads = 1,
       .causal = Causal::none,
       .modifiers = {.options = {.window = Window{0, kInt64Max}, .align = Align::top_left}, .alibi_batch = 1,
                     .alibi_scale = kFloatMax},
       .kv = PackedSource{.seq_q = {12, 30}, .seq_k = {50, 9}}});
  s.quick = {0, 1};
  return s;
}

CaseSection layer(uint64_t base_seed) {
  CaseSection s = section("extremes-layer", "conformance-extremes", "the multi-head layer under extreme modifier values");
  LayerCase c;
  c.seq_q = c.seq_k = 17;
  c.modifiers.options.window = Window{kInt64Max, kInt32Max};
  c.modifiers.options.softcap = 1e30f;
  c.modifiers.alibi_batch = 1;
  c.modifiers.alibi_scale = -2e38f;
  c.seed = case_seed(base_seed, 12300);
  s.layer_cases.push_back(c);
  c = LayerCase{};
  c.dtype = DType::f16;
  c.causal = Causal::bottom_right;
  c.self_attention = false;
  c.seq_q = 6, c.seq_k = 11;
  c.modifiers.options.window = Window{int64_t(1) << 32, 0};
  c.modifiers.sinks = true;
  c.modifiers.sink_value = kFloatMax;
  c.seed = case_seed(base_seed, 12301);
  s.layer_cases.push_back(c);
  s.quick = {0, 1};
  return s;
}

}  // namespace

void add_extreme_sections(std::vector<CaseSection>& out, uint64_t base_seed) {
  out.push_back(dense(base_seed));
  out.push_back(paged(base_seed));
  out.push_back(varlen(base_seed));
  out.push_back(layer(base_seed));
}

}  // namespace vkattn::conform::detail
