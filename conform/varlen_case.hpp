// A packed variable-length call (vkattn/varlen_attention.hpp) as a conformance case: the sequences'
// query and key counts, the heads, the row strides, the options and modifiers. The runner builds it
// from the seed, runs it on the device with its outputs poisoned and guarded, and compares O and LSE
// with the fp64 reference (reference::varlen_attention).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <vkattn/vkattn.hpp>

#include "conform/case_modifiers.hpp"
#include "conform/case_runner.hpp"
#include "conform/serving_case.hpp"

namespace vkattn::conform {

struct VarlenCase {
  std::string name;
  DType dtype = DType::f32;
  KvQuant quant = KvQuant::none;  // q8_0: K and V uploaded as q8_0 blocks (row_pad a multiple of 32)
  int64_t heads = 1, kv_heads = 1, dim_qk = 64, dim_v = 64;
  // Each sequence's queries and keys (the same length: the batch); 0 is an empty sequence.
  std::vector<int32_t> seq_q, seq_k;
  // max_seqlen_q and max_seqlen_k as given to the call: the longest sequence's (tight), or 0 (the
  // totals: a loose bound, more query tiles and key splits than any sequence needs).
  bool loose_max = false;
  // Elements between the rows of Q, K, V and O past their heads x dim, and before their first row
  // (non-dense row strides, tensors not at their buffer's start); the gaps hold NaN.
  int64_t row_pad = 0;
  Causal causal = Causal::bottom_right;
  CaseModifiers modifiers;  // the score modifiers (case_modifiers.hpp)
  bool lse = true;
  // The plan must split the key range at least this many ways (the case is there for split-KV).
  uint32_t min_splits = 1;
  uint64_t seed = 1;
};

std::string describe(const VarlenCase& c);

// The reference's packed output, O (total_q, heads, dim_v) and LSE (heads, total_q), as the dense
// comparison's (1, heads, total_q, dim_v) and (1, heads, total_q): compare_outputs on packed rows.
reference::Outputs as_batch_one(const reference::VarlenOutputs& packed);

// The features a case exercises, as (group, value) pairs for `vkattn conform`'s tables: "dtype",
// "layout" ("varlen"), "heads", "mask" (the causal alignment) and each modifier.
std::vector<std::pair<std::string, std::string>> features(const VarlenCase& c);

using VarlenResult = ServingResult;

// Runs `c` on `context` (the PreparedAttention of its PackedKv spec, run twice on fresh poison: the sequences in the
// case's order, then the same packed rows cut in reverse order, one plan serving both) and compares
// with the reference. `path` unfused: the three-stage path with the weights P (heads, total_q,
// total_k) compared too; a q8_0 case must be refused there (ErrorCode::unsupported, naming the fused
// path), which is its pass. Throws nothing for a mismatch; any other Error from the library propagates.
VarlenResult run_varlen_case(Context& context, const VarlenCase& c, AttentionPath path = AttentionPath::automatic);

// The same in `vkattn conform`'s frame (case_runner.hpp), on the path of `options`; skipped under a
// device profile (varlen calls are planned for the device they run on).
CaseResult run_varlen_case(Context& context, const VarlenCase& c, const RunOptions& options);

// The catalog: empty sequences (no queries, no keys, both), sequences with more queries than keys,
// one long sequence among short ones, decode (one query per sequence, GQA), MHA and GQA 4:1 and
// 8:2, causal in both alignments and none, every modifier, forced split-KV, padded row strides, every
// dtype; head dims 64 and 128. `long_cases`: a sequence of 70,000 keys (lavapipe's loop limit).
std::vector<VarlenCase> varlen_cases(uint64_t base_seed, bool long_cases);

}  // namespace vkattn::conform
