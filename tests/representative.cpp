// A representative subset (fused, split + combine, every mask kind, every dtype, strided layouts)
// from the shared catalog, small enough to run again under synchronization validation — the only
// thing that catches a missing barrier on lavapipe (docs/devices.md).
#include <doctest/doctest.h>

#include "attention_case.hpp"
#include "support.hpp"

using namespace vkattn::test;

TEST_SUITE("representative") {
  TEST_CASE("representative subset") { run_cases(context(), catalog_cases("representative")); }
}
