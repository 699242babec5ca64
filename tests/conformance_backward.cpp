// The backward pass against the fp64 reference on --kernel= (its portable or subgroup form) and
// --path=: the catalog's "backward" section (conform/catalog_backward.cpp), which `vkattn conform`
// runs too. Dense and packed calls over odd sizes, every mask kind, both causal alignments, key
// lengths, GQA and MQA, head dims up to 576 ("wide-backward"), every score modifier, dropout, every dtype, and walks
// longer than lavapipe's split budget; each case's gradients poisoned and guarded, two runs bitwise
// equal.
#include <doctest/doctest.h>

#include "attention_case.hpp"
#include "support.hpp"

using namespace vkattn::test;

TEST_SUITE("conformance-backward") {
  TEST_CASE("the backward section of the conformance catalog") { run_section(context(), "backward"); }
  TEST_CASE("the backward at head dims past 256") { run_section(context(), "wide-backward"); }
}
