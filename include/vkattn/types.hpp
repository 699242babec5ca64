// Element types, causal alignments and tensor layouts: the vocabulary shared by the API, the CPU
// reference and the Vulkan runtime. Nothing here depends on Vulkan.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace vkattn {

// Storage type of Q, K, V and O. Arithmetic is always f32 (scores, running max/sum, accumulator).
enum class DType { f32, f16, bf16 };

std::size_t dtype_size(DType dtype);
const char* to_string(DType dtype);
// Parses "f32" | "f16" | "bf16" (also "float32", "float16", "bfloat16"); throws Error otherwise.
DType parse_dtype(std::string_view name);

// Causal masking. top_left: key j is visible to query i when j <= i (PyTorch is_causal).
// bottom_right: j <= i + seq_k - seq_q (FlashAttention >= 2.1, KV-cache decoding).
// The two agree when seq_q == seq_k.
enum class Causal { none, top_left, bottom_right };

const char* to_string(Causal causal);
// Parses "none" | "top-left" | "bottom-right"; throws Error otherwise.
Causal parse_causal(std::string_view name);

// The alignment of the diagonal that causal masking, a sliding window and ALiBi measure from: query
// i sits at key i + off, off = 0 (top_left) or seq_k - seq_q (bottom_right).
enum class Align { top_left, bottom_right };

const char* to_string(Align align);
// Parses "top-left" | "bottom-right"; throws Error otherwise.
Align parse_align(std::string_view name);

// A sliding window around the diagonal: key j is visible to query i iff
// i + off - left <= j <= i + off + right (off: the call's Align). Either side -1 = unbounded.
struct Window {
  int64_t left = -1, right = -1;
};

// A 4-D tensor (batch, heads, seq, dim) in a buffer, with element strides for the first three
// dimensions; the last dimension is contiguous. `offset` is in elements from the start of the buffer
// (or buffer slice) the tensor lives in. A (batch, seq, heads, dim) array is described in place by
// TensorLayout::bshd, without a copy.
struct TensorLayout {
  DType dtype = DType::f32;
  int64_t batch = 0, heads = 0, seq = 0, dim = 0;
  int64_t stride_batch = 0, stride_head = 0, stride_seq = 0;
  int64_t offset = 0;

  // Densely packed (batch, heads, seq, dim).
  static TensorLayout bhsd(DType dtype, int64_t batch, int64_t heads, int64_t seq, int64_t dim);
  // Densely packed (batch, seq, heads, dim), viewed as BHSD.
  static TensorLayout bshd(DType dtype, int64_t batch, int64_t seq, int64_t heads, int64_t dim);

  int64_t element_count() const { return batch * heads * seq * dim; }
  // Index of element (b, h, s, d), offset included.
  int64_t index(int64_t b, int64_t h, int64_t s, int64_t d) const {
    return offset + b * stride_batch + h * stride_head + s * stride_seq + d;
  }
  // Elements a buffer must hold from its start for this layout: the last element's index + 1
  // (0 for an empty tensor).
  int64_t required_elements() const;
  std::string describe() const;  // "f16 (2, 8, 128, 64) strides (..)"
};

// Element type of an explicit attention mask. boolean: one byte per element, nonzero = attend
// (PyTorch SDPA's convention). f32 / f16: added to the scaled score (saturating to +-FLT_MAX);
// -inf masks, +inf propagates like any Inf input (NaN row).
enum class MaskType { boolean, f32, f16 };

std::size_t mask_type_size(MaskType type);
const char* to_string(MaskType type);

// An explicit mask of logical shape (batch, heads, seq_q, seq_k) where batch is 1 or B and heads is
// 1 or H (broadcast like PyTorch). Element strides for batch, head and query row; keys contiguous.
// A broadcast dimension may have stride 0. `offset` is in elements.
struct MaskLayout {
  MaskType type = MaskType::boolean;
  int64_t batch = 1, heads = 1, seq_q = 0, seq_k = 0;
  int64_t stride_batch = 0, stride_head = 0, stride_q = 0;
  int64_t offset = 0;

  // A dense (batch, heads, seq_q, seq_k) mask; pass batch = heads = 1 for a 2-D (seq_q, seq_k) mask.
  static MaskLayout dense(MaskType type, int64_t batch, int64_t heads, int64_t seq_q, int64_t seq_k);
  int64_t index(int64_t b, int64_t h, int64_t i, int64_t j) const {
    return offset + (batch == 1 ? 0 : b * stride_batch) + (heads == 1 ? 0 : h * stride_head) +
           i * stride_q + j;
  }
  int64_t required_elements() const;
  std::string describe() const;
};

// Which kernels compute attention (docs/design.md, "How it works").
//   fused:     one flash-style pass; memory O(seq_q + seq_k), never the (seq_q, seq_k) scores.
//   unfused:   the three-stage path (scores Q·Kᵀ, masked row softmax, P·V); materialises the weights
//              P (batch, heads, seq_q, seq_k) in f32, so its memory grows with seq_q·seq_k.
//   automatic: unfused when the weights P are requested, else fused.
enum class AttentionPath { automatic, fused, unfused };

const char* to_string(AttentionPath path);  // "auto" | "fused" | "unfused"
// Parses "auto" | "fused" | "unfused"; throws Error otherwise.
AttentionPath parse_attention_path(std::string_view name);

// Per-head f32 values of a score modifier (ALiBi slopes, attention-sink logits): dense (heads) when
// batch is 1 (shared by every batch), or (batch, heads). `offset` is in elements.
struct HeadValuesLayout {
  int64_t batch = 1, heads = 0;
  int64_t offset = 0;

  int64_t required_elements() const { return offset + batch * heads; }
  // Index of the value of (b, h), offset included.
  int64_t index(int64_t b, int64_t h) const { return offset + (batch == 1 ? 0 : b * heads) + h; }
  std::string describe() const;  // "(8)" or "(2, 8)"
};

// How K and V (a KV cache, packed K/V) are stored. none: as the call's dtype (q's). q8_0: ggml's
// 8-bit blocks (vkattn/q8_0.hpp): the tensor's element indices, strides and offset included, are cut
// into blocks of 32, element e being value e % 32 of block e / 32 (34 bytes each); Q and O keep the
// call's dtype, so with an f16 O, V's values d·q must stay within f16's range or O is Inf (see
// q8_0.hpp, "Range"; device values are not checked). Room for other 8-bit formats.
enum class KvQuant { none, q8_0 };

const char* to_string(KvQuant quant);  // "none" | "q8_0"

// Dropout's parameters (vkattn/dropout.hpp has the generator and which weights it keeps).
struct Dropout {
  float p = 0.0f;        // the probability that a weight is dropped, in [0, 1)
  uint64_t seed = 0;     // Philox's key
  uint32_t offset = 0;   // the counter's last word: another offset, another mask from the same seed
};

// Options that are not tensors. The score modifiers (docs/semantics.md, "Score modifiers") apply in this order
// to the score of query i and key j: s = scale * q.k -> softcap -> + ALiBi -> + float mask -> the
// boolean masks (causal, window, key lengths, bool mask) -> softmax, with the sink logit (a per-head
// tensor of the call, vkattn/per_head.hpp, as ALiBi's slopes are) in its denominator.
struct AttentionOptions {
  // Default 1/sqrt(dim_qk); any finite value. A score scale * (q . k) (+ float-mask bias) beyond
  // the f32 range saturates to +-FLT_MAX, so finite inputs never give NaN (docs/semantics.md).
  std::optional<float> scale;
  Causal causal = Causal::none;
  // Sliding window (each side >= 0, or -1 unbounded); absent: no window.
  std::optional<Window> window;
  // The alignment of the window and ALiBi without causal (default bottom_right, FlashAttention's);
  // with causal set, absent or equal to causal's.
  std::optional<Align> align;
  // Logit softcap c > 0 (finite): s = c * tanh(s / c) (Gemma 2). Absent: none. A score that is NaN
  // or infinite (from a NaN/Inf input) stays as it is, so such inputs still propagate.
  std::optional<float> softcap;
  // Split-KV: how many parts the fused path cuts each query tile's key range into, each part a
  // workgroup, merged by a combine pass (FlashAttention's num_splits). 0: chosen from the device
  // and the shape. A request: capped at the key tiles of the range, and raised where a device limit
  // needs more (lavapipe's loop limit, one storage binding). The three-stage path does not split.
  uint32_t num_splits = 0;
  // Dropout on the normalised weights P (PyTorch's and FlashAttention's dropout_p), vkattn/dropout.hpp:
  // O = (P∘Z)·V with Z = keep/(1-p), keep drawn per (batch, head, query, key) from Philox 4x32-10 keyed
  // by the seed and offset; the LSE and the weights P a call returns are not affected. Absent or p = 0:
  // none. p must be in [0, 1).
  std::optional<Dropout> dropout;
};

}  // namespace vkattn
