// The backward pass planned for another device (PreparedAttentionBackward's profile constructor, what
// `vkattn conform --profile` runs): a plan that fits runs here and matches the reference; one that
// would be refused, or cannot run correctly here, throws PlanDoesNotFit saying which.
#include <doctest/doctest.h>

#include <string>

#include "conform/backward_case.hpp"
#include "conform/device_profiles.hpp"
#include "support.hpp"
#include "vkattn/attention_backward.hpp"
#include "vkattn/testing.hpp"

using namespace vkattn;
using namespace vkattn::test;

namespace {

AttentionSpec dense_spec(DType dtype, int64_t heads, int64_t kv_heads, int64_t seq_q, int64_t seq_k, int64_t dim) {
  AttentionSpec spec;
  spec.q = TensorLayout::bhsd(dtype, 1, heads, seq_q, dim);
  spec.kv = DenseKv{TensorLayout::bhsd(dtype, 1, kv_heads, seq_k, dim), TensorLayout::bhsd(dtype, 1, kv_heads, seq_k, dim)};
  spec.out = TensorLayout::bhsd(dtype, 1, heads, seq_q, dim);
  spec.lse = true;
  return spec;
}

}  // namespace

TEST_SUITE("backward") {
  TEST_CASE("backward planned for another device: runs where it fits, PlanDoesNotFit where not") {
    Context& ctx = context();
    const DeviceInfo& h100 = conform::find_device_profile("h100").info;
    // A GPU of 32 KiB shared memory, whose tiles fit lavapipe's too (an H100's 48 KiB tiles do not).
    const DeviceInfo& apple = conform::find_device_profile("apple").info;

    // The kernel variant this run forces (--kernel) applies to the profile's plan too: the subgroup form
    // needs one subgroup size, which Apple's pipelines do not have; rowwise takes the portable kernels.
    const KernelVariant variant = kernel_variant();
    const bool tiled = variant == KernelVariant::automatic || variant == KernelVariant::tiled;
    if (variant == KernelVariant::subgroup) {
      const std::string message =
          error_message([&] { (void)PreparedAttentionBackward(ctx, dense_spec(DType::f32, 4, 2, 33, 47, 32), apple); });
      CHECK(contains(message, "would refuse this call"));
    } else {
      // A GPU's plan: the tiled form (or the portable one), no splits, and here the reference's gradients.
      const PreparedAttentionBackward planned(ctx, dense_spec(DType::f32, 4, 2, 33, 47, 32), apple);
      CHECK(planned.plan().kernel == std::string(tiled ? "tiled" : "portable"));
      CHECK(planned.plan().query_splits == 1);
      CHECK(planned.plan().key_splits == 1);
      conform::BackwardCase c;
      c.heads = 4, c.kv_heads = 2, c.seq_q = 33, c.seq_k = 47, c.dim_qk = c.dim_v = 32;
      c.causal = Causal::bottom_right;
      c.modifiers.sinks = true;
      c.seed = case_seed(2000);
      conform::RunOptions options;
      options.profile = &apple;
      options.take_validation_messages = [] { return take_validation_messages(); };
      const conform::CaseResult result = conform::run_backward_case(ctx, c, options);
      for (const std::string& p : result.problems) FAIL_CHECK(p);
      CHECK(result.outcome == conform::Outcome::passed);
    }

    // A device that refuses the call: f16 on the Vulkan 1.2 minimums (no 16-bit storage).
    const std::string refused = error_message(
        [&] { (void)PreparedAttentionBackward(ctx, dense_spec(DType::f16, 2, 2, 7, 9, 16), conform::find_device_profile("vulkan12-min").info); });
    CHECK(contains(refused, "would refuse this call"));
    CHECK(contains(refused, "storageBuffer16BitAccess"));

    // A CPU device's plan takes the subgroup form, whose workgroup is one subgroup of its lanes: planned
    // for other subgroups than this device's one size, it does not fit.
    ContextOptions subgroup_options;
    subgroup_options.kernel = KernelVariant::subgroup;
    Context subgroup_context(subgroup_options);
    const DeviceInfo& here = subgroup_context.device_info();
    const AttentionSpec small = dense_spec(DType::f32, 2, 2, 7, 9, 16);
    if (PreparedAttentionBackward(subgroup_context, small).plan().kernel == std::string("subgroup") &&
        here.min_subgroup_size == here.max_subgroup_size) {
      DeviceInfo other = here;
      const uint32_t lanes = here.subgroup_size == 32 ? 16 : here.subgroup_size * 2;
      other.name = "this device with " + std::to_string(lanes) + "-lane subgroups";
      other.subgroup_size = other.min_subgroup_size = other.max_subgroup_size = lanes;
      REQUIRE(PreparedAttentionBackward(subgroup_context, small, here).plan().kernel == std::string("subgroup"));
      const std::string message = error_message([&] { (void)PreparedAttentionBackward(subgroup_context, small, other); });
      CHECK(contains(message, "does not fit"));
      CHECK(contains(message, "one subgroup of " + std::to_string(lanes) + " lanes"));
    }

    // An H100's tiles need more shared memory than a 32 KiB device has: they do not fit, and say so.
    if (tiled && ctx.device_info().max_shared_memory < h100.max_shared_memory) {
      const std::string message = error_message([&] { (void)PreparedAttentionBackward(ctx, dense_spec(DType::f32, 4, 2, 33, 47, 64), h100); });
      CHECK(contains(message, "does not fit"));
      CHECK(contains(message, "shared memory"));
    }

    // On lavapipe a GPU's plan walks all 70,000 keys in one invocation, past the loop limit that the
    // local plan splits for: it does not fit, and says why.
    if (ctx.device_info().is_llvmpipe && variant != KernelVariant::subgroup) {
      const AttentionSpec spec = dense_spec(DType::f32, 2, 1, 24, 70000, 8);
      const std::string too_long = error_message([&] { (void)PreparedAttentionBackward(ctx, spec, apple); });
      CHECK(contains(too_long, "the plan for"));
      CHECK(contains(too_long, "does not fit"));
      CHECK(contains(too_long, "loop limit"));
      CHECK_NOTHROW((void)PreparedAttentionBackward(ctx, spec));  // the local plan splits it
    }
  }
}
