// Targeted conformance cases for the promises of the contract (docs/semantics.md) that a random sweep rarely hits, from
// the shared catalog (conform/catalog_targeted.cpp), which `vkattn conform` runs too.
#include <doctest/doctest.h>

#include "attention_case.hpp"
#include "support.hpp"

using namespace vkattn::test;

TEST_SUITE("conformance-masks") {
  TEST_CASE("fully masked rows give exactly 0 and LSE -inf") { run_cases(context(), catalog_cases("masks-fully-masked")); }
  TEST_CASE("NaN and Inf in masked-out keys never reach the output") {
    run_cases(context(), catalog_cases("masks-hidden-nan"));
  }
  TEST_CASE("key lengths outside [0, seq_k] are clamped on the device") {
    run_cases(context(), catalog_cases("masks-kv-clamp"));
  }
  TEST_CASE("NaN in one query row stays in that row") { run_cases(context(), catalog_cases("masks-nan-rows")); }
  TEST_CASE("split-KV under every mask") { run_cases(context(), catalog_cases("masks-split-kv")); }
  TEST_CASE("scales: zero, negative, large; default equals 1/sqrt(dim)") {
    run_cases(context(), catalog_cases("masks-scales"));
  }
  TEST_CASE("strided layouts and offsets with masks") { run_cases(context(), catalog_cases("masks-strided")); }
  TEST_CASE("K and V stored as q8_0 blocks") { run_cases(context(), catalog_cases("masks-q8_0")); }
}
