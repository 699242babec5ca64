// vkattn.Context: a vkattn::Context and the plan cache of the calls made through it.
#pragma once

#include <pybind11/pybind11.h>

#include <vkattn/context.hpp>

#include "backward_plans.hpp"
#include "plan_cache.hpp"
#include "recycled_buffers.hpp"
#include "small_buffers.hpp"

namespace vkattn::python {

// How many planned calls one Context keeps: a model's handful of shapes with room to spare, while a
// caller sweeping shapes does not hold thousands of plans (each holds its dispatches, not tensors).
inline constexpr std::size_t kPlanCacheCapacity = 64;

struct PythonContext {
  explicit PythonContext(const ContextOptions& options) : context(options) {}
  Context context;
  PlanCache plans{kPlanCacheCapacity};
  SmallBuffers small_buffers;  // a KV-cache call's block table and lengths, reused
  std::shared_ptr<RecycledBuffers> recycled = std::make_shared<RecycledBuffers>();  // new outputs' Buffers
  BackwardPlanCache backward_plans{kPlanCacheCapacity};  // the autograd calls' backward passes
};

// vkattn.Context and vkattn.devices().
void register_context(pybind11::module_& module);

}  // namespace vkattn::python
