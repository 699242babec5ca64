// The test runner: doctest's own main, plus a few flags of ours. They are the only way to change how
// the tests run (no environment variables), and must be known before the shared Context is created:
//   --sync-validation  create the shared Context with synchronization validation
//   --no-validation    run without the validation layer (shared Context and the adoption test's app)
//   --seed=N           base seed of every case's random inputs (decimal, or 0x... hex)
//   --verbose          print each attention case with its time
//   --quick            run each catalog section's quick subset only (what `vkattn conform --quick` runs)
//   --kernel=V         the fused-kernel variant (auto, tiled, rowwise, subgroup)
//   --path=P           the attention path (auto, fused, unfused)
// doctest would reject an option it does not know, so ours are stripped before argv is handed on.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "support.hpp"

#if defined(__SANITIZE_ADDRESS__)
#include <dlfcn.h>
#define VKATTN_TESTS_ASAN 1
#endif

namespace {

constexpr const char* kUsage =
    "vkattn_tests flags (in addition to doctest's):\n"
    "  --sync-validation  create the shared Context with synchronization validation\n"
    "  --no-validation    run without the Vulkan validation layer\n"
    "  --seed=N           base seed of every case's random inputs (decimal, or 0x... hex)\n"
    "  --verbose          print each attention case with its time\n"
    "  --quick            run each catalog section's quick subset only (vkattn conform --quick's cases)\n"
    "  --kernel=V         fused-kernel variant: auto (default), tiled, rowwise or subgroup\n"
    "  --path=P           attention path: auto (default), fused or unfused (also checks the weights)\n";

// Parses the N of --seed=N: a whole unsigned 64-bit number, nothing else.
bool parse_seed(const char* text, uint64_t& seed) {
  if (*text == '\0' || *text == '-' || *text == '+') return false;
  char* end = nullptr;
  errno = 0;
  const unsigned long long value = std::strtoull(text, &end, 0);
  if (errno != 0 || *end != '\0') return false;
  seed = static_cast<uint64_t>(value);
  return true;
}

#ifdef VKATTN_TESTS_ASAN
// Under AddressSanitizer: keep the validation layer loaded until exit. The loader unloads it at
// vkDestroyInstance, and LeakSanitizer would then attribute the layer's own leaks (see
// scripts/lsan.supp) to an "<unknown module>" that no suppression can name. RTLD_LOCAL: nothing of
// the layer is interposed on the loader (preloading it with LD_PRELOAD would be).
void keep_validation_layer_loaded() {
  (void)dlopen("libVkLayer_khronos_validation.so", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
}
#endif

}  // namespace

int main(int argc, char** argv) {
#ifdef VKATTN_TESTS_ASAN
  keep_validation_layer_loaded();
#endif
  std::vector<char*> args;
  bool help = false;
  for (int i = 0; i < argc; ++i) {
    const char* arg = argv[i];
    if (i == 0) {
      args.push_back(argv[i]);
    } else if (std::strcmp(arg, "--sync-validation") == 0) {
      vkattn::test::set_sync_validation(true);
    } else if (std::strcmp(arg, "--no-validation") == 0) {
      vkattn::test::set_validation_enabled(false);
    } else if (std::strcmp(arg, "--verbose") == 0) {
      vkattn::test::set_verbose(true);
    } else if (std::strcmp(arg, "--quick") == 0) {
      vkattn::test::set_quick(true);
    } else if (std::strncmp(arg, "--seed=", 7) == 0) {
      uint64_t seed = 0;
      if (!parse_seed(arg + 7, seed)) {
        std::fprintf(stderr, "vkattn_tests: bad %s (expected --seed=N, N an unsigned 64-bit number)\n", arg);
        return 2;
      }
      vkattn::test::set_base_seed(seed);
    } else if (std::strncmp(arg, "--kernel=", 9) == 0) {
      try {
        vkattn::test::set_kernel_variant(vkattn::parse_kernel_variant(arg + 9));
      } catch (const vkattn::Error& e) {
        std::fprintf(stderr, "vkattn_tests: %s\n", e.what());
        return 2;
      }
    } else if (std::strncmp(arg, "--path=", 7) == 0) {
      try {
        vkattn::test::set_attention_path(vkattn::parse_attention_path(arg + 7));
      } catch (const vkattn::Error& e) {
        std::fprintf(stderr, "vkattn_tests: %s\n", e.what());
        return 2;
      }
    } else if (std::strcmp(arg, "--seed") == 0) {
      std::fprintf(stderr, "vkattn_tests: write the seed as --seed=N\n");
      return 2;
    } else {
      help = help || std::strcmp(arg, "-h") == 0 || std::strcmp(arg, "--help") == 0 ||
             std::strcmp(arg, "-?") == 0;
      args.push_back(argv[i]);
    }
  }
  doctest::Context context;
  context.applyCommandLine(static_cast<int>(args.size()), args.data());
  int result = context.run();
  if (help) std::printf("\n%s", kUsage);
  // Destroy the shared Context before static destructors run. Validation messages that arrive then
  // (a handle leaked until the device is destroyed) or that no test checked fail the run.
  const std::vector<std::string> unchecked = vkattn::test::shutdown();
  for (const std::string& m : unchecked)
    std::fprintf(stderr, "vkattn_tests: validation message after the tests ran (at Context destruction): %s\n", m.c_str());
  if (!unchecked.empty()) {
    std::fprintf(stderr, "vkattn_tests: FAILED: %zu validation message(s) outside any test\n", unchecked.size());
    if (result == 0) result = 1;
  }
  return result;
}
