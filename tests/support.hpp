// Shared test infrastructure: the per-process Context (created once, with the validation layer and a
// messenger that records every message) and small helpers every GPU test uses.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <vkattn/vkattn.hpp>

namespace vkattn::test {

// Call before the first context(): the shared Context then also runs synchronization validation.
void set_sync_validation(bool enabled);
bool sync_validation();

// The Context every GPU test shares (one per process, so pipelines compile once). Created on first
// use with ContextOptions::validation = true, unless VKATTN_TEST_VALIDATION=0.
Context& context();
// Destroys the shared Context (end of main).
void shutdown();

// Validation messages received since the last call (the loader's own notices are not counted).
std::vector<std::string> take_validation_messages();
// FAILs the current test with every validation message received since the last check.
void expect_no_validation_messages();

// Whether the shared Context's device can store `dtype` tensors.
bool device_supports(DType dtype);

// The base seed: VKATTN_TEST_SEED when set, else a fixed value, so runs are reproducible.
uint64_t base_seed();
// A seed for one case, derived from the base seed and a case number.
uint64_t case_seed(uint64_t case_number);

// True when `text` contains `part`.
inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The message of the vkattn::Error that `f` throws, or a marker text when it throws none (any other
// exception escapes and fails the test).
template <typename F>
std::string error_message(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no vkattn::Error thrown>";
}

}  // namespace vkattn::test
