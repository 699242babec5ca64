// The planned backward calls (PreparedAttentionBackward) of one Context, so that a training loop
// repeating the same shapes plans each once, as PlanCache does for the forward calls. Keyed by the
// forward's spec (spec_key: every field), bounded and thread-safe; planning runs outside the lock.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include <vkattn/attention_backward.hpp>

namespace vkattn::python {

class BackwardPlanCache {
 public:
  explicit BackwardPlanCache(std::size_t capacity) : capacity_(capacity) {}

  // The backward of a call of `spec` on `context`: the cached plan, or a new one (then cached).
  // Throws vkattn::Error as PreparedAttentionBackward's constructor does (nothing is cached then).
  std::shared_ptr<const PreparedAttentionBackward> get(Context& context, const AttentionSpec& spec);

 private:
  const std::size_t capacity_;
  std::mutex mutex_;
  // Emptied when full rather than kept in use order: a model's backward calls are a handful of
  // shapes, so a full cache means a caller sweeping shapes, which gains nothing from the old plans.
  std::unordered_map<std::string, std::shared_ptr<const PreparedAttentionBackward>> plans_;
};

}  // namespace vkattn::python
