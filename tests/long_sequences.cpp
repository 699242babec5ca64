// Long key ranges, and sizes beyond one binding or one grid dimension, from the shared catalog
// (conform/catalog_long.cpp), which `vkattn conform` runs too. lavapipe stops an invocation's loops
// after 65535 iterations in total and says nothing (docs/devices.md): these are the cases that catch it.
#include <doctest/doctest.h>

#include "attention_case.hpp"
#include "support.hpp"

using namespace vkattn::test;

TEST_SUITE("long") {
  TEST_CASE("decode: one query row against 16384 and 65536 keys, GQA over 20000") {
    run_cases(context(), catalog_cases("long-decode"));
  }
  TEST_CASE("query rows against 16384 to 70000 keys: causal chunk, boolean mask, LSE, d256 loop budgets") {
    run_cases(context(), catalog_cases("long-rows"));
  }
  // On the unfused path the 600,000-key case must be refused with "use the fused path" (the case
  // says so; the runner checks it).
  TEST_CASE("K and V beyond one binding: (batch, GQA group) chunks and key ranges") {
    run_cases(context(), catalog_cases("long-binding"));
  }
  TEST_CASE("score modifiers over 70,000 keys: a sliding window's band splits, sinks in the combine") {
    run_cases(context(), catalog_cases("modifiers-long"));
  }
  TEST_CASE("grids beyond maxComputeWorkGroupCount (65535 on lavapipe): 70,000 heads, batch 66,000") {
    run_cases(context(), catalog_cases("long-grid"));
  }
}
