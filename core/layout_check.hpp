// The per-tensor rules of check_attention (core/problem.cpp), for the checks of other layouts
// (paged caches, appended keys, packed batches) that hold tensors of their own: the same rules, the
// same messages, each naming the tensor it is given.
#pragma once

#include "vkattn/types.hpp"

namespace vkattn::detail {

// Every size >= 1, strides and offset >= 0, the last element within 2^62. Throws Error naming
// `name` and the field.
void check_tensor_layout(const char* name, const TensorLayout& t);

// A q8_0 tensor (KvQuant::q8_0) cuts its element indices into blocks of 32: dim, the strides and the
// offset must be multiples of 32, so that every row starts a block. Throws Error naming `name`.
void check_q8_0_layout(const char* name, const TensorLayout& t);

// ALiBi slopes (heads) or (batch, heads) when per_batch_allowed, sinks (heads); offset >= 0.
void check_head_values_layout(const char* name, const HeadValuesLayout& l, int64_t batch, int64_t heads,
                              bool per_batch_allowed);

}  // namespace vkattn::detail
