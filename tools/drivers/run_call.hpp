// What `vkattn run` does with a call once its inputs are read and checked, whatever its source of
// keys and values (the spec's KvSource: dense tensors, a paged cache, packed sequences): plans it
// (the library's refusals come from here, before anything is allocated), puts its tensors on the
// device, runs it once and downloads what it wrote. The sources' own files, checks and output files
// are cmd_run.cpp's (dense), run_paged.cpp's and run_varlen.cpp's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "per_head_options.hpp"
#include "vkattn/attention.hpp"
#include "vkattn/attention_spec.hpp"
#include "vkattn/context.hpp"

namespace vkattn::cli {

// The call's values, each given exactly when the spec has the tensor.
struct CallValues {
  std::span<const float> q, k, v;           // paged: K and V are the caches
  std::span<const uint8_t> k_q8_0, v_q8_0;  // spec.kv_quant q8_0: K and V as their blocks
  std::span<const std::byte> mask;          // spec.mask: its bytes
  std::span<const int32_t> kv_lengths;      // spec.kv_lengths
  // The source's int32 arrays: paged block_table and cache_lens, packed cu_seqlens_q and cu_seqlens_k.
  std::span<const int32_t> source_a, source_b;
  std::span<const float> k_new, v_new;  // paged with an append (PagedKv::k_new): the rows appended
  const PerHeadInputs* per_head = nullptr;
  // With dO (O's shape, in its layout's order): the backward pass after the forward (the spec has lse).
  std::span<const float> grad_out;
};

// What the call wrote.
struct CallResults {
  std::vector<std::byte> out;              // O's bytes in the dtype
  std::vector<float> lse;                  // spec.lse: (rows of O)
  std::vector<float> weights;              // spec.weights: P's first `weight_elements`
  std::vector<std::byte> k_after, v_after;  // `read_kv`: K's and V's buffers after the call (an append)
  // With CallValues::grad_out: dQ, dK and dV in the dtype at Q's, K's and V's layouts, and dsinks (heads)
  // when the spec has sinks.
  std::vector<std::byte> grad_q, grad_k, grad_v;
  std::vector<float> grad_sinks;
};

// A source's two int32 arrays as a call's buffers take them: paged block_table and cache_lens,
// packed cu_seqlens_q and cu_seqlens_k (nothing for dense keys and values). Shared with the bench.
void bind_source_ints(const AttentionSpec& spec, const Buffer& a, const Buffer& b, AttentionBuffers& buffers);

// Plans `spec` on `context` (and its backward pass, with values.grad_out), uploads `values`, runs the
// call once (then the backward) and downloads its outputs:
// `weight_elements` of P (all of it, or the heads a heatmap draws), and with `read_kv` K and V (a
// paged cache after its append). Throws the library's Error for a call it refuses.
CallResults run_call(Context& context, const AttentionSpec& spec, const CallValues& values,
                     uint64_t weight_elements = 0, bool read_kv = false);

}  // namespace vkattn::cli
