// Element types, causal alignments and tensor layouts: names, sizes and the shape math shared by the
// argument checks, the reference and the runtime.
#include "vkattn/types.hpp"

#include <sstream>
#include <string>

#include "vkattn/error.hpp"

namespace vkattn {
namespace {

// Dense strides of absurd shapes saturate instead of wrapping (signed overflow); check_attention
// then rejects them by their extent, with a message about sizes rather than negative strides.
int64_t saturating_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return INT64_MAX;
  return r;
}

}  // namespace

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return 4;
    case DType::f16:
    case DType::bf16:
      return 2;
  }
  throw Error("dtype: invalid value " + std::to_string(static_cast<int>(dtype)));
}

const char* to_string(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "f32";
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
  }
  return "invalid";
}

DType parse_dtype(std::string_view name) {
  if (name == "f32" || name == "float32") return DType::f32;
  if (name == "f16" || name == "float16") return DType::f16;
  if (name == "bf16" || name == "bfloat16") return DType::bf16;
  throw Error("dtype: unknown '" + std::string(name) + "' (expected f32, f16 or bf16)");
}

const char* to_string(Causal causal) {
  switch (causal) {
    case Causal::none:
      return "none";
    case Causal::top_left:
      return "top-left";
    case Causal::bottom_right:
      return "bottom-right";
  }
  return "invalid";
}

Causal parse_causal(std::string_view name) {
  if (name == "none") return Causal::none;
  if (name == "top-left") return Causal::top_left;
  if (name == "bottom-right") return Causal::bottom_right;
  throw Error("causal: unknown '" + std::string(name) + "' (expected none, top-left or bottom-right)");
}

const char* to_string(Align align) {
  switch (align) {
    case Align::top_left:
      return "top-left";
    case Align::bottom_right:
      return "bottom-right";
  }
  return "invalid";
}

Align parse_align(std::string_view name) {
  if (name == "top-left") return Align::top_left;
  if (name == "bottom-right") return Align::bottom_right;
  throw Error("align: unknown '" + std::string(name) + "' (expected top-left or bottom-right)");
}

std::string HeadValuesLayout::describe() const {
  std::ostringstream s;
  if (batch == 1) s << "(" << heads << ")";
  else s << "(" << batch << ", " << heads << ")";
  if (offset != 0) s << " offset " << offset;
  return s.str();
}

const char* to_string(AttentionPath path) {
  switch (path) {
    case AttentionPath::automatic:
      return "auto";
    case AttentionPath::fused:
      return "fused";
    case AttentionPath::unfused:
      return "unfused";
  }
  return "invalid";
}

AttentionPath parse_attention_path(std::string_view name) {
  if (name == "auto") return AttentionPath::automatic;
  if (name == "fused") return AttentionPath::fused;
  if (name == "unfused") return AttentionPath::unfused;
  throw Error("path: unknown '" + std::string(name) + "' (expected auto, fused or unfused)");
}

TensorLayout TensorLayout::bhsd(DType dtype, int64_t batch, int64_t heads, int64_t seq, int64_t dim) {
  TensorLayout l;
  l.dtype = dtype;
  l.batch = batch;
  l.heads = heads;
  l.seq = seq;
  l.dim = dim;
  l.stride_seq = dim;
  l.stride_head = saturating_mul(seq, dim);
  l.stride_batch = saturating_mul(heads, saturating_mul(seq, dim));
  return l;
}

TensorLayout TensorLayout::bshd(DType dtype, int64_t batch, int64_t seq, int64_t heads, int64_t dim) {
  TensorLayout l;
  l.dtype = dtype;
  l.batch = batch;
  l.heads = heads;
  l.seq = seq;
  l.dim = dim;
  l.stride_head = dim;
  l.stride_seq = saturating_mul(heads, dim);
  l.stride_batch = saturating_mul(seq, saturating_mul(heads, dim));
  return l;
}

int64_t TensorLayout::required_elements() const {
  if (batch <= 0 || heads <= 0 || seq <= 0 || dim <= 0) return 0;
  return index(batch - 1, heads - 1, seq - 1, dim - 1) + 1;
}

std::string TensorLayout::describe() const {
  std::ostringstream s;
  s << to_string(dtype) << " (" << batch << ", " << heads << ", " << seq << ", " << dim << ") strides ("
    << stride_batch << ", " << stride_head << ", " << stride_seq << ", 1)";
  if (offset != 0) s << " offset " << offset;
  return s.str();
}

const char* to_string(KvQuant quant) {
  switch (quant) {
    case KvQuant::none:
      return "none";
    case KvQuant::q8_0:
      return "q8_0";
  }
  return "invalid";
}

std::size_t mask_type_size(MaskType type) {
  switch (type) {
    case MaskType::boolean:
      return 1;
    case MaskType::f32:
      return 4;
    case MaskType::f16:
      return 2;
  }
  throw Error("mask type: invalid value " + std::to_string(static_cast<int>(type)));
}

const char* to_string(MaskType type) {
  switch (type) {
    case MaskType::boolean:
      return "bool";
    case MaskType::f32:
      return "f32";
    case MaskType::f16:
      return "f16";
  }
  return "invalid";
}

MaskLayout MaskLayout::dense(MaskType type, int64_t batch, int64_t heads, int64_t seq_q, int64_t seq_k) {
  MaskLayout l;
  l.type = type;
  l.batch = batch;
  l.heads = heads;
  l.seq_q = seq_q;
  l.seq_k = seq_k;
  l.stride_q = seq_k;
  l.stride_head = saturating_mul(seq_q, seq_k);
  l.stride_batch = saturating_mul(heads, saturating_mul(seq_q, seq_k));
  return l;
}

int64_t MaskLayout::required_elements() const {
  if (batch <= 0 || heads <= 0 || seq_q <= 0 || seq_k <= 0) return 0;
  // index() ignores the strides of broadcast (size 1) dims, so the last element's index is exact.
  return index(batch - 1, heads - 1, seq_q - 1, seq_k - 1) + 1;
}

std::string MaskLayout::describe() const {
  std::ostringstream s;
  s << to_string(type) << " (" << batch << ", " << heads << ", " << seq_q << ", " << seq_k << ") strides ("
    << stride_batch << ", " << stride_head << ", " << stride_q << ", 1)";
  if (offset != 0) s << " offset " << offset;
  return s.str();
}

}  // namespace vkattn
