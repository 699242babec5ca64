// The multi-head attention layer (vkattn::MultiHeadAttention): self- and cross-attention with
// kdim != vdim != embed, GQA, both causal alignments, key padding with a fully padded batch element,
// an additive attn_mask, bias off, every dtype, the weights per head and averaged, a decode-shaped
// call, a batch beyond one grid dimension, and every score modifier, alone and together. Case numbers 7000-7109 (the seeds of the cases that were in tests/conformance_mha.cpp are
// unchanged).
#include "conform/catalog_sections.hpp"

namespace vkattn::conform::detail {

namespace {

// Adds layer cases to a section: each seeded by its case number, and in --quick unless said otherwise.
class LayerCases {
 public:
  LayerCases(CaseSection& section, uint64_t base_seed) : s_(section), base_seed_(base_seed) {}
  void operator()(LayerCase c, uint64_t case_number, bool quick = true) {
    c.seed = case_seed(base_seed_, case_number);
    if (quick) s_.quick.push_back(s_.layer_cases.size());
    s_.layer_cases.push_back(c);
  }

 private:
  CaseSection& s_;
  uint64_t base_seed_;
};

// Cases 7000-7020: every dtype, cross-attention with odd sizes, GQA.
void add_shape_cases(LayerCases& add) {
  uint64_t n = 7000;
  for (const DType dtype : {DType::f32, DType::f16, DType::bf16}) {
    LayerCase c;
    c.dtype = dtype;
    add(c, n++);
  }
  {
    LayerCase c;  // cross-attention, kdim != vdim != E, odd sizes
    c.embed = 24, c.heads = 3, c.kdim = 10, c.vdim = 7;
    c.self_attention = false;
    c.batch = 3, c.seq_q = 5, c.seq_k = 13;
    add(c, 7010);
  }
  {
    LayerCase c;  // 8 heads over 2 KV heads
    c.dtype = DType::f16;
    c.embed = 64, c.heads = 8, c.kv_heads = 2, c.kdim = 40, c.vdim = 40;
    c.self_attention = false;
    c.seq_q = 9, c.seq_k = 33;
    add(c, 7020);
  }
}

// Cases 7030-7051: both causal alignments, key padding, the attn_mask, bias off, the weights.
void add_mask_cases(LayerCases& add) {
  uint64_t n = 7030;
  for (const Causal causal : {Causal::top_left, Causal::bottom_right}) {
    LayerCase c;  // seq_q != seq_k, where the alignments differ
    c.causal = causal;
    c.self_attention = false;
    c.seq_q = 6, c.seq_k = 11;
    add(c, n++);
  }
  {
    LayerCase c;
    c.padding = true;
    c.attn_mask = true;
    c.bias = false;
    c.seq_q = c.seq_k = 17;
    add(c, 7040);
    c.attn_mask = false;
    c.bias = true;
    add(c, 7041);
  }
  n = 7050;
  for (const bool average : {false, true}) {
    LayerCase c;  // the weights, masked and causal
    c.need_weights = true;
    c.average = average;
    c.padding = true;
    c.causal = Causal::bottom_right;
    c.self_attention = false;
    c.seq_q = 5, c.seq_k = 19;
    add(c, n++);
  }
}

// Cases 7060-7090: a wider layer, a batch beyond one grid dimension, decode, an odd head dim.
void add_size_cases(LayerCases& add) {
  {
    LayerCase c;  // a wider layer: 4 heads of 64
    c.embed = 256;
    c.seq_q = c.seq_k = 70;
    c.batch = 1;
    add(c, 7060);
  }
  {
    // A batch beyond maxComputeWorkGroupCount (66,000): the projections split across dispatches.
    // That split does not depend on the attention path, and the unfused path's own grid split is in
    // long-grid: the fused path is enough for this slow case (30 s on lavapipe), and not in --quick.
    LayerCase c;
    c.embed = 8, c.heads = 2;
    c.batch = 66000;
    c.seq_q = c.seq_k = 2;
    c.fused_only = true;
    add(c, 7070, false);
  }
  {
    LayerCase c;  // decode: one query over 300 keys, bf16, GQA 3:1, causal and padding together
    c.dtype = DType::bf16;
    c.embed = 48, c.heads = 6, c.kv_heads = 2, c.kdim = 20, c.vdim = 36;
    c.self_attention = false;
    c.causal = Causal::bottom_right;
    c.padding = true;
    c.seq_q = 1, c.seq_k = 300;
    add(c, 7080);
  }
  {
    LayerCase c;  // odd head dim (40 / 5 = 8), causal with an attn_mask, averaged weights, f16
    c.dtype = DType::f16;
    c.embed = 40, c.heads = 5;
    c.causal = Causal::top_left;
    c.attn_mask = true;
    c.need_weights = true;
    c.seq_q = c.seq_k = 33;
    c.batch = 1;
    add(c, 7090);
  }
}

// The score modifiers (docs/semantics.md, "Score modifiers"): those that are options as the call's options, the
// per-head tensors as weights of the layer; cases 7100-7109 (--quick: 7102, every one at once).
void add_modifier_cases(LayerCases& add) {
  {
    LayerCase c;  // Mistral's window (left side, causal) with gpt-oss's sinks; padding hides batch 1
    c.causal = Causal::top_left;
    c.modifiers.options.window = Window{5, -1};
    c.modifiers.sinks = true;
    c.padding = true;
    c.seq_q = c.seq_k = 20;
    add(c, 7100, false);
  }
  {
    LayerCase c;  // every modifier but the sinks, the window two-sided and aligned top-left; cross-attention, f16
    c.dtype = DType::f16;
    c.self_attention = false;
    c.seq_q = 6, c.seq_k = 19;
    c.modifiers = every_modifier(Window{3, 2}, 1.0f, 1);
    c.modifiers.options.align = Align::top_left;
    c.modifiers.sinks = false;
    add(c, 7101, false);
  }
  {
    LayerCase c;  // every modifier with an attn_mask, GQA 4:1, bf16
    c.dtype = DType::bf16;
    c.embed = 64, c.heads = 8, c.kv_heads = 2;
    c.self_attention = false;
    c.seq_q = 9, c.seq_k = 33;
    c.modifiers = every_modifier(Window{8, 2}, 2.0f, 1);
    c.attn_mask = true;
    add(c, 7102);
  }
  uint64_t n = 7103;
  for (const bool average : {false, true}) {
    LayerCase c;  // the weights exclude the sink; the window's and causal's hidden keys weigh 0
    c.need_weights = true;
    c.average = average;
    c.causal = Causal::bottom_right;
    c.modifiers = every_modifier(Window{3, -1}, 1.5f, 1);
    c.seq_q = c.seq_k = 13;
    add(c, n++, false);
  }
  {
    LayerCase c;  // decode over 300 keys with a window and sinks (the fused path splits the keys)
    c.dtype = DType::f16;
    c.embed = 48, c.heads = 6, c.kv_heads = 2;
    c.self_attention = false;
    c.causal = Causal::bottom_right;
    c.modifiers.options.window = Window{64, -1};
    c.modifiers.sinks = true;
    c.modifiers.alibi_batch = 1;
    c.seq_q = 1, c.seq_k = 300;
    add(c, 7105, false);
  }
}

}  // namespace

void add_layer_section(std::vector<CaseSection>& out, uint64_t base_seed) {
  CaseSection s;
  s.name = "layer";
  s.suite = "conformance-mha";
  s.title = "the multi-head attention layer: projections, head split and merge, output projection";
  LayerCases add(s, base_seed);
  add_shape_cases(add);
  add_mask_cases(add);
  add_size_cases(add);
  add_modifier_cases(add);
  out.push_back(std::move(s));
}

}  // namespace vkattn::conform::detail
