// One attention problem as a test case: it builds seeded random inputs in the requested layouts,
// runs the GPU (poisoned, guarded outputs), runs the fp64 reference on the same rounded inputs and
// compares. The conformance, long-sequence and synchronization-validation suites are lists of these.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <vkattn/vkattn.hpp>

namespace vkattn::test {

enum class LayoutKind {
  bhsd,    // dense (batch, heads, seq, dim)
  bshd,    // dense (batch, seq, heads, dim): the application layout, strided as BHSD
  padded,  // (batch, seq, heads, dim) with gaps after every head, row and batch (gaps hold NaN)
};

enum class MaskKind { none, boolean, f32, f16 };

struct AttentionCase {
  DType dtype = DType::f32;
  int64_t batch = 1, heads = 1, kv_heads = 1, seq_q = 1, seq_k = 1, dim_qk = 64, dim_v = 64;
  Causal causal = Causal::none;
  LayoutKind layout = LayoutKind::bhsd;  // of q, k, v and out alike
  int64_t offset = 0;  // element offset of every tensor (and the mask, LSE, kv_lengths) in its buffer
  std::optional<float> scale;
  bool lse = true;
  std::vector<int32_t> kv_lengths;  // empty: no key padding; else one per batch, in [0, seq_k]
  // What the GPU is given instead of kv_lengths (the reference always gets kv_lengths): out-of-range
  // values that the device must clamp to [0, seq_k] (attention.hpp).
  std::vector<int32_t> gpu_kv_lengths;

  MaskKind mask = MaskKind::none;
  int64_t mask_batch = 1, mask_heads = 1;  // 1 (broadcast) or batch / heads
  double mask_drop = 0.25;                 // probability that a mask entry hides its key
  std::vector<int64_t> mask_blank_rows;    // query rows whose every key is masked
  std::vector<int64_t> mask_blank_keys;    // keys masked for every query row

  bool poison_hidden_kv = false;    // NaN / Inf in the K and V rows that no query may see
  std::vector<int64_t> nan_q_rows;  // query rows of (batch 0, head 0) with a NaN in Q
  std::vector<int64_t> reference_rows;  // compare only these query rows (empty: all)
  uint64_t seed = 1;
};

std::string describe(const AttentionCase& c);

// Runs one case on `context` and checks it (guards, untouched gaps, reference comparison, no
// validation message). Returns false after FAILing the current test. Skips (with a MESSAGE) a dtype
// the device cannot store.
bool run_case(Context& context, const AttentionCase& c);

// Runs every case, each under its own INFO context, catching exceptions so one broken case does not
// hide the others. With --verbose it prints each case with its time.
void run_cases(Context& context, const std::vector<AttentionCase>& cases);

}  // namespace vkattn::test
