// One attention problem as a conformance case: shapes, dtype, layouts, masks and the traps it sets
// (poisoned hidden keys, NaN query rows, out-of-range key lengths). The `vkattn conform` command and
// the doctest suites run the same cases (catalog.hpp), through the same runner (case_runner.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <vkattn/vkattn.hpp>

#include "conform/case_modifiers.hpp"

namespace vkattn::conform {

enum class LayoutKind {
  bhsd,    // dense (batch, heads, seq, dim)
  bshd,    // dense (batch, seq, heads, dim): the application layout, strided as BHSD
  padded,  // (batch, seq, heads, dim) with gaps after every head, row and batch (gaps hold NaN)
};
const char* to_string(LayoutKind layout);

enum class MaskKind { none, boolean, f32, f16 };
const char* to_string(MaskKind mask);

struct AttentionCase {
  DType dtype = DType::f32;
  KvQuant kv_quant = KvQuant::none;  // q8_0: K and V are uploaded as quantize_q8_0 blocks of their values
  int64_t batch = 1, heads = 1, kv_heads = 1, seq_q = 1, seq_k = 1, dim_qk = 64, dim_v = 64;
  Causal causal = Causal::none;
  LayoutKind layout = LayoutKind::bhsd;  // of q, k, v and out alike
  int64_t offset = 0;  // element offset of every tensor (and the mask, LSE, kv_lengths) in its buffer
  std::optional<float> scale;
  // Q and K are uniform in [-qk_range, qk_range] (V in [-1, 1]): large values make q . k overflow f32.
  float qk_range = 2.0f;
  bool lse = true;
  std::vector<int32_t> kv_lengths;  // empty: no key padding; else one per batch, in [0, seq_k]
  // What the device is given instead of kv_lengths (the reference always gets kv_lengths):
  // out-of-range values that the device must clamp to [0, seq_k] (attention.hpp).
  std::vector<int32_t> gpu_kv_lengths;

  MaskKind mask = MaskKind::none;
  int64_t mask_batch = 1, mask_heads = 1;  // 1 (broadcast) or batch / heads
  double mask_drop = 0.25;                 // probability that a mask entry hides its key
  std::vector<int64_t> mask_blank_rows;    // query rows whose every key is masked
  std::vector<int64_t> mask_blank_keys;    // keys masked for every query row

  CaseModifiers modifiers;  // the score modifiers (case_modifiers.hpp)

  bool poison_hidden_kv = false;    // NaN / Inf in the K and V rows that no query may see
  std::vector<int64_t> nan_q_rows;  // query rows of (batch 0, head 0) with a NaN in Q
  std::vector<int64_t> reference_rows;  // compare only these query rows (empty: all)
  // Non-empty: the unfused path must refuse this case with an Error containing this text (a KV
  // head larger than one binding, which only the fused path can bind by key range).
  std::string unfused_refusal;
  uint64_t seed = 1;
};

// One line with every field that matters, the seed included.
std::string describe(const AttentionCase& c);

// The features a case exercises, as (group, value) pairs — "dtype"/"f16", "mask"/"causal
// bottom-right", "heads"/"GQA 4:1", ... — for `vkattn conform`'s per-feature tables. A case with
// several mask kinds also counts under "mask"/"combined".
std::vector<std::pair<std::string, std::string>> features(const AttentionCase& c);

// splitmix64 of (base, case number): neighbouring cases get unrelated random streams.
uint64_t case_seed(uint64_t base_seed, uint64_t case_number);

// The base seed the tests and `vkattn conform` use unless told otherwise.
constexpr uint64_t kDefaultBaseSeed = 20261101;

}  // namespace vkattn::conform
