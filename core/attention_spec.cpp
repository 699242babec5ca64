// AttentionSpec and its sources' family layouts: one spec for every source, seen by the checks and
// the planner as the layouts of the source it names.
#include "vkattn/attention_spec.hpp"

#include <string>

#include "vkattn/error.hpp"

namespace vkattn {
namespace {

template <typename Source>
const Source& source_of(const AttentionSpec& spec, const char* wanted) {
  if (const Source* s = std::get_if<Source>(&spec.kv)) return *s;
  throw Error(std::string("kv: the spec's source is ") + to_string(spec.kv) + ", not " + wanted);
}

// An optional tensor the spec gives that its source takes no such tensor for.
void refuse(bool given, const char* name, const char* source, const char* why) {
  if (given) throw Error(std::string(name) + ": a " + source + " call takes none (" + why + ")");
}

}  // namespace

const char* to_string(const KvSource& source) {
  switch (source.index()) {
    case 0: return "dense";
    case 1: return "paged";
    default: return "packed";
  }
}

AttentionSpec AttentionSpec::dense(const AttentionLayouts& l, bool weights, AttentionPath path) {
  AttentionSpec spec;
  spec.q = l.q;
  spec.kv = DenseKv{l.k, l.v};
  spec.out = l.out;
  spec.options = l.options;
  spec.per_head() = l.per_head();
  spec.mask = l.mask;
  spec.kv_lengths = l.has_kv_lengths;
  spec.lse = l.has_lse;
  spec.weights = weights;
  spec.kv_quant = l.kv_quant;
  spec.path = path;
  return spec;
}

AttentionSpec AttentionSpec::paged(const PagedAttentionLayouts& l) {
  AttentionSpec spec;
  spec.q = l.q;
  spec.kv = PagedKv{l.k_cache, l.v_cache, l.max_pages, l.k_new, l.v_new, l.shared_prefix_pages};
  spec.out = l.out;
  spec.options = l.options;
  spec.per_head() = l.per_head();
  spec.lse = l.has_lse;
  spec.kv_quant = l.k_cache.quant;
  spec.path = l.path;
  return spec;
}

AttentionSpec AttentionSpec::packed(const VarlenAttentionLayouts& l) {
  AttentionSpec spec;
  spec.q = l.q;
  spec.kv = PackedKv{l.k, l.v, l.batch, l.max_seqlen_q, l.max_seqlen_k};
  spec.out = l.out;
  spec.options = l.options;
  spec.per_head() = l.per_head();
  spec.lse = l.has_lse;
  spec.weights = l.weights;
  spec.kv_quant = l.kv_quant;
  spec.path = l.path;
  return spec;
}

AttentionLayouts AttentionSpec::dense_layouts() const {
  const DenseKv& kv_tensors = source_of<DenseKv>(*this, "dense");
  AttentionLayouts l;
  l.q = q;
  l.k = kv_tensors.k;
  l.v = kv_tensors.v;
  l.out = out;
  l.mask = mask;
  l.has_kv_lengths = kv_lengths;
  l.has_lse = lse;
  l.options = options;
  l.per_head() = per_head();
  l.kv_quant = kv_quant;
  return l;
}

PagedAttentionLayouts AttentionSpec::paged_layouts() const {
  const PagedKv& cache = source_of<PagedKv>(*this, "paged");
  const char* why_lengths = "its sequences end at their cache lengths";
  refuse(mask.has_value(), "mask", "paged", why_lengths);
  refuse(kv_lengths, "kv_lengths", "paged", why_lengths);
  refuse(weights, "weights", "paged", "it does not return the weights P");
  if (kv_quant != cache.k_cache.quant)
    throw Error(std::string("kv_quant (") + to_string(kv_quant) + ") must equal k_cache.quant (" +
                to_string(cache.k_cache.quant) + ")");
  PagedAttentionLayouts l;
  l.q = q;
  l.k_cache = cache.k_cache;
  l.v_cache = cache.v_cache;
  l.max_pages = cache.max_pages;
  l.k_new = cache.k_new;
  l.v_new = cache.v_new;
  l.shared_prefix_pages = cache.shared_prefix_pages;
  l.path = path;
  l.out = out;
  l.has_lse = lse;
  l.options = options;
  l.per_head() = per_head();
  return l;
}

VarlenAttentionLayouts AttentionSpec::packed_layouts() const {
  const PackedKv& packed = source_of<PackedKv>(*this, "packed");
  const char* why_lengths = "its sequences end at their offsets, cu_seqlens_k";
  refuse(mask.has_value(), "mask", "packed", why_lengths);
  refuse(kv_lengths, "kv_lengths", "packed", why_lengths);
  VarlenAttentionLayouts l;
  l.q = q;
  l.k = packed.k;
  l.v = packed.v;
  l.out = out;
  l.kv_quant = kv_quant;
  l.batch = packed.batch;
  l.max_seqlen_q = packed.max_seqlen_q;
  l.max_seqlen_k = packed.max_seqlen_k;
  l.has_lse = lse;
  l.weights = weights;
  l.path = path;
  l.options = options;
  l.per_head() = per_head();
  return l;
}

}  // namespace vkattn
