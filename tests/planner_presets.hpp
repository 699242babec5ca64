// What the planner tests share (unit_planner_presets.cpp, unit_planner_calls.cpp,
// unit_plan_steps.cpp): shapes on the device presets (conform/device_profiles.hpp) and check_plan,
// every limit of a device a plan must respect.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attention_plan.hpp"
#include "conform/device_profiles.hpp"

namespace vkattn::test::planner {

using conform::DeviceProfile;
using detail::FusedPlan;


struct Shape {
  std::string name;
  DType dtype = DType::f16;
  int64_t batch = 1, heads = 16, kv_heads = 16, seq_q = 512, seq_k = 512, dim_qk = 128, dim_v = 128;
  Causal causal = Causal::none;
  bool bshd = false, lse = false, kv_lengths = false;
  bool mask = false;  // dense f16 (1, 1, seq_q, seq_k), broadcast over batch and heads
};

AttentionLayouts layouts_of(const Shape& s);
Shape shape(std::string name, DType dtype, int64_t batch, int64_t heads, int64_t kv_heads, int64_t seq_q, int64_t seq_k,
            int64_t dim_qk, int64_t dim_v);
// The grid of shapes every preset is planned for.
std::vector<Shape> shapes();

inline uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
// One line of a plan's tiles, splits, ranges, chunks and workspace, for failure messages.
std::string describe(const FusedPlan& p);

// Every limit the plan must respect on `preset`, and that it covers the whole problem.
void check_plan(const DeviceProfile& preset, const AttentionLayouts& l, const FusedPlan& plan);

// plan_fused refuses `l` on `device` as beyond what the device can do (ErrorCode::unsupported), with
// a message containing `part`.
void expect_unsupported(const DeviceInfo& device, KernelVariant v, const AttentionLayouts& l, const std::string& part);

}  // namespace vkattn::test::planner
