// The fp64 CPU references of the serving layouts (vkattn/kv_cache.hpp, vkattn/varlen.hpp): a paged
// KV cache with optional append, and packed variable-length batches. Each builds every sequence's
// dense problem from its layout and hands it to reference::attention, so the softmax, the masks and
// the modifiers are the dense reference's, not a copy of them. With dropout, each sequence's mask is
// that of batch element b = the sequence's index, its queries and keys counted from the sequence's
// first (vkattn/dropout.hpp). Feed them values already rounded to
// the call's dtype, as reference::attention.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "vkattn/kv_cache.hpp"
#include "vkattn/reference.hpp"
#include "vkattn/types.hpp"
#include "vkattn/varlen.hpp"

namespace vkattn::reference {

// K or V data: f32 values (KvQuant::none; element i is index i of the layout) or q8_0 bytes
// (KvQuant::q8_0; dequantized first, dequantize_q8_0, so value i is again index i).
struct KvData {
  std::span<const float> values;
  std::span<const uint8_t> q8_0;
};

struct PagedInputs : PerHeadValues {  // the per-head tensors (vkattn/per_head.hpp)
  TensorLayout q_layout;  // (batch, heads, seq_q, dim_qk)
  std::span<const float> q;
  PagedKvLayout k_cache_layout, v_cache_layout;
  KvData k_cache, v_cache;
  int64_t max_pages = 0;
  std::span<const int32_t> block_table;  // (batch, max_pages), row-major
  std::span<const int32_t> cache_lens;   // (batch): tokens already in the cache
  // Appended keys and values (batch, kv_heads, seq_new, dim), both or neither; f32 values. A q8_0
  // cache receives them quantized (quantize_q8_0: NaN/Inf refused).
  std::optional<TensorLayout> k_new_layout, v_new_layout;
  std::span<const float> k_new, v_new;
  AttentionOptions options;
};

struct PagedOutputs : Outputs {
  // out (batch, heads, seq_q, dim_v) and lse (batch, heads, seq_q) as reference::attention's; seq_k
  // is 0 and no weights (each sequence has its own key count).
  // The caches' values after the append, what an appending kernel must leave (f32, dense, as
  // PagedKvLayout indexes them; a q8_0 cache dequantized). Copies of the inputs without an append.
  std::vector<float> k_cache, v_cache;
};

// Checks like check_paged_attention and check_paged_values (throws vkattn::Error), then computes O
// and LSE of every sequence.
PagedOutputs paged_attention(const PagedInputs& inputs);

struct VarlenInputs : PerHeadValues {  // the per-head tensors (vkattn/per_head.hpp)
  TensorLayout q_layout, k_layout, v_layout;  // packed (batch 1, seq = total rows): packed_layout()
  std::span<const float> q;
  KvQuant kv_quant = KvQuant::none;
  KvData k, v;
  std::span<const int32_t> cu_seqlens_q, cu_seqlens_k;  // (batch + 1) each
  AttentionOptions options;
  bool weights = false;  // also return the weights P
};

struct VarlenOutputs {
  int64_t total_q = 0, heads = 0, dim_v = 0;
  std::vector<double> out;  // (total_q, heads, dim_v), dense
  std::vector<double> lse;  // (heads, total_q), dense (FlashAttention's varlen layout)
  double at(int64_t row, int64_t h, int64_t d) const {
    return out[static_cast<std::size_t>((row * heads + h) * dim_v + d)];
  }
  double lse_at(int64_t h, int64_t row) const { return lse[static_cast<std::size_t>(h * total_q + row)]; }
  // With VarlenInputs::weights: (heads, total_q, total_k), dense (vkattn/varlen.hpp): each row's
  // sequence's weights in its keys' columns, exactly 0 elsewhere.
  int64_t total_k = 0;
  std::vector<double> weights;
};

// Checks like check_varlen_attention and check_cu_seqlens (throws vkattn::Error; the batch is
// cu_seqlens_q.size() - 1), then computes O and LSE of every sequence.
VarlenOutputs varlen_attention(const VarlenInputs& inputs);

}  // namespace vkattn::reference
