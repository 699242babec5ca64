#include "support.hpp"

#include "conform/attention_case.hpp"

#include <doctest/doctest.h>

#include <memory>
#include <mutex>
#include <string>

#include "vkattn/testing.hpp"

namespace vkattn::test {

namespace {

// Test-process state. The library itself has none; the tests share one Context on purpose.
struct Shared {
  // Set from the command line (main.cpp) before the first test runs.
  bool sync = false;
  bool validation = true;
  bool verbose = false;
  bool quick = false;
  KernelVariant kernel = KernelVariant::automatic;
  AttentionPath path = AttentionPath::automatic;
  uint64_t seed = conform::kDefaultBaseSeed;
  std::unique_ptr<Context> context;
  std::mutex mutex;  // the messenger may be called from the driver's threads
  std::vector<std::string> messages;
};

Shared& shared() {
  static Shared s;
  return s;
}

}  // namespace

void set_sync_validation(bool enabled) { shared().sync = enabled; }
bool sync_validation() { return shared().sync; }

void set_validation_enabled(bool enabled) { shared().validation = enabled; }
bool validation_enabled() { return shared().validation; }

void set_verbose(bool enabled) { shared().verbose = enabled; }
bool verbose() { return shared().verbose; }

void set_quick(bool enabled) { shared().quick = enabled; }
bool quick() { return shared().quick; }

void set_base_seed(uint64_t seed) { shared().seed = seed; }

void set_kernel_variant(KernelVariant kernel) { shared().kernel = kernel; }
KernelVariant kernel_variant() { return shared().kernel; }

void set_attention_path(AttentionPath path) { shared().path = path; }
AttentionPath attention_path() { return shared().path; }

Context& context() {
  Shared& s = shared();
  if (!s.context) {
    ContextOptions options;
    options.validation = validation_enabled();
    options.synchronization_validation = options.validation && s.sync;
    options.kernel = s.kernel;
    options.on_validation_message = [&s](const std::string& message) {
      // With VK_LOADER_LAYERS_ENABLE the loader reports itself through the messenger; that is not
      // a validation error (docs/devices.md).
      if (contains(message, "Loader Message")) return;
      std::lock_guard<std::mutex> lock(s.mutex);
      s.messages.push_back(message);
    };
    // Every call the tests record checks its own barriers too (CommandList::hazards): the validation
    // layer misses some (docs/devices.md, "Tools around it").
    options.check_barriers = true;
    s.context = std::make_unique<Context>(options);
    const std::string validation = !options.validation                  ? "off"
                                   : options.synchronization_validation ? "on, with synchronization"
                                                                        : "on";
    MESSAGE("device: " << s.context->device_info().name << " (" << s.context->device_info().driver_name
                       << "), validation " << validation << ", kernel " << std::string(to_string(s.kernel)));
  }
  return *s.context;
}

std::vector<std::string> shutdown() {
  // The messenger lives until the instance is destroyed, after the device: a handle leaked on the
  // device is reported into s.messages from inside this reset.
  shared().context.reset();
  return take_validation_messages();
}

std::vector<std::string> take_validation_messages() {
  Shared& s = shared();
  std::lock_guard<std::mutex> lock(s.mutex);
  std::vector<std::string> out;
  out.swap(s.messages);
  return out;
}

void expect_no_validation_messages() {
  for (const std::string& m : take_validation_messages()) FAIL_CHECK("validation message: " << m);
}

bool device_supports(DType dtype) {
  const DeviceInfo& info = context().device_info();
  switch (dtype) {
    case DType::f32:
      return true;
    case DType::f16:
      return info.supports_f16();
    case DType::bf16:
      return info.supports_bf16();
  }
  return false;
}

uint64_t base_seed() { return shared().seed; }

uint64_t case_seed(uint64_t case_number) { return conform::case_seed(base_seed(), case_number); }

MhaWeights constant_mha_weights(int64_t embed, int64_t heads) {
  MhaWeights w;
  w.embed_dim = embed;
  w.num_heads = heads;
  for (auto* v : {&w.q_proj_weight, &w.k_proj_weight, &w.v_proj_weight, &w.out_proj_weight})
    v->assign(static_cast<std::size_t>(embed * embed), 0.1f);
  w.in_proj_bias.assign(static_cast<std::size_t>(3 * embed), 0.0f);
  w.out_proj_bias.assign(static_cast<std::size_t>(embed), 0.0f);
  return w;
}

}  // namespace vkattn::test
