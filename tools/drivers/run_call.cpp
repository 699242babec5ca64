#include "run_call.hpp"

#include <optional>
#include <type_traits>
#include <variant>

#include "run_inputs.hpp"
#include "weights_budget.hpp"
#include "vkattn/attention.hpp"
#include "vkattn/attention_backward.hpp"

namespace vkattn::cli {
namespace {

Buffer upload_ints(Context& context, std::span<const int32_t> values) {
  Buffer b = allocate_at_least(context, values.size_bytes());
  if (!values.empty()) b.upload(values.data(), values.size_bytes());
  return b;
}

std::vector<std::byte> download_bytes(const Buffer& buffer, uint64_t bytes) {
  std::vector<std::byte> raw(bytes);
  if (bytes) buffer.download(raw.data(), bytes);
  return raw;
}

std::vector<float> download_floats(const Buffer& buffer, uint64_t count) {
  std::vector<float> values(count);
  if (count) buffer.download(values.data(), count * sizeof(float));
  return values;
}

// A paged cache's bytes (read_kv is for what an append wrote into it).
uint64_t cache_bytes(const AttentionSpec& spec, bool is_k) {
  const auto* paged = std::get_if<PagedKv>(&spec.kv);
  return paged ? uint64_t((is_k ? paged->k_cache : paged->v_cache).required_bytes()) : 0;
}

// All of P, (batch, heads, seq_q, seq_k), which the call writes whatever part of it is read back.
uint64_t all_weights_bytes(const AttentionSpec& spec) {
  const int64_t seq_k = std::visit(
      [](const auto& kv) -> int64_t {
        if constexpr (std::is_same_v<std::decay_t<decltype(kv)>, PagedKv>) return 0;  // (no weights: refused)
        else return kv.k.seq;
      },
      spec.kv);
  return weights_bytes(spec.out.batch, spec.out.heads, spec.out.seq, seq_k);
}

}  // namespace

void bind_source_ints(const AttentionSpec& spec, const Buffer& a, const Buffer& b, AttentionBuffers& buffers) {
  if (std::holds_alternative<PagedKv>(spec.kv)) buffers.block_table = {&a, 0}, buffers.cache_lens = {&b, 0};
  if (std::holds_alternative<PackedKv>(spec.kv)) buffers.cu_seqlens_q = {&a, 0}, buffers.cu_seqlens_k = {&b, 0};
}

CallResults run_call(Context& context, const AttentionSpec& spec, const CallValues& values, uint64_t weight_elements,
                     bool read_kv) {
  const PreparedAttention prepared(context, spec);
  // The backward's refusals (a paged cache, q8_0) come before anything is allocated too.
  std::optional<PreparedAttentionBackward> backward;
  if (!values.grad_out.empty()) backward.emplace(context, spec);
  const DType dtype = spec.q.dtype;
  const uint64_t out_bytes = uint64_t(spec.out.element_count()) * dtype_size(dtype);
  const uint64_t rows = uint64_t(spec.out.batch * spec.out.heads * spec.out.seq);

  // K and V under --kv-dtype q8_0 as their blocks; else encoded in the dtype.
  Buffer q = upload_encoded(context, dtype, values.q);
  Buffer k = upload_kv(context, dtype, spec.kv_quant, values.k, values.k_q8_0);
  Buffer v = upload_kv(context, dtype, spec.kv_quant, values.v, values.v_q8_0);
  Buffer out = allocate_at_least(context, out_bytes);
  Buffer source_a = upload_ints(context, values.source_a), source_b = upload_ints(context, values.source_b);
  // Optional buffers as std::optional: a Buffer is only ever a live allocation.
  std::optional<Buffer> lse, weights, mask, kv_lengths, k_new, v_new;
  PerHead<std::optional<Buffer>> per_head;

  AttentionBuffers b;
  b.q = &q, b.k = &k, b.v = &v, b.out = &out;
  bind_source_ints(spec, source_a, source_b, b);
  if (const auto* paged = std::get_if<PagedKv>(&spec.kv); paged && paged->k_new) {
    b.k_new = &k_new.emplace(upload_encoded(context, dtype, values.k_new));
    b.v_new = &v_new.emplace(upload_encoded(context, dtype, values.v_new));
  }
  if (spec.mask) {
    b.mask = &mask.emplace(allocate_at_least(context, values.mask.size()));
    if (!values.mask.empty()) mask->upload(values.mask.data(), values.mask.size());
  }
  if (spec.kv_lengths) b.kv_lengths = {&kv_lengths.emplace(upload_ints(context, values.kv_lengths)), 0};
  if (spec.lse) b.lse = {&lse.emplace(allocate_at_least(context, rows * sizeof(float))), 0};
  if (spec.weights) b.weights = {&weights.emplace(allocate_at_least(context, all_weights_bytes(spec))), 0};
  if (values.per_head) b.per_head() = values.per_head->upload(context, per_head);
  prepared.run(b);

  CallResults r;
  if (backward) {
    const auto kv_layout = [&](bool is_k) {
      return std::visit(
          [&](const auto& kv) -> TensorLayout {
            if constexpr (std::is_same_v<std::decay_t<decltype(kv)>, PagedKv>) return {};  // (refused above)
            else return is_k ? kv.k : kv.v;
          },
          spec.kv);
    };
    const auto bytes_of = [](const TensorLayout& t) { return uint64_t(t.required_elements()) * dtype_size(t.dtype); };
    const uint64_t q_bytes = bytes_of(spec.q), k_bytes = bytes_of(kv_layout(true)), v_bytes = bytes_of(kv_layout(false));
    Buffer grad_out = upload_encoded(context, dtype, values.grad_out);
    Buffer dq = allocate_at_least(context, q_bytes), dk = allocate_at_least(context, k_bytes), dv = allocate_at_least(context, v_bytes);
    std::optional<Buffer> dsinks;
    BackwardBuffers bb;
    bb.forward = b;
    bb.grad_out = &grad_out;
    bb.grad_q = &dq, bb.grad_k = &dk, bb.grad_v = &dv;
    if (spec.sinks) bb.grad_sinks = {&dsinks.emplace(allocate_at_least(context, uint64_t(spec.q.heads) * 4)), 0};
    backward->run(bb);
    r.grad_q = download_bytes(dq, q_bytes);
    r.grad_k = download_bytes(dk, k_bytes);
    r.grad_v = download_bytes(dv, v_bytes);
    if (dsinks) r.grad_sinks = download_floats(*dsinks, uint64_t(spec.q.heads));
  }
  r.out = download_bytes(out, out_bytes);
  if (lse) r.lse = download_floats(*lse, rows);
  if (weights) r.weights = download_floats(*weights, weight_elements);
  if (read_kv) r.k_after = download_bytes(k, cache_bytes(spec, true)), r.v_after = download_bytes(v, cache_bytes(spec, false));
  return r;
}

}  // namespace vkattn::cli
