// One backward-pass problem (vkattn/attention_backward.hpp) as a conformance case: the forward run on
// the device with its LSE, then the gradients dQ, dK, dV (and dsinks) against the fp64 reference
// (reference::attention_backward, varlen_attention_backward) on the same rounded inputs. Like the
// other kinds, the `vkattn conform` command and the doctest suite (tests/conformance_backward.cpp) run
// the same cases (catalog.hpp's "backward" section).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <vkattn/vkattn.hpp>

#include "conform/attention_case.hpp"
#include "conform/case_modifiers.hpp"
#include "conform/case_runner.hpp"

namespace vkattn::conform {

// The rows or keys beyond which the backward splits its walks on lavapipe (the library's
// kLlvmpipeLoopBudget, runtime/llvmpipe_limits.hpp): cases longer than this prove the splits there.
constexpr int64_t kLavapipeWalkBudget = 48000;

struct BackwardCase {
  DType dtype = DType::f32;
  int64_t batch = 1, heads = 2, kv_heads = 2, seq_q = 7, seq_k = 9, dim_qk = 16, dim_v = 16;
  Causal causal = Causal::none;
  MaskKind mask = MaskKind::none;   // none, boolean or f32: dense (batch, 1, seq_q, seq_k), about a fifth hidden
  std::vector<int32_t> kv_lengths;  // dense: empty (none) or one per batch element, in [0, seq_k]
  CaseModifiers modifiers;          // the score modifiers (case_modifiers.hpp)
  std::optional<float> scale;
  float dropout = 0.0f;  // p; > 0: AttentionOptions::dropout with dropout_seed
  uint64_t dropout_seed = 0;
  // A packed batch's sequence lengths (empty: a dense call of `batch`): batch, seq_q and seq_k are
  // then unused; Q, K and V are packed_layout rows.
  std::vector<int32_t> packed_q, packed_k;
  // Run on the fused path only: the unfused path skips it (a long case whose subject, the backward's
  // split walks, does not depend on the forward's path).
  bool fused_only = false;
  uint64_t seed = 1;
};

// One line with every field that matters, the seed included.
std::string describe(const BackwardCase& c);

// The features a case exercises, as (group, value) pairs for `vkattn conform`'s tables: "dtype", the
// score modifiers under "modifiers", and under "backward": dense / packed, causal, the mask, key
// lengths, GQA / MQA, dim_v != dim_qk, the head dim, dropout, the scale, empty sequences, split
// walks (longer than lavapipe's loop budget).
std::vector<std::pair<std::string, std::string>> features(const BackwardCase& c);

// Runs the forward of `c` (with LSE) on `context`, then its backward twice into poisoned, guarded
// gradient buffers, and requires: the two runs bitwise equal, every gradient within
// gradient_tolerance(dtype) of the fp64 reference (gradient_compare.hpp), the guard bytes untouched.
// Paths: the backward's kernel form is the Context's (KernelVariant: subgroup forces the subgroup
// form, automatic lets the plan pick, tiled and rowwise take the portable one); options.path unfused
// runs the forward on the three-stage path with its weights and the backward on that spec (its
// three-stage form). With
// options.profile the backward is planned for that device (PreparedAttentionBackward's profile
// constructor) and the case is skipped, saying why, where that plan does not fit here; the forward
// runs as planned here. Never throws for a failing case.
CaseResult run_backward_case(Context& context, const BackwardCase& c, const RunOptions& options);

}  // namespace vkattn::conform
