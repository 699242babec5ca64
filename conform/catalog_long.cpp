// Long key ranges. lavapipe stops an invocation's loops after 65535 iterations in total and says
// nothing (docs/devices.md), so a kernel that is right on a GPU can be silently wrong there from a few
// thousand keys on: these cases are the ones that catch it. Also the sizes beyond one binding
// (maxStorageBufferRange, 128 MiB on lavapipe) and one grid dimension (65535 workgroups).
#include "conform/catalog_sections.hpp"

namespace vkattn::conform::detail {
namespace {

struct Builder {
  uint64_t base_seed;
  AttentionCase operator()(DType dtype, int64_t seq_q, int64_t seq_k, int64_t dim, uint64_t n) const {
    AttentionCase c;
    c.dtype = dtype;
    c.seq_q = seq_q;
    c.seq_k = seq_k;
    c.dim_qk = c.dim_v = dim;
    c.seed = case_seed(base_seed, 9000 + n);
    return c;
  }
};

CaseSection section(const char* name, const char* title) {
  CaseSection s;
  s.name = name;
  s.title = title;
  s.suite = "long";
  return s;
}

CaseSection decode(const Builder& long_case) {
  CaseSection s = section("long-decode", "decode: one query row against 16384 to 65536 keys, GQA");
  for (const DType dtype : {DType::f32, DType::f16, DType::bf16})
    s.cases.push_back(long_case(dtype, 1, 16384, 128, static_cast<uint64_t>(dtype)));
  s.cases.push_back(long_case(DType::f32, 1, 65536, 128, 11));
  AttentionCase gqa = long_case(DType::f16, 1, 20000, 64, 12);  // 8 heads over 2 KV heads
  gqa.batch = 2;
  gqa.heads = 8;
  gqa.kv_heads = 2;
  gqa.layout = LayoutKind::bshd;
  gqa.kv_lengths = {20000, 12345};
  s.cases.push_back(gqa);
  // The query heads of a GQA group in one workgroup (the subgroup kernel's packed rows, decode on CPU
  // devices): 4 heads per KV head over 65536 keys with key padding and poisoned hidden K/V rows;
  // seq_q 5 (rows = heads x seq_q) with bottom-right causal and a per-head boolean mask with a fully
  // masked row; seq_q 3 top-left (three keys visible at most) with a per-batch f16 mask.
  AttentionCase packed = long_case(DType::f16, 1, 65536, 128, 18);
  packed.batch = 2;
  packed.heads = 8;
  packed.kv_heads = 2;
  packed.causal = Causal::bottom_right;
  packed.kv_lengths = {65536, 40001};
  packed.poison_hidden_kv = true;
  s.cases.push_back(packed);
  AttentionCase rows = long_case(DType::bf16, 5, 16384, 128, 19);
  rows.heads = 12;
  rows.kv_heads = 4;
  rows.layout = LayoutKind::bshd;
  rows.causal = Causal::bottom_right;
  rows.mask = MaskKind::boolean;
  rows.mask_heads = 12;
  rows.mask_drop = 0.3;
  rows.mask_blank_rows = {2};
  s.cases.push_back(rows);
  AttentionCase top_left = long_case(DType::f32, 3, 16384, 64, 20);
  top_left.batch = 2;
  top_left.heads = 6;
  top_left.kv_heads = 2;
  top_left.causal = Causal::top_left;
  top_left.mask = MaskKind::f16;
  top_left.mask_batch = 2;
  s.cases.push_back(top_left);
  s.quick = {0};
  return s;
}

CaseSection rows(const Builder& long_case) {
  CaseSection s = section("long-rows", "many query rows against 16384 to 70000 keys: causal, masks, LSE, d256");
  s.cases.push_back(long_case(DType::f32, 64, 16384, 128, 10));
  // Causal bottom-right: a chunk of 128 queries at the end of 16384 keys.
  AttentionCase chunk = long_case(DType::f32, 128, 16384, 64, 13);
  chunk.causal = Causal::bottom_right;
  chunk.reference_rows = {0, 1, 63, 64, 126, 127};  // the reference is the slow part here
  s.cases.push_back(chunk);
  AttentionCase masked = long_case(DType::bf16, 2, 16384, 64, 14);
  masked.mask = MaskKind::boolean;
  masked.mask_drop = 0.5;
  s.cases.push_back(masked);
  // d256 prefill (on CPU devices the subgroup kernel, two query rows a lane), 8 query heads over one
  // KV head: workgroups enough that only the loop budget splits the keys. Over 70000 keys the fast
  // pass's budget; over 40000 with scores past the f32 range (q . k near 1e40) on every key, the
  // careful pass's, which redoes every row one key per iteration.
  AttentionCase fast = long_case(DType::f16, 64, 70000, 256, 22);
  fast.heads = 8;
  fast.reference_rows = {0, 17, 63};
  s.cases.push_back(fast);
  AttentionCase careful = long_case(DType::f32, 64, 40000, 256, 23);
  careful.heads = 8;
  careful.qk_range = 1e20f;
  careful.reference_rows = {0, 17, 63};
  s.cases.push_back(careful);
  return s;
}

CaseSection beyond_binding(const Builder& long_case) {
  CaseSection s = section("long-binding", "K and V beyond one binding: (batch, GQA group) chunks, key ranges");
  // K = 2 x 4 x 36000 x 128 f32 = 147 MB: one batch at a time, then head groups, must agree.
  AttentionCase chunks = long_case(DType::f32, 2, 36000, 128, 14);
  chunks.batch = 2;
  chunks.heads = 12;
  chunks.kv_heads = 4;
  chunks.causal = Causal::bottom_right;
  chunks.kv_lengths = {36000, 30001};
  s.cases.push_back(chunks);
  // Many batches beyond one binding: K = 14 x 2 x 20000 x 64 f32 = 143 MB, in chunks of whole
  // batches run back to back (most without splits), each batch with its own key length.
  AttentionCase batches = long_case(DType::f32, 2, 20000, 64, 19);
  batches.batch = 14;
  batches.heads = 4;
  batches.kv_heads = 2;
  batches.causal = Causal::bottom_right;
  batches.kv_lengths = {20000, 1, 19999, 0, 12345, 20000, 7, 16384, 3, 20000, 9999, 2, 20000, 511};
  s.cases.push_back(batches);
  // One KV head larger than a binding: 600,000 keys x 64 f32 (154 MB), bound by key range. The
  // three-stage path binds each KV head whole; it refuses, naming the path that works.
  AttentionCase keys = long_case(DType::f32, 3, 600000, 64, 15);
  keys.heads = 2;
  keys.kv_heads = 1;
  keys.causal = Causal::bottom_right;
  keys.kv_lengths = {590001};
  keys.mask = MaskKind::boolean;
  keys.mask_drop = 0.1;
  keys.unfused_refusal = "use the fused path";
  s.cases.push_back(keys);
  // The same with 20 query rows, past the decode form: on CPU devices the subgroup kernel's fast and
  // careful passes run once per key range, in sequence (their barriers; a NaN row takes the careful pass).
  AttentionCase rows = long_case(DType::f32, 20, 600000, 64, 18);
  rows.heads = 2;
  rows.kv_heads = 1;
  rows.causal = Causal::bottom_right;
  rows.nan_q_rows = {7};
  rows.reference_rows = {0, 7, 8, 19};  // the reference is the slow part here
  rows.unfused_refusal = "use the fused path";
  s.cases.push_back(rows);
  return s;
}

CaseSection beyond_grid(const Builder& long_case) {
  CaseSection s = section("long-grid", "grids beyond maxComputeWorkGroupCount: 70,000 heads, batch 66,000");
  AttentionCase heads = long_case(DType::f16, 3, 5, 16, 16);
  heads.heads = 70000;
  heads.kv_heads = 35000;
  heads.causal = Causal::bottom_right;
  s.cases.push_back(heads);
  AttentionCase batch = long_case(DType::f32, 2, 7, 8, 17);
  batch.batch = 66000;
  batch.heads = 2;
  batch.kv_heads = 1;
  batch.layout = LayoutKind::bshd;
  s.cases.push_back(batch);
  return s;
}

}  // namespace

void add_long_sections(std::vector<CaseSection>& out, uint64_t base_seed) {
  const Builder b{base_seed};
  out.push_back(decode(b));
  out.push_back(rows(b));
  out.push_back(beyond_binding(b));
  out.push_back(beyond_grid(b));
}

}  // namespace vkattn::conform::detail
