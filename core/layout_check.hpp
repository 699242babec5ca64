// The per-tensor rules of check_attention (core/problem.cpp), for the checks of other layouts
// (paged caches, appended keys, packed batches) that hold tensors of their own: the same rules, the
// same messages, each naming the tensor it is given.
#pragma once

#include "vkattn/per_head.hpp"
#include "vkattn/types.hpp"

namespace vkattn::detail {

// Every size >= 1, strides and offset >= 0, the last element within 2^62. Throws Error naming
// `name` and the field.
void check_tensor_layout(const char* name, const TensorLayout& t);

// A q8_0 tensor (KvQuant::q8_0) cuts its element indices into blocks of 32: dim, the strides and the
// offset must be multiples of 32, so that every row starts a block. Throws Error naming `name`.
void check_q8_0_layout(const char* name, const TensorLayout& t);

// A per-head tensor: (heads), or (batch, heads) where allows_batch_rows(tensor); offset >= 0.
void check_head_values_layout(PerHeadTensor tensor, const HeadValuesLayout& l, int64_t batch, int64_t heads);

// Each given per-head tensor of a call of `batch` x `heads`.
void check_head_values_layouts(const PerHeadLayouts& layouts, int64_t batch, int64_t heads);

}  // namespace vkattn::detail
