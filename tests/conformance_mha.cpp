// The GPU multi-head attention layer (vkattn::MultiHeadAttention) against its fp64 reference, on
// the path of --path=: the catalog's "layer" section (conform/catalog_layer.cpp), which `vkattn
// conform` runs too. Self- and cross-attention (kdim != vdim != E), GQA, both causal alignments, key
// padding (a fully padded batch element included), an additive attn_mask, bias off, every dtype, the
// weights per head and averaged, decode, a batch beyond one grid dimension, and the score modifiers
// (window, align, softcap, sinks and ALiBi slopes).
#include <doctest/doctest.h>

#include "attention_case.hpp"
#include "support.hpp"

using namespace vkattn::test;

TEST_SUITE("conformance-mha") {
  TEST_CASE("the layer section of the conformance catalog") { run_layer_cases(context(), catalog_layer_cases()); }
}
