// DispatchProfile: every dispatch of a profiled call comes back labelled with its pipeline, in
// recording order and with a sane GPU time; the pipelines built meanwhile come back with their build
// time; a profile that is full, or work never submitted, leaves calls out rather than hanging or
// reporting garbage; one profile per Context.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <optional>
#include <set>
#include <vector>

#include "command_buffer.hpp"
#include "support.hpp"

using namespace vkattn;
using namespace vkattn::test;

namespace {

// A small prefill call with odd sizes and its buffers (inputs 0.25, outputs left as allocated).
struct SmallCall {
  AttentionArgs args;
  std::optional<Buffer> q, k, v, out;
  SmallCall(Context& ctx, int64_t seq_q, int64_t seq_k) {
    const TensorLayout ql = TensorLayout::bhsd(DType::f32, 1, 3, seq_q, 24), kl = TensorLayout::bhsd(DType::f32, 1, 3, seq_k, 24);
    const auto filled = [&](const TensorLayout& t) {
      std::vector<float> values(static_cast<std::size_t>(t.required_elements()), 0.25f);
      Buffer b = Buffer::allocate(ctx, values.size() * 4);
      b.upload(values.data(), values.size() * 4);
      return b;
    };
    q.emplace(filled(ql));
    k.emplace(filled(kl));
    v.emplace(filled(kl));
    out.emplace(Buffer::allocate(ctx, static_cast<uint64_t>(ql.required_elements()) * 4));
    args.q = {&*q, ql};
    args.k = {&*k, kl};
    args.v = {&*v, kl};
    args.out = {&*out, ql};
  }
};

}  // namespace

TEST_SUITE("dispatch-profile") {
  TEST_CASE("Context::pipeline_builds lists the pipelines built, in build order, from any point") {
    // Without a profile and on any device (no timestamps needed): what vkattn prepare prints.
    Context& ctx = context();
    const std::size_t before = ctx.pipeline_count();
    SmallCall call(ctx, 29, 41);
    const PreparedAttention prepared(ctx, AttentionSpec::of(call.args));  // builds its pipelines, if new
    const std::size_t after = ctx.pipeline_count();
    const std::vector<PipelineBuild> all = ctx.pipeline_builds();
    REQUIRE(all.size() == after);
    for (std::size_t i = 0; i < all.size(); ++i) {
      CHECK(all[i].pipeline_id == i);
      CHECK(all[i].pipeline.find("unknown") == std::string::npos);
      CHECK(all[i].ms >= 0);
    }
    const std::vector<PipelineBuild> since = ctx.pipeline_builds(before);
    REQUIRE(since.size() == after - before);
    for (std::size_t i = 0; i < since.size(); ++i) {
      CHECK(since[i].pipeline == all[before + i].pipeline);
      CHECK(since[i].pipeline_id == before + i);
    }
    CHECK(ctx.pipeline_builds(after + 3).empty());
  }

  TEST_CASE("a profiled call reports each dispatch with its pipeline, in order, and the pipelines built") {
    Context& ctx = context();
    if (!ctx.device_info().timestamps) return;
    SmallCall call(ctx, 37, 53);
    const std::size_t before = ctx.pipeline_count();
    DispatchProfile profile(ctx);
    const PreparedAttention prepared(ctx, AttentionSpec::of(call.args));  // builds its pipelines, if new
    const std::size_t after = ctx.pipeline_count();
    const std::vector<PipelineBuild> builds = profile.builds();
    REQUIRE(builds.size() == after - before);
    for (std::size_t i = 0; i < builds.size(); ++i) {
      CHECK(builds[i].pipeline_id == before + i);
      CHECK(builds[i].pipeline == ctx.pipeline_builds(before).at(i).pipeline);
      CHECK(builds[i].pipeline.find("unknown") == std::string::npos);
      CHECK(builds[i].ms >= 0);
    }

    const AttentionBuffers buffers = AttentionBuffers::of(call.args);
    const auto start = std::chrono::steady_clock::now();
    prepared.run(buffers);
    const double host_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    prepared.run(buffers);
    const std::vector<DispatchTime> times = profile.collect();
    REQUIRE(!times.empty());
    std::vector<DispatchTime> first, second;
    for (const DispatchTime& t : times) {
      REQUIRE(t.call <= 1);
      (t.call == 0 ? first : second).push_back(t);
      CHECK(t.pipeline.find("unknown") == std::string::npos);
      CHECK(t.pipeline_id < after);
      CHECK(std::isfinite(t.ms));
      CHECK(t.ms >= 0);
    }
    REQUIRE(first.size() == second.size());
    double first_ms = 0;
    for (std::size_t i = 0; i < first.size(); ++i) {
      CHECK(first[i].pipeline_id == second[i].pipeline_id);
      CHECK(first[i].pipeline == second[i].pipeline);
      first_ms += first[i].ms;
    }
    CHECK_MESSAGE(first_ms <= host_ms + 1.0, "the dispatches' GPU time (" << first_ms
                                                 << " ms) exceeds the run's host time (" << host_ms << " ms)");
    CHECK(profile.collect().empty());  // collect() starts afresh
    CHECK(profile.unprofiled_calls() == 0);
    expect_no_validation_messages();
  }

  TEST_CASE("a full profile leaves calls out; work never submitted is left out; one profile per Context") {
    Context& ctx = context();
    if (!ctx.device_info().timestamps) return;
    SmallCall call(ctx, 5, 300);
    const PreparedAttention prepared(ctx, AttentionSpec::of(call.args));
    const AttentionBuffers buffers = AttentionBuffers::of(call.args);
    uint32_t dispatches = 0;
    {
      DispatchProfile profile(ctx);
      CHECK(contains(error_message([&] { DispatchProfile another(ctx); }), "another profile is already active"));
      prepared.run(buffers);
      dispatches = static_cast<uint32_t>(profile.collect().size());
    }
    REQUIRE(dispatches > 0);
    {
      DispatchProfile full(ctx, dispatches);  // room for one call
      prepared.run(buffers);
      prepared.run(buffers);
      const std::vector<DispatchTime> times = full.collect();
      CHECK(times.size() == dispatches);
      for (const DispatchTime& t : times) CHECK(t.call == 0);
      CHECK(full.unprofiled_calls() == 1);
    }
    {
      DispatchProfile profile(ctx);
      TestCommandBuffer cmd(ctx);
      Buffer workspace = Buffer::allocate(ctx, std::max<uint64_t>(prepared.workspace_bytes(), 16));
      prepared.record(cmd.cmd(), buffers, {&workspace, 0});
      cmd.end();  // never submitted: its timestamps never become available
      CHECK(profile.collect().empty());
    }
    CHECK(contains(error_message([&] { DispatchProfile none(ctx, 0); }), "max_dispatches (0)"));
    expect_no_validation_messages();
  }
}
