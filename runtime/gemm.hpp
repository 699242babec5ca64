// The batched, strided GEMM of shaders/gemm.comp, C = alpha·A·Bᵀ (+ bias): the scores and the
// weighted sum of the three-stage attention path, and the projections of the multi-head layer.
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <optional>
#include <string>

#include "command_list.hpp"
#include "context_impl.hpp"
#include "shader_abi.hpp"
#include "vkattn/types.hpp"

namespace vkattn::detail {

// Flag bits of GemmPush::flags (shaders/shader_abi.h).
enum GemmFlags : uint32_t {
  kGemmBias = GEMM_FLAG_BIAS,
  kGemmSkipZeroA = GEMM_FLAG_SKIP_ZERO_A,
  kGemmBPagedRows = GEMM_FLAG_B_PAGED_ROWS,
  kGemmBPagedCols = GEMM_FLAG_B_PAGED_COLS,
};

// One matrix operand, per batch index (b, h): element (r, c) is at element index
//   offset + b*stride_batch + h'*stride_head + r*stride_row + (c / col_block)*stride_block + (c % col_block)*stride_col
// of command-list slot `slot` (counted from byte `base` of it), with h' = h for A and C and the KV head
// for B. col_block 0 means no blocks (one block as wide as the matrix).
struct GemmOperand {
  uint32_t slot = kPlaceholderSlot;
  uint64_t base = 0;  // byte offset in the slot of element index 0
  DType dtype = DType::f32;
  int64_t offset = 0;  // first element the operand reaches
  int64_t end = 0;     // one past the last element it reaches (the bound range)
  int64_t stride_batch = 0, stride_head = 0, stride_row = 0, stride_col = 1;
  int64_t col_block = 0, stride_block = 0;
};

// B a paged KV cache read through its block table (the three-stage path over a paged cache; the
// GEMM_FLAG_B_PAGED_* bits): B's key x of matrix batch b is row x % page_size of page
// table[b * entries_per_batch + x / page_size] (clamped into [0, pages)), a page being page_elements
// elements from B's base; the key is B's row (the scores) or its column (P·V), strided by B's
// stride_row or stride_col. B's other index has no column blocks, its stride_batch is unused. Batch
// b's keys end at min(max(lengths[b], 0) + appended, capacity): the scores past them may be left
// unwritten (whole column tiles) and P·V sums only them (shader_abi.h).
struct GemmPagedB {
  uint32_t table_slot = kPlaceholderSlot;
  uint64_t table_base = 0;  // byte offset of batch 0's first entry in the slot
  int64_t entries_per_batch = 0, pages = 0, page_size = 0, page_elements = 0;
  bool keys_are_columns = false;
  uint32_t lengths_slot = kPlaceholderSlot;  // int32 cache lengths, one per batch ...
  uint64_t lengths_base = 0;                 // ... batch 0's at this byte offset of the slot
  int64_t appended = 0;                      // tokens appended to every cache before the call (< 2^24)
};

struct GemmCall {
  GemmOperand a, b, c;  // A (m, k), B (n, k), C (m, n)
  bool has_bias = false;           // an (n) bias in B's dtype ...
  uint32_t bias_slot = kPlaceholderSlot;
  uint64_t bias_base = 0;          // ... from byte bias_base of slot bias_slot
  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1, heads = 1;    // batch index z = (b, h): batch * heads matrices
  int64_t group = 1, head_base = 0;  // B's head of query head h: (head_base + h) / group
  float alpha = 1.0f;
  bool skip_zero_a = false;  // A == 0 contributes nothing, even against NaN/Inf in B
  std::optional<GemmPagedB> paged_b;  // B read through a block table (no bias then)
};

// Which GEMM kernel a device runs, chosen once from its description when a call is planned (so a
// plan made for another device's profile keeps that device's kernel). The tile sizes follow from
// the kernel and the shape.
enum class GemmKernel {
  tiled,     // gemm.comp: shared-memory tiles, a register tile per invocation (GPUs, any device)
  subgroup,  // gemm_subgroup.comp: one subgroup per workgroup, A shared by subgroupShuffle (CPU devices)
};
struct GemmChoice {
  GemmKernel kernel = GemmKernel::tiled;
  uint32_t lanes = 0;  // subgroup: the device's one subgroup size, the workgroup's size
};
// subgroup on CPU devices (lavapipe) whose pipelines all run with one subgroup size (min == max ==
// subgroup_size, 4 to 32 lanes) and have subgroup shuffles and shaderInt64; tiled everywhere else.
GemmChoice choose_gemm(const DeviceInfo& device);
// The kernel and its tile for `call`, e.g. "tiled 128x64/8x8", for tools.
std::string gemm_description(const GemmChoice& choice, const GemmCall& call);

// The operands gemm_subgroup.comp reads or writes four elements at a time in `call` (GEMM_SG_VEC_*
// bits, from its strides and sizes; 0 for the tiled kernel). The dispatch runs them so when the
// bindings' element offsets are multiples of 4 at replay, else its all-scalar twin.
uint32_t gemm_vec_bits(const GemmChoice& choice, const GemmCall& call);

// The loop iterations one invocation of `choice`'s kernel makes at most (what lavapipe's loop limit
// counts, docs/devices.md).
uint64_t gemm_loop_iterations(const GemmChoice& choice, int64_t m, int64_t n, int64_t k);

// Throws Error (prefixed by `what`) when a GEMM of this shape, run by `choice`'s kernel, exceeds what
// `device` can dispatch: the grid per matrix, or lavapipe's per-invocation loop limit
// (docs/devices.md), or a subgroup kernel whose lanes `device` cannot run. Any number of matrices
// works: emit_gemm splits them across dispatches. Without `choice`, the kernel `device` itself would run.
void check_gemm_shape(const DeviceInfo& device, const GemmChoice& choice, const std::string& what, int64_t m, int64_t n,
                      int64_t k);
void check_gemm_shape(const DeviceInfo& device, const std::string& what, int64_t m, int64_t n, int64_t k);

// Adds the dispatch (pipeline, bindings, push constants) of `choice`'s kernel to `list`, building
// its pipeline on `context` if needed. The caller orders it with barriers.
void emit_gemm(ContextImpl& context, CommandList& list, const GemmCall& call, const GemmChoice& choice);

}  // namespace vkattn::detail
