// Conformance cases for the score modifiers (docs/semantics.md, "Score modifiers"): sliding windows, ALiBi,
// softcap and attention sinks, alone and combined with each other and with causal masking in both
// alignments, key lengths, boolean and float masks, GQA, split-KV and every dtype. Hidden K/V rows
// (outside every row's window, past the key lengths) hold NaN and Inf wherever a case poisons them.
// Windows and softcaps are specialization constants: the cases reuse a few values so that each
// kernel compiles a few pipelines, not one per case.
#include "conform/catalog_sections.hpp"

namespace vkattn::conform::detail {
namespace {

const DType kDTypes[] = {DType::f32, DType::f16, DType::bf16};

struct Builder {
  uint64_t base_seed;
  uint64_t number = 7000;  // case numbers of this file: 7000..
  AttentionCase base(DType dtype, int64_t seq_q, int64_t seq_k, int64_t dim) {
    AttentionCase c;
    c.dtype = dtype;
    c.seq_q = seq_q;
    c.seq_k = seq_k;
    c.dim_qk = c.dim_v = dim;
    c.seed = case_seed(base_seed, number++);
    return c;
  }
};

CaseSection section(const char* name, const char* title) {
  CaseSection s;
  s.name = name;
  s.title = title;
  s.suite = "conformance-modifiers";
  return s;
}

CaseSection windows(Builder& b) {
  CaseSection s = section("modifiers-window", "sliding windows: alone, with causal in both alignments, key lengths, GQA");
  for (const DType dtype : kDTypes) {
    // Two-sided, bottom-right (the default alignment), seq_q < seq_k, GQA.
    AttentionCase c = b.base(dtype, 37, 53, 40);
    c.heads = 4;
    c.kv_heads = 2;
    c.modifiers.options.window = Window{7, 3};
    c.poison_hidden_kv = true;
    s.cases.push_back(c);
    // Top-left with seq_q > seq_k: the last rows' windows lie past every key (O = 0, LSE -inf).
    c = b.base(dtype, 53, 37, 40);
    c.modifiers.options.window = Window{7, 3};
    c.modifiers.options.align = Align::top_left;
    c.poison_hidden_kv = true;
    s.cases.push_back(c);
    // Mistral's: left side and causal (right 0), bottom-right, seq_q < seq_k, key lengths.
    c = b.base(dtype, 20, 70, 64);
    c.batch = 2;
    c.modifiers.options.window = Window{16, -1};
    c.causal = Causal::bottom_right;
    c.kv_lengths = {70, 33};
    c.poison_hidden_kv = true;
    s.cases.push_back(c);
    // The same window with causal top-left and seq_q > seq_k.
    c = b.base(dtype, 70, 40, 64);
    c.modifiers.options.window = Window{16, -1};
    c.causal = Causal::top_left;
    c.heads = 3;
    c.kv_heads = 1;
    c.layout = LayoutKind::bshd;
    c.poison_hidden_kv = true;
    s.cases.push_back(c);
    // Right side only, with a boolean mask.
    c = b.base(dtype, 33, 65, 24);
    c.modifiers.options.window = Window{-1, 5};
    c.mask = MaskKind::boolean;
    c.poison_hidden_kv = true;
    s.cases.push_back(c);
  }
  // Longer keys: many key tiles outside every window (skipped) and a band split across workgroups.
  AttentionCase c = b.base(DType::f16, 300, 2500, 64);
  c.heads = 2;
  c.modifiers.options.window = Window{16, -1};
  c.causal = Causal::bottom_right;
  c.poison_hidden_kv = true;
  s.cases.push_back(c);
  c = b.base(DType::f32, 4, 3000, 64);  // decode against a long cache, window 7 + 3
  c.heads = 8;
  c.kv_heads = 2;
  c.modifiers.options.window = Window{7, 3};
  c.poison_hidden_kv = true;
  s.cases.push_back(c);
  s.quick = {0, 12};  // two-sided GQA f32; left + causal with key lengths, bf16
  return s;
}

CaseSection alibi(Builder& b) {
  CaseSection s = section("modifiers-alibi", "ALiBi slopes (H) and (B, H), with causal, masks and the softcap");
  for (const DType dtype : kDTypes) {
    AttentionCase c = b.base(dtype, 19, 45, 48);  // bottom-right (the default), GQA
    c.heads = 6;
    c.kv_heads = 2;
    c.modifiers.alibi_batch = 1;
    s.cases.push_back(c);
    c = b.base(dtype, 33, 33, 64);  // per batch, causal top-left
    c.batch = 2;
    c.heads = 3;
    c.kv_heads = 3;
    c.modifiers.alibi_batch = 2;
    c.causal = Causal::top_left;
    c.poison_hidden_kv = true;
    s.cases.push_back(c);
    c = b.base(dtype, 30, 17, 32);  // top-left, seq_q > seq_k, + softcap + float mask
    c.heads = 2;
    c.modifiers.alibi_batch = 1;
    c.modifiers.options.align = Align::top_left;
    c.modifiers.options.softcap = 5.0f;
    c.mask = MaskKind::f32;
    c.mask_heads = 2;
    s.cases.push_back(c);
  }
  s.quick = {8};  // top-left, softcap and a float mask, bf16
  return s;
}

CaseSection softcaps(Builder& b) {
  CaseSection s = section("modifiers-softcap", "logit softcap: plain, on scores beyond the f32 range, NaN rows");
  for (const DType dtype : kDTypes) {
    AttentionCase c = b.base(dtype, 29, 41, 64);
    c.modifiers.options.softcap = 5.0f;
    c.qk_range = 3.0f;
    s.cases.push_back(c);
    c = b.base(dtype, 17, 23, 64);  // scores far beyond the cap (bf16, f32: beyond the f32 range too)
    c.modifiers.options.softcap = 5.0f;
    c.qk_range = dtype == DType::f16 ? 200.0f : 1e20f;  // f16 holds no value whose products overflow f32
    c.mask = MaskKind::boolean;
    c.mask_blank_rows = {3};
    s.cases.push_back(c);
    c = b.base(dtype, 21, 30, 40);  // NaN in a query row stays in it
    c.modifiers.options.softcap = 5.0f;
    c.nan_q_rows = {2, 11};
    c.causal = Causal::bottom_right;
    s.cases.push_back(c);
  }
  s.quick = {4};  // scores far beyond the cap, a bool mask, f16
  return s;
}

CaseSection sinks(Builder& b) {
  CaseSection s = section("modifiers-sinks", "attention sinks: fully masked rows (O = 0, LSE = the sink), split-KV, GQA");
  for (const DType dtype : kDTypes) {
    AttentionCase c = b.base(dtype, 9, 4, 64);  // bottom-right, seq_q > seq_k: rows 0..4 see no key
    c.causal = Causal::bottom_right;
    c.heads = 2;
    c.modifiers.sinks = true;
    s.cases.push_back(c);
    c = b.base(dtype, 17, 33, 21);  // key lengths 0 and 7, GQA
    c.batch = 2;
    c.heads = 4;
    c.kv_heads = 2;
    c.kv_lengths = {0, 7};
    c.modifiers.sinks = true;
    c.poison_hidden_kv = true;
    s.cases.push_back(c);
    c = b.base(dtype, 1, 3000, 64);  // decode, split-KV: the sink joins once, in the combine
    c.heads = 8;
    c.kv_heads = 2;
    c.modifiers.sinks = true;
    c.offset = 3;
    s.cases.push_back(c);
    c = b.base(dtype, 40, 40, 32);  // blank boolean mask rows
    c.mask = MaskKind::boolean;
    c.mask_blank_rows = {0, 39};
    c.modifiers.sinks = true;
    s.cases.push_back(c);
  }
  s.quick = {0, 10};  // fully masked rows f32; decode split-KV (the combine's sink) f16
  return s;
}

CaseSection combined(Builder& b) {
  CaseSection s = section("modifiers-combined", "every modifier at once, with masks, key lengths and GQA");
  for (const DType dtype : kDTypes) {
    AttentionCase c = b.base(dtype, 31, 57, 64);
    c.batch = 2;
    c.heads = 4;
    c.kv_heads = 2;
    c.modifiers.options.window = Window{16, -1};
    c.causal = Causal::bottom_right;
    c.modifiers.alibi_batch = 2;
    c.modifiers.options.softcap = 5.0f;
    c.modifiers.sinks = true;
    c.mask = MaskKind::f16;
    c.kv_lengths = {57, 20};
    c.poison_hidden_kv = true;
    c.offset = 5;
    s.cases.push_back(c);
    c = b.base(dtype, 2, 700, 64);  // decode-like, window on both sides, split-KV
    c.heads = 8;
    c.kv_heads = 2;
    c.modifiers.options.window = Window{7, 3};
    c.modifiers.options.align = Align::top_left;
    c.modifiers.alibi_batch = 1;
    c.modifiers.options.softcap = 5.0f;
    c.modifiers.sinks = true;
    c.poison_hidden_kv = true;
    s.cases.push_back(c);
  }
  s.quick = {2};  // every modifier, prefill, f16
  return s;
}

// Long keys on lavapipe (its 65535-iteration loop limit): a sliding window over 70,000 keys (band
// splits: each workgroup's work is the window's), and sinks with an unbounded window over 70,000
// keys (split-KV by the loop limit: the sink joins once, in the combine). Suite "long".
CaseSection long_keys(Builder& b) {
  CaseSection s = section("modifiers-long", "modifiers over 70,000 keys: a window's band splits, sinks in the combine");
  s.suite = "long";
  AttentionCase c = b.base(DType::f16, 3, 70000, 64);
  c.heads = 8;
  c.kv_heads = 2;
  c.modifiers.options.window = Window{4096, 0};
  c.modifiers.sinks = true;
  c.modifiers.alibi_batch = 1;
  c.poison_hidden_kv = true;
  s.cases.push_back(c);
  c = b.base(DType::f32, 2, 70000, 64);
  c.heads = 4;
  c.kv_heads = 4;
  c.causal = Causal::bottom_right;
  c.modifiers.sinks = true;
  c.modifiers.options.softcap = 5.0f;
  s.cases.push_back(c);
  s.quick = {};  // the long suites run them; --quick stays quick
  return s;
}

}  // namespace

void add_modifier_sections(std::vector<CaseSection>& out, uint64_t base_seed) {
  Builder b{base_seed};
  out.push_back(windows(b));
  out.push_back(alibi(b));
  out.push_back(softcaps(b));
  out.push_back(sinks(b));
  out.push_back(combined(b));
  out.push_back(long_keys(b));
}

}  // namespace vkattn::conform::detail
