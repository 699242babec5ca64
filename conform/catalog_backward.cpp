// The backward pass (vkattn/attention_backward.hpp) against the fp64 reference: odd sizes down to one
// row and one key, every mask kind, both causal alignments with seq_q != seq_k (fully masked rows
// included), key lengths with 0, GQA 3:1 and MQA, dim_v != dim_qk, head dims up to 256, every score
// modifier alone and together, an explicit scale, dropout, f32/f16/bf16, packed batches with empty
// sequences, and two walks longer than lavapipe's split budget. Dtypes are spread over the cases
// rather than multiplied by them: each distinct (dtype, dims, modifiers) is a few new pipelines, seconds
// to JIT on lavapipe. Case numbers 14000-14099.
#include "conform/catalog_sections.hpp"

namespace vkattn::conform::detail {

namespace {

// Adds backward cases to a section: each seeded by its case number (its dropout seed too), in --quick
// when said so.
class BackwardCases {
 public:
  BackwardCases(CaseSection& section, uint64_t base_seed) : s_(section), base_seed_(base_seed) {}
  void operator()(BackwardCase c, uint64_t case_number, bool quick = false) {
    c.seed = case_seed(base_seed_, case_number);
    if (c.dropout > 0.0f) c.dropout_seed = case_seed(base_seed_, case_number + 50);
    if (quick) s_.quick.push_back(s_.backward_cases.size());
    s_.backward_cases.push_back(std::move(c));
  }

 private:
  CaseSection& s_;
  uint64_t base_seed_;
};

BackwardCase shape(DType dtype, int64_t batch, int64_t heads, int64_t kv_heads, int64_t seq_q, int64_t seq_k, int64_t dim_qk,
                   int64_t dim_v) {
  BackwardCase c;
  c.dtype = dtype;
  c.batch = batch, c.heads = heads, c.kv_heads = kv_heads;
  c.seq_q = seq_q, c.seq_k = seq_k, c.dim_qk = dim_qk, c.dim_v = dim_v;
  return c;
}

// Cases 14000-14009: sizes, head layouts and dims.
void add_shape_cases(BackwardCases& add) {
  add(shape(DType::f32, 1, 2, 2, 7, 9, 16, 16), 14000, true);
  add(shape(DType::f16, 2, 6, 2, 13, 21, 21, 8), 14001, true);  // GQA 3:1, odd dims, dim_v != dim_qk
  // MQA, one query row over one key: O is the key's V, so dP - D and with it dQ and dK are exactly 0
  // (dP must be summed in D's order and form: a partial-sum dP left a residue past the f32 floor)
  add(shape(DType::f32, 1, 4, 1, 1, 1, 16, 16), 14002);
  add(shape(DType::bf16, 1, 3, 1, 61, 33, 16, 16), 14003);      // MQA over 3 heads, more rows than keys
  {
    BackwardCase c = shape(DType::f16, 1, 2, 2, 33, 47, 128, 128);
    c.causal = Causal::top_left;
    add(c, 14004);
  }
  // The forward's largest head dim (not in --quick: its subgroup-form pipelines take about a minute to
  // JIT-compile on a fresh Mesa 22.3.6, several on 25.0.7; the decode-like d40/72 case is quick instead).
  add(shape(DType::f32, 1, 2, 1, 17, 19, 256, 256), 14005);
  {
    BackwardCase c = shape(DType::f32, 2, 2, 2, 9, 12, 16, 16);
    c.scale = 0.05f;
    add(c, 14006);
  }
}

// Cases 14010-14019: causal alignments, masks, key lengths.
void add_mask_cases(BackwardCases& add) {
  {
    BackwardCase c = shape(DType::f32, 1, 2, 2, 33, 61, 16, 16);
    c.causal = Causal::top_left;
    add(c, 14010);
  }
  {
    BackwardCase c = shape(DType::f32, 1, 2, 2, 61, 33, 16, 16);  // rows past the keys fully masked
    c.causal = Causal::bottom_right;
    add(c, 14011, true);
  }
  {
    BackwardCase c = shape(DType::f16, 1, 4, 1, 5, 70, 40, 72);  // decode-like, MQA, dim_v > dim_qk
    c.causal = Causal::bottom_right;
    add(c, 14012, true);
  }
  {
    BackwardCase c = shape(DType::bf16, 3, 2, 2, 11, 65, 16, 16);  // a batch element with no keys
    c.mask = MaskKind::boolean;
    c.kv_lengths = {65, 0, 17};
    add(c, 14013, true);
  }
  {
    BackwardCase c = shape(DType::f32, 2, 2, 2, 9, 30, 16, 16);
    c.mask = MaskKind::f32;
    add(c, 14014);
  }
  {
    BackwardCase c = shape(DType::f32, 2, 6, 2, 7, 33, 16, 16);  // causal and a mask and key lengths together
    c.causal = Causal::top_left;
    c.mask = MaskKind::f32;
    c.kv_lengths = {1, 33};
    add(c, 14015);
  }
}

// Cases 14020-14029: the score modifiers alone and together, and dropout.
void add_modifier_cases(BackwardCases& add) {
  {
    BackwardCase c = shape(DType::f32, 1, 2, 2, 40, 40, 16, 16);
    c.modifiers.options.window = Window{5, 3};
    c.modifiers.alibi_batch = 1;
    add(c, 14020);
  }
  {
    BackwardCase c = shape(DType::f32, 1, 3, 1, 19, 33, 16, 16);
    c.modifiers.options.softcap = 2.5f;
    c.modifiers.sinks = true;
    add(c, 14021, true);
  }
  {
    BackwardCase c = shape(DType::bf16, 2, 6, 2, 13, 37, 16, 16);  // everything at once, (B, H) slopes
    c.modifiers = every_modifier(Window{8, 2}, 2.0f, 2);
    c.causal = Causal::bottom_right;
    c.mask = MaskKind::boolean;
    c.scale = 0.3f;
    add(c, 14022, true);
  }
  {
    BackwardCase c = shape(DType::f32, 1, 2, 2, 12, 5, 16, 16);  // fully masked rows with sinks
    c.causal = Causal::bottom_right;
    c.modifiers.sinks = true;
    add(c, 14023);
  }
  {
    BackwardCase c = shape(DType::f32, 2, 2, 2, 15, 37, 16, 16);
    c.causal = Causal::top_left;
    c.dropout = 0.3f;
    add(c, 14024, true);
  }
  {
    BackwardCase c = shape(DType::f16, 1, 4, 2, 21, 21, 16, 16);  // dropout with a window and key lengths
    c.dropout = 0.15f;
    c.modifiers.options.window = Window{4, -1};
    c.kv_lengths = {18};
    add(c, 14025);
  }
}

// Cases 14030-14039: packed batches.
void add_packed_cases(BackwardCases& add) {
  {
    BackwardCase c = shape(DType::f32, 0, 4, 2, 0, 0, 24, 24);
    c.packed_q = {5, 0, 9, 1}, c.packed_k = {7, 3, 0, 12};
    add(c, 14030, true);
  }
  {
    BackwardCase c = shape(DType::f16, 0, 2, 1, 0, 0, 16, 16);
    c.packed_q = {6, 11}, c.packed_k = {9, 11};
    c.causal = Causal::bottom_right;
    c.modifiers.options.window = Window{4, -1};
    c.modifiers.sinks = true;
    c.dropout = 0.2f;
    add(c, 14031);
  }
  {
    BackwardCase c = shape(DType::bf16, 0, 3, 3, 0, 0, 16, 8);
    c.packed_q = {1, 7, 33, 0}, c.packed_k = {61, 7, 0, 1};
    c.modifiers.options.softcap = 4.0f;
    c.modifiers.alibi_batch = 1;
    c.causal = Causal::top_left;
    add(c, 14032);
  }
}

// Cases 14040-14049: walks longer than lavapipe's split budget (kLavapipeWalkBudget): there the dQ
// kernel's keys and the dK/dV kernel's rows are split and their partials summed; a GPU profile's plan
// does not split them and is refused there. Tiny heads and dims keep them cheap.
void add_long_cases(BackwardCases& add) {
  {
    BackwardCase c = shape(DType::f32, 1, 2, 1, 24, 70000, 8, 8);
    c.fused_only = true;
    add(c, 14040);
  }
  {
    BackwardCase c = shape(DType::f32, 1, 1, 1, 70000, 40, 8, 8);
    c.causal = Causal::bottom_right;
    c.fused_only = true;
    add(c, 14041);
  }
}

}  // namespace

void add_backward_section(std::vector<CaseSection>& out, uint64_t base_seed) {
  CaseSection s;
  s.name = "backward";
  s.suite = "conformance-backward";
  s.title = "the backward pass: dQ, dK, dV and dsinks of dense and packed calls, every mask and modifier, dropout";
  BackwardCases add(s, base_seed);
  add_shape_cases(add);
  add_mask_cases(add);
  add_modifier_cases(add);
  add_packed_cases(add);
  add_long_cases(add);
  out.push_back(std::move(s));
}

}  // namespace vkattn::conform::detail
