// The GEMM operands of the layer's backward (mha_backward_prepared.cpp): the views of its arrays
// that let every product read them in place (gemm.hpp: C = alpha·A·Bᵀ with strides and column blocks).
//
// The projections live head-major, (heads, tokens, head_dim) with tokens = batch·seq: attention reads
// them per head at any stride, a projection's (tokens, features) matrix is its column blocks of
// head_dim, and its transpose per head is a plain strided matrix, so no product needs a transpose
// pass. In self-attention Q, K and V are one (H + 2·kv_heads, tokens, head_dim) array.
#pragma once

#include <algorithm>
#include <cstdint>

#include "gemm.hpp"
#include "vkattn/types.hpp"

namespace vkattn::detail::mha_backward {

// A row-major (rows, cols) matrix from element `at` of `slot`: (batch, seq, features) arrays as one
// (batch·seq) rows, and the weights.
inline GemmOperand dense(uint32_t slot, DType dtype, int64_t rows, int64_t cols, int64_t at = 0) {
  GemmOperand o;
  o.slot = slot, o.dtype = dtype;
  o.offset = at, o.end = at + std::max<int64_t>(rows * cols, 1);
  o.stride_row = cols;
  return o;
}

// The same matrix transposed: (cols, rows).
inline GemmOperand transposed(uint32_t slot, DType dtype, int64_t rows, int64_t cols, int64_t at = 0) {
  GemmOperand o = dense(slot, dtype, rows, cols, at);
  o.stride_row = 1, o.stride_col = cols;
  return o;
}

// A head-major (heads, tokens, D) array from element `at`, seen as the (tokens, heads·D) matrix:
// column c is head c / D's element c % D.
inline GemmOperand head_major(uint32_t slot, DType dtype, int64_t at, int64_t tokens, int64_t heads, int64_t D) {
  GemmOperand o;
  o.slot = slot, o.dtype = dtype;
  o.offset = at, o.end = at + std::max<int64_t>(heads * tokens * D, 1);
  o.stride_row = D;
  o.col_block = D, o.stride_block = tokens * D;
  return o;
}

// The same array per head (a GEMM's heads), transposed: (D, tokens) matrices.
inline GemmOperand per_head_transposed(uint32_t slot, DType dtype, int64_t at, int64_t tokens, int64_t heads, int64_t D) {
  GemmOperand o = head_major(slot, dtype, at, tokens, heads, D);
  o.col_block = 0, o.stride_block = 0;
  o.stride_head = tokens * D, o.stride_row = 1, o.stride_col = D;
  return o;
}

// A single element of `slot` read at every index (strides 0): a vector of ones when the slot holds a 1.
inline GemmOperand broadcast(uint32_t slot, DType dtype) {
  GemmOperand o;
  o.slot = slot, o.dtype = dtype, o.end = 1;
  o.stride_row = 0, o.stride_col = 0;
  return o;
}

// The head-major layout of `heads` heads from element `at`, as attention takes it: (b, h, s, d) at
// h·batch·seq·D + (b·seq + s)·D + d.
inline TensorLayout head_major_layout(DType dtype, int64_t at, int64_t batch, int64_t heads, int64_t seq, int64_t D) {
  TensorLayout t;
  t.dtype = dtype;
  t.batch = batch, t.heads = heads, t.seq = seq, t.dim = D;
  t.stride_batch = seq * D, t.stride_head = batch * seq * D, t.stride_seq = D;
  t.offset = at;
  return t;
}

inline GemmCall product(GemmOperand a, GemmOperand b, GemmOperand c, int64_t m, int64_t n, int64_t k) {
  GemmCall call;
  call.a = a, call.b = b, call.c = c;
  call.m = m, call.n = n, call.k = k;
  return call;
}

// C = 0 for a (rows, cols) matrix C, as a GEMM (1·1 times alpha 0, k = 1) so that it is a shader
// write like every other: what the caller's barriers after a record order. `one` holds a 1 in `dtype`.
inline GemmCall zeros(GemmOperand c, uint32_t one, DType dtype, int64_t rows, int64_t cols) {
  GemmCall call = product(broadcast(one, dtype), broadcast(one, dtype), c, rows, cols, 1);
  call.alpha = 0.0f;
  return call;
}

}  // namespace vkattn::detail::mha_backward
