// The score modifiers' extreme values (windows past 2^31, huge and tiny softcaps, FLT_MAX-sized ALiBi
// slopes and sinks) on dense, paged and packed calls and the layer, on the path and kernel of the run
// (--path=, --kernel=): the catalog's extremes sections (conform/catalog_extremes.cpp), which `vkattn
// conform` runs too.
#include <doctest/doctest.h>

#include "attention_case.hpp"
#include "support.hpp"

using namespace vkattn::test;

TEST_SUITE("conformance-extremes") {
  TEST_CASE("dense calls") { run_section(context(), "extremes"); }
  TEST_CASE("paged KV caches") { run_section(context(), "extremes-paged"); }
  TEST_CASE("packed variable-length batches") { run_section(context(), "extremes-varlen"); }
  TEST_CASE("the multi-head layer") { run_section(context(), "extremes-layer"); }
}
