// Head dims past 256, up to 576 for Q and K and 512 for V: Gemma's 512, DeepSeek's MLA 576/512 and its
// prefill 192/128, a 320/288 pair either way round, on every path (the fused kernels and the
// three-stage path). Forward cases (section "wide": masks, causal alignments, key lengths, GQA and MQA,
// every modifier, every dtype, keys past lavapipe's loop limit) and backward cases ("wide-backward":
// dense and packed, sinks, dropout; the backward runs in three stages at these dims). The paged and
// packed forms are the serving sections' wide cases (catalog_serving.cpp). Case numbers 15000-15099.
#include "conform/catalog_sections.hpp"

namespace vkattn::conform::detail {
namespace {

AttentionCase wide(DType dtype, int64_t heads, int64_t kv_heads, int64_t seq_q, int64_t seq_k, int64_t dim_qk, int64_t dim_v) {
  AttentionCase c;
  c.dtype = dtype;
  c.heads = heads, c.kv_heads = kv_heads;
  c.seq_q = seq_q, c.seq_k = seq_k, c.dim_qk = dim_qk, c.dim_v = dim_v;
  return c;
}

BackwardCase wide_backward(DType dtype, int64_t heads, int64_t kv_heads, int64_t seq_q, int64_t seq_k, int64_t dim_qk,
                           int64_t dim_v) {
  BackwardCase c;
  c.dtype = dtype;
  c.heads = heads, c.kv_heads = kv_heads;
  c.seq_q = seq_q, c.seq_k = seq_k, c.dim_qk = dim_qk, c.dim_v = dim_v;
  return c;
}

CaseSection forward_section(uint64_t base_seed) {
  CaseSection s;
  s.name = "wide";
  s.suite = "conformance";
  s.title = "head dims past 256 (512, 576/512, 320/288, 192/128), on every path";
  std::vector<AttentionCase>& cases = s.cases;
  {
    AttentionCase c = wide(DType::f32, 2, 2, 9, 37, 512, 512);  // Gemma's global layers
    c.causal = Causal::bottom_right;
    cases.push_back(c);
  }
  {
    AttentionCase c = wide(DType::f16, 8, 1, 3, 70, 576, 512);  // MLA's decode shape: MQA, 576/512, sinks
    c.causal = Causal::bottom_right;
    c.modifiers.sinks = true;
    cases.push_back(c);
  }
  {
    AttentionCase c = wide(DType::bf16, 4, 2, 13, 29, 320, 288);  // GQA, a bool mask with a fully masked row
    c.mask = MaskKind::boolean;
    c.mask_blank_rows = {4};
    cases.push_back(c);
  }
  {
    AttentionCase c = wide(DType::f32, 2, 1, 21, 21, 192, 128);  // MLA's prefill dims, every modifier
    c.causal = Causal::top_left;
    c.modifiers = every_modifier(Window{6, 0}, 3.0f, 1);
    cases.push_back(c);
  }
  {
    AttentionCase c = wide(DType::f16, 2, 2, 7, 45, 288, 320);  // dim_v > dim_qk, key lengths, a float mask
    c.batch = 2;
    c.kv_lengths = {45, 11};
    c.mask = MaskKind::f32;
    cases.push_back(c);
  }
  {
    AttentionCase c = wide(DType::f32, 1, 1, 1, 1, 576, 512);  // one row over one key
    cases.push_back(c);
  }
  {
    AttentionCase c = wide(DType::f16, 4, 1, 1, 70000, 576, 512);  // MLA decode past lavapipe's loop limit
    c.causal = Causal::bottom_right;
    cases.push_back(c);
  }
  {
    AttentionCase c = wide(DType::bf16, 2, 2, 20, 17000, 320, 288);  // prefill rows over many keys, LSE
    c.causal = Causal::bottom_right;
    cases.push_back(c);
  }
  for (std::size_t i = 0; i < cases.size(); ++i) cases[i].seed = case_seed(base_seed, 15000 + i);
  s.quick = {0, 1, 3};
  return s;
}

CaseSection backward_section(uint64_t base_seed) {
  CaseSection s;
  s.name = "wide-backward";
  s.suite = "conformance-backward";
  s.title = "the backward pass at head dims past 256: the three-stage form (on every path), dense and packed";
  std::vector<BackwardCase>& cases = s.backward_cases;
  {
    BackwardCase c = wide_backward(DType::f32, 2, 1, 11, 19, 512, 512);
    c.causal = Causal::bottom_right;
    c.modifiers.sinks = true;
    cases.push_back(c);
  }
  {
    BackwardCase c = wide_backward(DType::f16, 4, 1, 5, 33, 576, 512);  // MQA, dropout
    c.dropout = 0.2f;
    cases.push_back(c);
  }
  {
    BackwardCase c = wide_backward(DType::bf16, 4, 2, 0, 0, 320, 288);  // packed, with an empty sequence
    c.packed_q = {5, 0, 9}, c.packed_k = {7, 3, 12};
    c.modifiers.options.softcap = 3.0f;
    cases.push_back(c);
  }
  {
    BackwardCase c = wide_backward(DType::f32, 2, 1, 17, 17, 192, 128);
    c.causal = Causal::top_left;
    c.mask = MaskKind::f32;
    c.modifiers.alibi_batch = 1;
    cases.push_back(c);
  }
  for (std::size_t i = 0; i < cases.size(); ++i) {
    cases[i].seed = case_seed(base_seed, 15050 + i);
    if (cases[i].dropout > 0.0f) cases[i].dropout_seed = case_seed(base_seed, 15090 + i);
  }
  s.quick = {0, 2};
  return s;
}

}  // namespace

void add_wide_sections(std::vector<CaseSection>& out, uint64_t base_seed) {
  out.push_back(forward_section(base_seed));
  out.push_back(backward_section(base_seed));
}

}  // namespace vkattn::conform::detail
