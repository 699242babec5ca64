// The score modifiers (docs/semantics.md, "Score modifiers") on every path and kernel, from the shared catalog
// (conform/catalog_modifiers.cpp), which `vkattn conform` runs too.
#include <doctest/doctest.h>

#include "attention_case.hpp"
#include "support.hpp"

using namespace vkattn::test;

TEST_SUITE("conformance-modifiers") {
  TEST_CASE("sliding windows") { run_cases(context(), catalog_cases("modifiers-window")); }
  TEST_CASE("ALiBi") { run_cases(context(), catalog_cases("modifiers-alibi")); }
  TEST_CASE("logit softcap") { run_cases(context(), catalog_cases("modifiers-softcap")); }
  TEST_CASE("attention sinks") { run_cases(context(), catalog_cases("modifiers-sinks")); }
  TEST_CASE("every modifier at once") { run_cases(context(), catalog_cases("modifiers-combined")); }
}
