// Other devices' plans, proven on this one: each attention and backward case of `vkattn conform --quick` runs with
// the plan vkattn makes for a device class that is not here (conform/device_profiles.hpp), checked
// against the fp64 reference like every case, or is skipped where that plan cannot run here.
#include <doctest/doctest.h>

#include <string>

#include "attention_case.hpp"
#include "conform/case_runner.hpp"
#include "conform/catalog.hpp"
#include "conform/device_profiles.hpp"
#include "support.hpp"
#include "vkattn/testing.hpp"

using namespace vkattn;
using namespace vkattn::test;

TEST_SUITE("conformance-profiles") {
  TEST_CASE("a profile's plan is the one its device would get, not this device's") {
    Context& ctx = context();
    // Few query rows and few workgroups (a GQA group of 4 heads x 8 rows: past the decode form's 16,
    // the tiled kernel on a GPU): GPUs split the keys to fill 256 workgroups, CPU devices 16.
    AttentionSpec spec;
    spec.q = TensorLayout::bhsd(DType::f32, 1, 4, 8, 64);
    spec.kv = DenseKv{TensorLayout::bhsd(DType::f32, 1, 1, 4096, 64), TensorLayout::bhsd(DType::f32, 1, 1, 4096, 64)};
    spec.out = TensorLayout::bhsd(DType::f32, 1, 4, 8, 64);
    const AttentionPlan here = PreparedAttention(ctx, spec).plan();
    const AttentionPlan h100 =
        PreparedAttention(ctx, spec, conform::find_device_profile("h100").info).plan();
    INFO("splits here " << here.splits << ", as for an H100 " << h100.splits);
    CHECK(h100.kernel == std::string("tiled"));
    if (ctx.device_info().is_llvmpipe) CHECK(h100.splits > here.splits);
    CHECK(h100.splits * 4 >= 256);  // 4 workgroups (its 32 rows in tiles of at most 8 here) before splitting

    // One query row (decode): an H100 runs the subgroup kernel's decode form, whose workgroup is one
    // subgroup of 32 lanes: on a device of other subgroups it cannot run, and the case is skipped.
    if (ctx.device_info().subgroup_size != 32) {
      AttentionSpec decode = spec;
      decode.q.seq = decode.out.seq = 1;
      const std::string skipped = error_message(
          [&] { (void)PreparedAttention(ctx, decode, conform::find_device_profile("h100").info); });
      CHECK(contains(skipped, "does not fit"));
      CHECK(contains(skipped, "one subgroup of 32 lanes"));
    }

    // A packed batch with ALiBi slopes per sequence, (batch, heads), is planned for a profile as for
    // this device: the plan's fit is checked with the layouts it was made from (the dense view's
    // batch is 1, which the slopes' batch of sequences would not match).
    AttentionSpec packed;
    packed.q = packed.out = packed_layout(DType::f32, 12, 4, 64);
    packed.kv = PackedKv{packed_layout(DType::f32, 40, 2, 64), packed_layout(DType::f32, 40, 2, 64), 3, 0, 0};
    packed.alibi = HeadValuesLayout{3, 4, 0};
    for (const char* id : {"h100", "adreno"})
      for (const AttentionPath path : {AttentionPath::fused, AttentionPath::unfused}) {
        packed.path = path;
        packed.weights = path == AttentionPath::unfused;
        INFO("profile " << id << ", " << (packed.weights ? "three-stage" : "fused") << " path");
        CHECK(error_message([&] { (void)PreparedAttention(ctx, packed, conform::find_device_profile(id).info); }) ==
              "<no vkattn::Error thrown>");
      }

    // A profile's device that refuses the call makes it a skip, not a failure.
    DenseKv& kv = std::get<DenseKv>(spec.kv);
    spec.q.dtype = kv.k.dtype = kv.v.dtype = spec.out.dtype = DType::f16;
    const std::string refused = error_message(
        [&] { (void)PreparedAttention(ctx, spec, conform::find_device_profile("vulkan12-min").info); });
    CHECK(contains(refused, "would refuse this call"));
    CHECK(contains(refused, "storageBuffer16BitAccess"));
    CHECK(contains(error_message([] { (void)conform::find_device_profile("h200"); }), "profiles: h100, rdna3"));

    // A three-stage plan whose GEMMs put more heads on the grid's z than this device allows (Apple's
    // profile: MoltenVK's 2^30; here 65535 or fewer) is a skip too, found before anything is built.
    if (ctx.device_info().max_workgroup_count[2] < 70000) {
      AttentionSpec grid;
      grid.q = TensorLayout::bhsd(DType::f32, 1, 70000, 3, 16);
      grid.kv = DenseKv{TensorLayout::bhsd(DType::f32, 1, 35000, 5, 16), TensorLayout::bhsd(DType::f32, 1, 35000, 5, 16)};
      grid.out = TensorLayout::bhsd(DType::f32, 1, 70000, 3, 16);
      grid.path = AttentionPath::unfused;
      const std::string skipped =
          error_message([&] { (void)PreparedAttention(ctx, grid, conform::find_device_profile("apple").info); });
      CHECK(contains(skipped, "does not fit"));
      CHECK(contains(skipped, "heads exceed maxComputeWorkGroupCount[2]"));
    }
  }

  TEST_CASE("the quick attention, serving and backward cases pass with the plans of an H100, an Adreno and the Vulkan 1.2 minimums") {
    Context& ctx = context();
    for (const char* id : {"h100", "adreno", "vulkan12-min"}) {
      const conform::DeviceProfile& profile = conform::find_device_profile(id);
      conform::RunOptions options;
      options.profile = &profile.info;
      options.path = attention_path();
      options.take_validation_messages = [] { return take_validation_messages(); };
      int passed = 0, serving_passed = 0;
      for (const conform::CaseSection& section : conform::catalog(base_seed()))
        for (const std::size_t i : section.quick) {
          if (i < section.backward_cases.size()) {  // the backward planned for the profile's device
            const conform::BackwardCase& c = section.backward_cases[i];
            const conform::CaseResult r = conform::run_backward_case(ctx, c, options);
            INFO("profile " << std::string(id) << ", case " << section.name << "/" << i << ": " << describe(c));
            for (const std::string& p : r.problems) FAIL_CHECK(p);
            if (r.outcome == conform::Outcome::passed) ++passed;
            continue;
          }
          if (i < section.serving_cases.size()) {  // a paged cache or packed sequences, the profile's plan
            const conform::ServingCase& c = section.serving_cases[i];
            const conform::CaseResult r = conform::run_serving_case(ctx, c, options);
            INFO("profile " << std::string(id) << ", case " << section.name << "/" << i << ": " << describe(c));
            for (const std::string& p : r.problems) FAIL_CHECK(p);
            if (r.outcome == conform::Outcome::passed) ++passed, ++serving_passed;
            continue;
          }
          if (i >= section.cases.size()) continue;  // layer cases: the layer plans for its own device
          const conform::AttentionCase& c = section.cases[i];
          const conform::CaseResult r = conform::run_case(ctx, c, options);
          INFO("profile " << std::string(id) << ", case " << section.name << "/" << i << ": " << describe(c));
          for (const std::string& p : r.problems) FAIL_CHECK(p);
          if (r.outcome == conform::Outcome::passed) ++passed;
        }
      MESSAGE("profile " << std::string(id) << ": " << passed << " quick cases passed with its plans, "
                          << serving_passed << " of them paged or packed");
      CHECK(passed > 0);
      CHECK(serving_passed > 0);
    }
  }
}
