// The three-stage path's backward (docs/design.md, "The backward pass"): the backward of a call that
// asked for the weights (or for the unfused path), in the forward's three-stage form. After the rows
// kernel (D = rowsum(dO∘O)), for each chunk of query rows:
//   S = Q·Kᵀ and dP = dO·Vᵀ (gemm.comp, f32, into the workspace),
//   attention_backward_scores.comp: S -> dS = P (Z dP - D') (× the softcap's derivative), dP -> P∘Z,
//   with D' = Σ P Z dP (rowsum(dO∘O) formed from the row's own P∘Z and dP),
//   dV = (P∘Z)ᵀ·dO,  dK = scale·dSᵀ·Q,  dQ = scale·dS·K (gemm.comp, exact zeros skipped).
// A chunk holds whole GQA groups of query heads, so that the dK/dV GEMMs sum a group's heads and rows
// along their k; when one group's rows do not fit one chunk, each row split writes f32 partials of
// dK and dV that attention_backward_reduce.comp adds in split order (the GEMM cannot accumulate).
// Deterministic like the fused backward: every sum has one owner and a fixed order. Its memory is the
// forward's three-stage path's: two (chunk rows x seq_k) f32 blocks.
#pragma once

#include <cstdint>

#include "command_list.hpp"
#include "context_impl.hpp"
#include "gemm.hpp"
#include "vkattn/problem.hpp"

namespace vkattn::detail {

struct BackwardCallPlan;

struct ThreeStageBackward {
  GemmChoice gemm;  // the GEMM kernel of the plan's device
  // Chunk extents: batch elements, KV heads (their query heads whole), query rows.
  int64_t batch_chunk = 0, kv_head_chunk = 0, row_chunk = 0;
  uint32_t chunks = 0;
  uint32_t row_splits = 1;  // > 1: dK and dV summed from per-split partials
  uint64_t block_bytes = 0;  // one chunk's f32 (rows x seq_k): S, and as much again for dP
  uint32_t scores_workgroup = 64;
};

// Chunks the call of `p` (the layouts it runs on: a packed batch's batch-1 view) so that each
// chunk's S, dP and tensor ranges fit one binding each and its GEMMs fit `device` (grid, lavapipe's
// loop limit); throws Error naming the limit when even one row of one group does not.
ThreeStageBackward plan_three_stage_backward(const DeviceInfo& device, const AttentionProblem& p,
                                             const AttentionLayouts& l, uint64_t alignment, uint32_t workgroup);

// The plan's limits checked against `device` (a profile's plan run here: plan_fit.hpp); throws Error.
void check_three_stage_fits(const ThreeStageBackward& t, const AttentionProblem& p, const DeviceInfo& device);

// Every chunk's dispatches and barriers, after the rows kernel; the partials' sums are the caller's.
void emit_three_stage_backward(ContextImpl& c, CommandList& list, const BackwardCallPlan& plan);

}  // namespace vkattn::detail
