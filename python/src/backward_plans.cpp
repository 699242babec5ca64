#include "backward_plans.hpp"

#include "plan_cache.hpp"

namespace vkattn::python {

std::shared_ptr<const PreparedAttentionBackward> BackwardPlanCache::get(Context& context, const AttentionSpec& spec) {
  const std::string key = spec_key(spec);
  {
    std::lock_guard lock(mutex_);
    if (auto found = plans_.find(key); found != plans_.end()) return found->second;
  }
  auto planned = std::make_shared<const PreparedAttentionBackward>(context, spec);
  std::lock_guard lock(mutex_);
  if (plans_.size() >= capacity_) plans_.clear();
  return plans_.try_emplace(key, std::move(planned)).first->second;
}

}  // namespace vkattn::python
