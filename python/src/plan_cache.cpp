#include "plan_cache.hpp"

#include <sstream>
#include <type_traits>
#include <variant>

namespace vkattn::python {

namespace {

// Floats are written in full precision (hexfloat): 0.1 and 0.10000001 are different plans.
template <class T>
void put(std::ostringstream& out, const std::optional<T>& value) {
  if (value) {
    out << *value << ' ';
  } else {
    out << "- ";
  }
}

void put(std::ostringstream& out, const TensorLayout& t) {
  out << "T" << static_cast<int>(t.dtype) << ' ' << t.batch << ' ' << t.heads << ' ' << t.seq << ' ' << t.dim << ' '
      << t.stride_batch << ' ' << t.stride_head << ' ' << t.stride_seq << ' ' << t.offset << ' ';
}

void put(std::ostringstream& out, const std::optional<TensorLayout>& t) {
  if (t) {
    put(out, *t);
  } else {
    out << "- ";
  }
}

void put(std::ostringstream& out, const PagedKvLayout& l) {
  out << "P" << static_cast<int>(l.dtype) << ' ' << static_cast<int>(l.quant) << ' ' << l.num_pages << ' '
      << l.page_size << ' ' << l.kv_heads << ' ' << l.dim << ' ' << static_cast<int>(l.order) << ' ' << l.row_stride << ' ';
}

void put(std::ostringstream& out, const KvSource& kv) {
  std::visit(
      [&](const auto& source) {
        using Source = std::decay_t<decltype(source)>;
        if constexpr (std::is_same_v<Source, DenseKv>) {
          out << "dense ";
          put(out, source.k);
          put(out, source.v);
        } else if constexpr (std::is_same_v<Source, PackedKv>) {
          out << "packed ";
          put(out, source.k);
          put(out, source.v);
          out << source.batch << ' ' << source.max_seqlen_q << ' ' << source.max_seqlen_k << ' ';
        } else {
          out << "paged ";
          put(out, source.k_cache);
          put(out, source.v_cache);
          out << source.max_pages << ' ' << source.shared_prefix_pages << ' ';
          put(out, source.k_new);
          put(out, source.v_new);
        }
      },
      kv);
}

void put(std::ostringstream& out, const AttentionOptions& o) {
  put(out, o.scale);
  out << static_cast<int>(o.causal) << ' ';
  if (o.window) {
    out << "w" << o.window->left << ':' << o.window->right << ' ';
  } else {
    out << "- ";
  }
  if (o.align) {
    out << static_cast<int>(*o.align) << ' ';
  } else {
    out << "- ";
  }
  put(out, o.softcap);
  out << o.num_splits << ' ';
  if (o.dropout) {
    out << "d" << o.dropout->p << ' ' << o.dropout->seed << ' ' << o.dropout->offset << ' ';
  } else {
    out << "- ";
  }
}

void put(std::ostringstream& out, const std::optional<MaskLayout>& m) {
  if (!m) {
    out << "- ";
    return;
  }
  out << "M" << static_cast<int>(m->type) << ' ' << m->batch << ' ' << m->heads << ' ' << m->seq_q << ' '
      << m->seq_k << ' ' << m->stride_batch << ' ' << m->stride_head << ' ' << m->stride_q << ' ' << m->offset << ' ';
}

void put(std::ostringstream& out, const std::optional<HeadValuesLayout>& l) {
  if (l) {
    out << "H" << l->batch << ' ' << l->heads << ' ' << l->offset << ' ';
  } else {
    out << "- ";
  }
}

}  // namespace

std::string spec_key(const AttentionSpec& spec) {
  std::ostringstream out;
  out << std::hexfloat;
  put(out, spec.q);
  put(out, spec.kv);
  put(out, spec.out);
  put(out, spec.options);
  put(out, spec.mask);
  out << spec.kv_lengths << spec.lse << spec.weights << ' ' << static_cast<int>(spec.kv_quant) << ' '
      << static_cast<int>(spec.path) << ' ';
  for (PerHeadTensor t : kPerHeadTensors) put(out, spec[t]);
  return out.str();
}

std::shared_ptr<const PreparedAttention> PlanCache::get(Context& context, const AttentionSpec& spec) {
  const std::string key = spec_key(spec);
  {
    std::lock_guard lock(mutex_);
    if (auto found = by_key_.find(key); found != by_key_.end()) {
      ++hits_;
      recent_.splice(recent_.begin(), recent_, found->second);
      return found->second->second;
    }
    ++misses_;
  }
  // Planning builds pipelines (seconds on lavapipe): outside the lock.
  auto prepared = std::make_shared<const PreparedAttention>(context, spec);
  std::lock_guard lock(mutex_);
  if (auto found = by_key_.find(key); found != by_key_.end()) return found->second->second;
  recent_.emplace_front(key, prepared);
  by_key_[key] = recent_.begin();
  while (recent_.size() > capacity_) {
    by_key_.erase(recent_.back().first);
    recent_.pop_back();
  }
  return prepared;
}

PlanCacheStats PlanCache::stats() const {
  std::lock_guard lock(mutex_);
  return {recent_.size(), capacity_, hits_, misses_};
}

void PlanCache::clear() {
  std::lock_guard lock(mutex_);
  recent_.clear();
  by_key_.clear();
}

}  // namespace vkattn::python
