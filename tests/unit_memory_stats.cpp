// Context::memory_stats(): the device memory a Context allocated — buffers, the scratch of the
// synchronous calls — with its peak, reset_peak_memory() and release_scratch(). `vkattn bench`
// reports each shape's peak from it, so it must count every allocation once and forget it when freed.
#include <doctest/doctest.h>

#include <vector>

#include "support.hpp"
#include "vkattn/testing.hpp"

using namespace vkattn;
using vkattn::test::context;

TEST_SUITE("unit") {
  TEST_CASE("memory_stats counts Buffer::allocate once, and forgets freed buffers") {
    Context& ctx = context();
    const MemoryStats before = ctx.memory_stats();
    CHECK(before.current_bytes > 0);  // the Context's own small buffer
    CHECK(before.peak_bytes >= before.current_bytes);
    constexpr uint64_t kBytes = 1 << 20;
    {
      Buffer a = Buffer::allocate(ctx, kBytes);
      const MemoryStats one = ctx.memory_stats();
      CHECK(one.allocations == before.allocations + 1);
      CHECK(one.current_bytes >= before.current_bytes + kBytes);
      CHECK(one.current_bytes < before.current_bytes + 2 * kBytes);  // the driver may round up, not double
      CHECK(one.peak_bytes >= one.current_bytes);

      Buffer moved = std::move(a);  // a move hands the allocation over: still counted once
      CHECK(ctx.memory_stats().current_bytes == one.current_bytes);
      Buffer b = Buffer::allocate(ctx, kBytes);
      CHECK(ctx.memory_stats().current_bytes >= one.current_bytes + kBytes);
      // A wrapped buffer is the application's memory: not counted.
      Buffer view = Buffer::wrap(ctx, b.handle(), 0, kBytes / 2);
      CHECK(ctx.memory_stats().allocations == before.allocations + 2);
    }
    const MemoryStats after = ctx.memory_stats();
    CHECK(after.current_bytes == before.current_bytes);
    CHECK(after.allocations == before.allocations);
    CHECK(after.peak_bytes >= before.current_bytes + 2 * kBytes);  // the peak remembers both

    ctx.reset_peak_memory();
    CHECK(ctx.memory_stats().peak_bytes == after.current_bytes);
  }

  TEST_CASE("memory_stats: a failed allocation is not counted") {
    Context& ctx = context();
    const MemoryStats before = ctx.memory_stats();
    testing::set_fault_hook(ctx, [](testing::FaultSite site) {
      return site == testing::FaultSite::allocate ? VK_ERROR_OUT_OF_DEVICE_MEMORY : VK_SUCCESS;
    });
    CHECK_THROWS_AS(Buffer::allocate(ctx, 4096), Error);
    testing::set_fault_hook(ctx, {});
    CHECK(ctx.memory_stats().current_bytes == before.current_bytes);
    CHECK(ctx.memory_stats().allocations == before.allocations);
  }

  TEST_CASE("memory_stats: attention's scratch is in the peak; release_scratch frees it") {
    Context& ctx = context();
    // One query against 4096 keys: split-KV, whose partial (O, LSE) per split live in the scratch.
    const int64_t sk = 4096, d = 64;
    const auto q_layout = TensorLayout::bhsd(DType::f32, 1, 2, 1, d);
    const auto kv_layout = TensorLayout::bhsd(DType::f32, 1, 2, sk, d);
    Buffer q = Buffer::allocate(ctx, 2 * d * 4), k = Buffer::allocate(ctx, 2 * sk * d * 4),
           v = Buffer::allocate(ctx, 2 * sk * d * 4), o = Buffer::allocate(ctx, 2 * d * 4);
    std::vector<float> ones(static_cast<std::size_t>(2 * sk * d), 1.0f);
    q.upload(ones.data(), 2 * d * 4);
    k.upload(ones.data(), ones.size() * 4);
    v.upload(ones.data(), ones.size() * 4);
    AttentionArgs args;
    args.q = {&q, q_layout};
    args.k = {&k, kv_layout};
    args.v = {&v, kv_layout};
    args.out = {&o, q_layout};
    const AttentionPlan plan = plan_attention(ctx, args);
    REQUIRE(plan.workspace_bytes > 0);

    ctx.release_scratch();
    CHECK(ctx.memory_stats().scratch_bytes == 0);
    ctx.reset_peak_memory();
    const MemoryStats before = ctx.memory_stats();
    CHECK(before.peak_bytes == before.current_bytes);
    attention(ctx, args);
    const MemoryStats during = ctx.memory_stats();
    CHECK(during.scratch_bytes >= plan.workspace_bytes);  // kept for the next call
    CHECK(during.current_bytes == before.current_bytes + during.scratch_bytes);
    CHECK(during.peak_bytes >= before.current_bytes + plan.workspace_bytes);

    attention(ctx, args);  // reuses the scratch: nothing more allocated
    CHECK(ctx.memory_stats().current_bytes == during.current_bytes);

    ctx.release_scratch();
    const MemoryStats released = ctx.memory_stats();
    CHECK(released.scratch_bytes == 0);
    CHECK(released.current_bytes == before.current_bytes);
    std::vector<float> out(static_cast<std::size_t>(2 * d));
    o.download(out.data(), out.size() * 4);
    CHECK(out[0] == doctest::Approx(1.0f));  // the run itself was right (every V row is ones)
    test::expect_no_validation_messages();
  }
}
