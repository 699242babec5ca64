// A small cache of planned calls (PreparedAttention), one per Context, so that a Python caller
// repeating the same shapes, dtypes and options plans once: the key is the whole AttentionSpec,
// written out field by field (spec_key). Bounded (least recently used out first) and thread-safe:
// planning runs outside the lock, so two threads planning different specs do not wait for each other
// (two planning the same spec at once both plan; the first to finish is kept).
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include <vkattn/attention.hpp>

namespace vkattn::python {

// The spec as text: every field of AttentionSpec, its layouts and its options (a field added to them
// must be added here, or two specs differing in it would share a plan). Two specs with the same key
// plan the same.
std::string spec_key(const AttentionSpec& spec);

struct PlanCacheStats {
  std::size_t size = 0, capacity = 0;
  uint64_t hits = 0, misses = 0;
};

class PlanCache {
 public:
  explicit PlanCache(std::size_t capacity) : capacity_(capacity) {}

  // The prepared call of `spec` on `context`: the cached one, or a new one (then cached). Throws
  // vkattn::Error as PreparedAttention's constructor does (nothing is cached then).
  std::shared_ptr<const PreparedAttention> get(Context& context, const AttentionSpec& spec);

  PlanCacheStats stats() const;
  void clear();

 private:
  using Entry = std::pair<std::string, std::shared_ptr<const PreparedAttention>>;
  const std::size_t capacity_;
  mutable std::mutex mutex_;
  std::list<Entry> recent_;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> by_key_;
  uint64_t hits_ = 0, misses_ = 0;
};

}  // namespace vkattn::python
