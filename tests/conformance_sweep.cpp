// The conformance sweep (docs/testing.md, "The test suite") and a few larger shapes, from the shared catalog
// (conform/catalog_sweep.cpp), which `vkattn conform` runs too.
#include <doctest/doctest.h>

#include "attention_case.hpp"
#include "support.hpp"

using namespace vkattn::test;

TEST_SUITE("conformance") {
  TEST_CASE("sweep f32") { run_cases(context(), catalog_cases("sweep-f32")); }
  TEST_CASE("sweep f16") { run_cases(context(), catalog_cases("sweep-f16")); }
  TEST_CASE("sweep bf16") { run_cases(context(), catalog_cases("sweep-bf16")); }
  TEST_CASE("larger shapes") { run_cases(context(), catalog_cases("larger")); }
  // Head dims past the fused kernels' (conform/catalog_wide.cpp): the three-stage path, or the refusal.
  TEST_CASE("head dims past 256") { run_cases(context(), catalog_cases("wide")); }
}
