// Faults and concurrency: what a caller sees when Vulkan fails (allocation failure and device loss,
// injected through vkattn/testing.hpp), one Context used from several threads, and determinism.
#include <doctest/doctest.h>

#include <cstring>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include <vkattn/testing.hpp>

#include "attention_case.hpp"
#include "compare.hpp"
#include "conform/catalog.hpp"
#include "support.hpp"
#include "vk_check.hpp"

using namespace vkattn;
using namespace vkattn::test;

namespace {

// One attention problem with its buffers and its fp64 reference. `seq_k` long enough makes the fused
// path split the key range, which needs the context's scratch buffer (an allocation inside the call).
struct Problem {
  Context& ctx;
  int64_t heads, seq_q, seq_k, dim;
  std::vector<float> q, k, v;
  Buffer q_buf, k_buf, v_buf, out_buf;
  AttentionArgs args;
  reference::Outputs ref;

  Problem(Context& context, uint64_t seed, int64_t heads_, int64_t seq_q_, int64_t seq_k_, int64_t dim_,
          AttentionPath path = AttentionPath::automatic)
      : ctx(context), heads(heads_), seq_q(seq_q_), seq_k(seq_k_), dim(dim_),
        q(random(heads * seq_q * dim, seed)), k(random(heads * seq_k * dim, seed + 1)),
        v(random(heads * seq_k * dim, seed + 2)), q_buf(upload(q)), k_buf(upload(k)), v_buf(upload(v)),
        out_buf(Buffer::allocate(ctx, uint64_t(heads * seq_q * dim) * 4)) {
    args.q = {&q_buf, TensorLayout::bhsd(DType::f32, 1, heads, seq_q, dim)};
    args.k = {&k_buf, TensorLayout::bhsd(DType::f32, 1, heads, seq_k, dim)};
    args.v = {&v_buf, TensorLayout::bhsd(DType::f32, 1, heads, seq_k, dim)};
    args.out = {&out_buf, TensorLayout::bhsd(DType::f32, 1, heads, seq_q, dim)};
    args.options.causal = Causal::bottom_right;
    args.path = path;
    reference::Inputs in;
    in.q_layout = args.q.layout;
    in.k_layout = args.k.layout;
    in.v_layout = args.v.layout;
    in.q = q;
    in.k = k;
    in.v = v;
    in.options.causal = Causal::bottom_right;
    ref = reference::attention(in);
  }

  static std::vector<float> random(int64_t n, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> x(static_cast<std::size_t>(n));
    for (float& e : x) e = u(rng);
    return x;
  }
  Buffer upload(const std::vector<float>& x) {
    Buffer b = Buffer::allocate(ctx, x.size() * 4);
    b.upload(x.data(), x.size() * 4);
    return b;
  }
  void poison() { out_buf.fill(0xFF); }
  std::vector<float> output() const {
    std::vector<float> o(static_cast<std::size_t>(heads * seq_q * dim));
    out_buf.download(o.data(), o.size() * 4);
    return o;
  }
  // Runs attention and compares with the reference.
  void run_and_check() {
    poison();
    attention(ctx, args);
    compare_with_reference(ref, output(), {}, 1.0, DType::f32);
  }
  // The output still holds the poison: a failed call wrote nothing.
  void check_untouched() const {
    std::vector<uint8_t> bytes(static_cast<std::size_t>(heads * seq_q * dim) * 4);
    out_buf.download(bytes.data(), bytes.size());
    std::size_t changed = 0;
    for (const uint8_t b : bytes) changed += b != 0xFF;
    CHECK_MESSAGE(changed == 0, changed << " output bytes changed by a call that failed");
  }
};

// The Error `f` throws is a Vulkan failure of kind `code` carrying `result`, its name and its value.
template <typename F>
std::string expect_vk_error(F&& f, ErrorCode code, VkResult result, const char* result_name) {
  const ThrownError e = thrown_error(f);
  INFO("message: " << e.message);
  CHECK(e.code == code_name(code));
  CHECK(e.vk_result == result_name);
  CHECK(e.vk_result_code == static_cast<int32_t>(result));
  return e.message;
}

ContextOptions own_context_options() {
  ContextOptions options;
  options.validation = validation_enabled();
  options.kernel = kernel_variant();
  options.on_validation_message = [](const std::string& m) {
    if (!contains(m, "Loader Message")) FAIL_CHECK("validation message: " << m);
  };
  return options;
}

}  // namespace

TEST_SUITE("faults") {
  TEST_CASE("error codes: out_of_memory and device_lost for their VkResults, vulkan_error for any other") {
    const std::vector<std::pair<VkResult, ErrorCode>> expected = {
        {VK_ERROR_OUT_OF_HOST_MEMORY, ErrorCode::out_of_memory},  {VK_ERROR_OUT_OF_DEVICE_MEMORY, ErrorCode::out_of_memory},
        {VK_ERROR_DEVICE_LOST, ErrorCode::device_lost},           {VK_ERROR_INITIALIZATION_FAILED, ErrorCode::vulkan_error},
        {VK_ERROR_EXTENSION_NOT_PRESENT, ErrorCode::vulkan_error}, {VK_ERROR_UNKNOWN, ErrorCode::vulkan_error},
        {VK_TIMEOUT, ErrorCode::vulkan_error},                    {static_cast<VkResult>(-12345), ErrorCode::vulkan_error}};
    for (const auto& [result, code] : expected) {
      const std::string name = detail::vk_result_name(result);
      INFO(name << " (" << int(result) << ")");
      const ThrownError e = thrown_error([result = result] { detail::throw_vk_error("vkSomething", result); });
      CHECK(e.code == code_name(code));
      CHECK(e.vk_result_code == static_cast<int32_t>(result));
      CHECK(e.vk_result == name);
      CHECK(contains(e.message, "vkSomething returned " + name));
    }
  }

  TEST_CASE("allocation failure: an out_of_memory Error with the VkResult, nothing written, the next call is right") {
    Context ctx(own_context_options());
    Problem p(ctx, case_seed(9100), 2, 3, 3000, 32);  // decode-like: the key range is split (scratch)
    REQUIRE(plan_attention(ctx, p.args).workspace_bytes > 0);
    testing::set_fault_hook(ctx, [](testing::FaultSite site) {
      return site == testing::FaultSite::allocate ? VK_ERROR_OUT_OF_DEVICE_MEMORY : VK_SUCCESS;
    });
    const std::string message = expect_vk_error([&] { Buffer b = Buffer::allocate(ctx, 1024); }, ErrorCode::out_of_memory,
                                                VK_ERROR_OUT_OF_DEVICE_MEMORY, "VK_ERROR_OUT_OF_DEVICE_MEMORY");
    CHECK(contains(message, "vkAllocateMemory"));
    p.poison();
    expect_vk_error([&] { attention(ctx, p.args); }, ErrorCode::out_of_memory,  // the scratch fails
                    VK_ERROR_OUT_OF_DEVICE_MEMORY, "VK_ERROR_OUT_OF_DEVICE_MEMORY");
    testing::set_fault_hook(ctx, {});
    p.check_untouched();
    p.run_and_check();
  }

  TEST_CASE("submit failure (out of memory): an out_of_memory Error with the VkResult, the next call is right") {
    Context ctx(own_context_options());
    Problem p(ctx, case_seed(9110), 2, 17, 40, 16);
    p.poison();
    int submits = 0;
    testing::set_fault_hook(ctx, [&](testing::FaultSite site) {
      return site == testing::FaultSite::submit && submits++ == 0 ? VK_ERROR_OUT_OF_HOST_MEMORY : VK_SUCCESS;
    });
    const std::string message = expect_vk_error([&] { attention(ctx, p.args); }, ErrorCode::out_of_memory,
                                                VK_ERROR_OUT_OF_HOST_MEMORY, "VK_ERROR_OUT_OF_HOST_MEMORY");
    CHECK(contains(message, "vkQueueSubmit"));
    testing::set_fault_hook(ctx, {});
    p.check_untouched();
    p.run_and_check();
  }

  TEST_CASE("submit failure (any other VkResult): a vulkan_error Error with the VkResult, the next call is right") {
    Context ctx(own_context_options());
    Problem p(ctx, case_seed(9115), 2, 17, 40, 16);
    p.poison();
    int submits = 0;
    testing::set_fault_hook(ctx, [&](testing::FaultSite site) {
      return site == testing::FaultSite::submit && submits++ == 0 ? VK_ERROR_UNKNOWN : VK_SUCCESS;
    });
    const std::string message = expect_vk_error([&] { attention(ctx, p.args); }, ErrorCode::vulkan_error,
                                                VK_ERROR_UNKNOWN, "VK_ERROR_UNKNOWN");
    CHECK(contains(message, "vkQueueSubmit"));
    testing::set_fault_hook(ctx, {});
    p.check_untouched();
    p.run_and_check();
  }

  TEST_CASE("device lost: a device_lost Error, then every later call on the Context fails fast with it") {
    Context ctx(own_context_options());
    Problem p(ctx, case_seed(9120), 2, 17, 40, 16);
    testing::set_fault_hook(ctx, [](testing::FaultSite site) {
      return site == testing::FaultSite::submit ? VK_ERROR_DEVICE_LOST : VK_SUCCESS;
    });
    expect_vk_error([&] { attention(ctx, p.args); }, ErrorCode::device_lost, VK_ERROR_DEVICE_LOST, "VK_ERROR_DEVICE_LOST");
    testing::set_fault_hook(ctx, {});  // the device stays lost for this Context
    for (const auto& [what, call] : std::vector<std::pair<std::string, std::function<void()>>>{
             {"attention", [&] { attention(ctx, p.args); }},
             {"Buffer::allocate", [&] { Buffer b = Buffer::allocate(ctx, 64); }},
             {"Buffer::download", [&] { p.output(); }},
             {"record_attention", [&] { record_attention(ctx, reinterpret_cast<VkCommandBuffer>(1), p.args); }}}) {
      INFO("call: " << what);
      const std::string later = expect_vk_error(call, ErrorCode::device_lost, VK_ERROR_DEVICE_LOST, "VK_ERROR_DEVICE_LOST");
      CHECK(contains(later, "device was lost"));
    }
    // A new Context works.
    Context fresh(own_context_options());
    Problem q(fresh, case_seed(9121), 2, 17, 40, 16);
    q.run_and_check();
  }

  TEST_CASE("one Context from 4 threads gives the results of serial use, bitwise") {
    Context& ctx = context();
    // Each thread has its own problem and path; the serial run is the reference for the threads.
    std::vector<std::unique_ptr<Problem>> problems;
    for (int t = 0; t < 4; ++t)
      problems.push_back(std::make_unique<Problem>(ctx, case_seed(9130 + t), 2, 9 + 7 * t, 300 + 900 * t, 32,
                                                   t % 2 ? AttentionPath::unfused : AttentionPath::fused));
    std::vector<std::vector<float>> serial;
    for (auto& p : problems) {
      p->run_and_check();
      serial.push_back(p->output());
    }
    constexpr int kRepeats = 4;
    std::vector<std::vector<std::vector<float>>> results(problems.size());
    std::vector<std::string> errors(problems.size());
    std::vector<std::thread> threads;
    for (std::size_t t = 0; t < problems.size(); ++t)
      threads.emplace_back([&, t] {
        try {
          for (int r = 0; r < kRepeats; ++r) {
            problems[t]->poison();
            attention(ctx, problems[t]->args);
            results[t].push_back(problems[t]->output());
          }
        } catch (const std::exception& e) {
          errors[t] = e.what();
        }
      });
    for (std::thread& th : threads) th.join();
    for (std::size_t t = 0; t < problems.size(); ++t) {
      INFO("thread " << t << (errors[t].empty() ? "" : ": " + errors[t]));
      CHECK(errors[t].empty());
      REQUIRE(results[t].size() == std::size_t(kRepeats));
      for (const std::vector<float>& r : results[t])
        CHECK(std::memcmp(r.data(), serial[t].data(), r.size() * 4) == 0);
    }
    expect_no_validation_messages();
  }

  TEST_CASE("deterministic: the same inputs give bitwise the same outputs, run after run") {
    for (const AttentionPath path : {AttentionPath::fused, AttentionPath::unfused}) {
      Problem p(context(), case_seed(9140), 3, 33, 5000, 64, path);  // split-KV on the fused path
      p.run_and_check();
      const std::vector<float> first = p.output();
      for (int r = 0; r < 3; ++r) {
        p.poison();
        attention(context(), p.args);
        CHECK_MESSAGE(std::memcmp(p.output().data(), first.data(), first.size() * 4) == 0,
                      "run " << r << " on path " << to_string(path) << " differs from the first");
      }
    }
    expect_no_validation_messages();
  }

  TEST_CASE("device buffers the host cannot map (a discrete GPU's): uploads, downloads and calls go through staging") {
    // On lavapipe every device buffer is host-visible and mapped; a discrete GPU's are not, and take
    // the staging path, which only this test runs here.
    Context ctx(own_context_options());
    testing::set_device_memory_unmapped(ctx, true);
    // Round trips at offsets, and a partial upload that leaves the rest of the buffer as it was.
    std::vector<uint8_t> bytes(1000);
    for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = uint8_t(i * 7 + 3);
    Buffer b = Buffer::allocate(ctx, bytes.size());
    b.upload(bytes.data(), bytes.size());
    const std::vector<uint8_t> patch = {9, 8, 7, 6, 5};
    b.upload(patch.data(), patch.size(), 101);
    std::copy(patch.begin(), patch.end(), bytes.begin() + 101);
    std::vector<uint8_t> back(bytes.size());
    b.download(back.data(), back.size());
    CHECK(back == bytes);
    std::vector<uint8_t> middle(300);
    b.download(middle.data(), middle.size(), 250);
    CHECK(std::equal(middle.begin(), middle.end(), bytes.begin() + 250));
    // Whole calls: the representative cases (poisoned outputs, guard bytes, split-KV scratch) and
    // the paged cases (an append writes the caches), checked against the fp64 reference.
    run_cases(ctx, catalog_cases("representative"));
    for (const conform::ServingCase& c : conform::catalog_section("paged", base_seed()).serving_cases) {
      if (!device_supports(c.dtype)) continue;
      INFO(conform::describe(c));
      const conform::ServingResult r = conform::run_serving_case(ctx, c);
      CHECK_MESSAGE(r.ok, r.text);
    }
  }
}
