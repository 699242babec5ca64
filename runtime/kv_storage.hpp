// K and V as stored (AttentionProblem::kv_quant): elements of the call's dtype, or ggml's q8_0 blocks
// (34 bytes per 32 elements). Every byte count and binding of K or V goes through here, so that the
// planner's fits, the buffer checks and the bindings agree on one size.
#pragma once

#include <cstdint>

#include "command_list.hpp"
#include "vkattn/q8_0.hpp"
#include "vkattn/types.hpp"

namespace vkattn::detail {

// Bytes of the first `elements` elements (a multiple of 32 for q8_0: whole blocks).
inline uint64_t kv_bytes(DType dtype, KvQuant quant, int64_t elements) {
  return quant == KvQuant::q8_0 ? uint64_t(elements) / kQ8_0BlockElements * kQ8_0BlockBytes
                                : uint64_t(elements) * dtype_size(dtype);
}

// The binding of elements [first, end) of K or V. q8_0 binds 16-bit units: the offset the kernel gets
// in its push word counts halfwords, and it forms element indices from the binding's first block
// (shaders/kv_values.glsl).
inline Binding kv_binding(uint32_t slot, DType dtype, KvQuant quant, int64_t first, int64_t end) {
  const uint64_t begin = kv_bytes(dtype, quant, first), bytes = kv_bytes(dtype, quant, end) - begin;
  const uint64_t unit = quant == KvQuant::q8_0 ? 2 : dtype_size(dtype);
  return Binding{slot, begin, unit, bytes / unit};
}

}  // namespace vkattn::detail
