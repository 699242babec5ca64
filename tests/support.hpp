// Shared test infrastructure: the per-process Context (created once, with the validation layer and a
// messenger that records every message) and small helpers every GPU test uses.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <vkattn/vkattn.hpp>

namespace vkattn::test {

// Settings from the test binary's own command-line flags (parsed in main.cpp before doctest sees
// argv). The setters must be called before the first context().

// --sync-validation: the shared Context also runs synchronization validation.
void set_sync_validation(bool enabled);
bool sync_validation();

// --no-validation: neither the shared Context nor the adoption test's application enables the
// validation layer. On by default.
void set_validation_enabled(bool enabled);
bool validation_enabled();

// --verbose: run_cases() prints each case with its time.
void set_verbose(bool enabled);
bool verbose();

// --quick: catalog_cases() gives each catalog section's quick subset (the cases `vkattn conform
// --quick` runs), not all of it.
void set_quick(bool enabled);
bool quick();

// --seed=N: the base seed every case seed derives from (see base_seed()).
// --kernel=auto|tiled|rowwise|subgroup: the fused-kernel variant of the shared Context (and adopted ones).
void set_kernel_variant(KernelVariant kernel);
KernelVariant kernel_variant();
void set_base_seed(uint64_t seed);
// --path=auto|fused|unfused: the attention path every case runs on. With unfused, each case also
// requests the weights P and checks them against the reference.
void set_attention_path(AttentionPath path);
AttentionPath attention_path();

// The Context every GPU test shares (one per process, so pipelines compile once). Created on first
// use with ContextOptions::validation = true, unless --no-validation was given.
Context& context();
// Destroys the shared Context (end of main) and returns the validation messages no test checked:
// those received after the last check, and those the Context's destruction produced — above all the
// object-lifetime layer's reports of handles still alive when the device is destroyed. main() prints
// them and fails the run.
std::vector<std::string> shutdown();

// Validation messages received since the last call (the loader's own notices are not counted).
std::vector<std::string> take_validation_messages();
// FAILs the current test with every validation message received since the last check.
void expect_no_validation_messages();

// Whether the shared Context's device can store `dtype` tensors.
bool device_supports(DType dtype);

// The base seed: the value of --seed=N when given, else a fixed value, so runs are reproducible.
uint64_t base_seed();
// A seed for one case, derived from the base seed and a case number.
uint64_t case_seed(uint64_t case_number);

// A multi-head layer of `embed` features and `heads` heads without GQA or kdim/vdim, every projection
// weight 0.1 and every bias 0: the smallest valid layer, for tests of what the layer refuses.
MhaWeights constant_mha_weights(int64_t embed = 8, int64_t heads = 2);

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

// An ErrorCode's name as a std::string, so that a failing CHECK(e.code == code_name(...)) prints both.
inline std::string code_name(ErrorCode code) { return to_string(code); }

// What the vkattn::Error that `f` throws carries; `code` is its code's name, "" when none was thrown.
struct ThrownError {
  std::string message = "<no vkattn::Error thrown>";
  std::string code;
  std::string vk_result;
  int32_t vk_result_code = 0;
};
template <typename F>
ThrownError thrown_error(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return {e.what(), to_string(e.code()), e.vk_result(), e.vk_result_code()};
  }
  return {};
}

}  // namespace vkattn::test
