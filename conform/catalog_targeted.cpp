// Targeted conformance cases for the promises of the contract (docs/semantics.md) that a random sweep rarely hits:
// fully masked rows (exactly 0, LSE -inf), masked keys holding NaN / Inf, NaN propagation confined
// to its row, the split-KV path under every mask, extreme scales, scores beyond the f32 range and
// strided layouts. And the
// representative subset that runs again under synchronization validation.
#include <limits>

#include "conform/catalog_sections.hpp"

namespace vkattn::conform::detail {
namespace {

const DType kDTypes[] = {DType::f32, DType::f16, DType::bf16};

struct Builder {
  uint64_t base_seed;
  AttentionCase base(DType dtype, int64_t seq_q, int64_t seq_k, int64_t dim, uint64_t n) const {
    AttentionCase c;
    c.dtype = dtype;
    c.seq_q = seq_q;
    c.seq_k = seq_k;
    c.dim_qk = c.dim_v = dim;
    c.seed = case_seed(base_seed, 5000 + n * 3 + static_cast<uint64_t>(dtype));
    return c;
  }
  uint64_t seed(uint64_t number) const { return case_seed(base_seed, number); }
};

CaseSection section(const char* name, const char* title, const char* suite = "conformance-masks") {
  CaseSection s;
  s.name = name;
  s.title = title;
  s.suite = suite;
  return s;
}

CaseSection fully_masked(const Builder& b) {
  CaseSection s = section("masks-fully-masked", "fully masked rows give exactly 0 and LSE -inf");
  uint64_t n = 0;
  for (const DType dtype : kDTypes) {
    // Bottom-right with seq_q > seq_k: rows 0..4 see no key.
    AttentionCase c = b.base(dtype, 9, 4, 64, n++);
    c.causal = Causal::bottom_right;
    s.cases.push_back(c);
    c = b.base(dtype, 70, 5, 40, n++);  // more empty rows than one row tile
    c.causal = Causal::bottom_right;
    c.heads = 3;
    c.layout = LayoutKind::bshd;
    s.cases.push_back(c);
    // Key padding 0 for one batch.
    c = b.base(dtype, 17, 33, 21, n++);
    c.batch = 3;
    c.heads = 2;
    c.kv_lengths = {0, 5, 33};
    c.poison_hidden_kv = true;
    s.cases.push_back(c);
    // A boolean mask row of all false, and a float mask row of all -inf.
    c = b.base(dtype, 33, 65, 64, n++);
    c.mask = MaskKind::boolean;
    c.mask_blank_rows = {0, 5, 32};
    s.cases.push_back(c);
    c.mask = MaskKind::f32;
    c.mask_heads = c.heads = 2;
    c.seed = b.seed(5100 + n++);
    s.cases.push_back(c);
    c.mask = MaskKind::f16;
    c.seed = b.seed(5100 + n++);
    s.cases.push_back(c);
  }
  s.quick = {0, 8, 10, 17};  // causal f32, padding f16, bool blank rows f16, f16 mask bf16
  return s;
}

CaseSection hidden_nan(const Builder& b) {
  CaseSection s = section("masks-hidden-nan", "NaN and Inf in masked-out keys never reach the output");
  uint64_t n = 100;
  for (const DType dtype : kDTypes) {
    AttentionCase c = b.base(dtype, 20, 50, 64, n++);  // beyond kv_length
    c.batch = 2;
    c.kv_lengths = {13, 49};
    c.poison_hidden_kv = true;
    s.cases.push_back(c);
    c = b.base(dtype, 20, 50, 32, n++);  // beyond the top-left causal limit (keys 20..49)
    c.causal = Causal::top_left;
    c.poison_hidden_kv = true;
    s.cases.push_back(c);
    c = b.base(dtype, 24, 40, 72, n++);  // whole key columns masked out by the mask
    c.heads = 4;
    c.kv_heads = 2;
    c.mask = MaskKind::boolean;
    c.mask_blank_keys = {0, 7, 8, 39};
    c.poison_hidden_kv = true;
    s.cases.push_back(c);
    c.mask = MaskKind::f32;  // -inf columns
    c.seed = b.seed(5200 + n++);
    s.cases.push_back(c);
    // Whole key tiles that no query row sees (keys 32..95 and 128..159: every tile of 8, 16 or 32
    // keys there), which the tiled kernel skips after staging the mask: a skipped tile must leave no
    // trace, its NaN keys included, and the tiles around it must still count.
    c = b.base(dtype, 24, 170, 72, 0);
    c.seed = b.seed(5300 + static_cast<uint64_t>(s.cases.size()));
    c.heads = 4;
    c.kv_heads = 2;
    c.mask = MaskKind::boolean;
    c.mask_drop = 0.2;
    c.mask_blank_keys.clear();
    for (int64_t key = 32; key < 96; ++key) c.mask_blank_keys.push_back(key);
    for (int64_t key = 128; key < 160; ++key) c.mask_blank_keys.push_back(key);
    c.poison_hidden_kv = true;
    s.cases.push_back(c);
    c.mask = MaskKind::f16;  // -inf tiles
    c.seed = b.seed(5300 + static_cast<uint64_t>(s.cases.size()));
    s.cases.push_back(c);
  }
  // Decoding (the subgroup kernel's decode form on CPU devices, whose fast loop uses V as read and
  // leaves NaN to its careful loop): a GQA group's heads in one workgroup with blank key columns of a
  // per-head boolean mask, every dim in whole 16-byte chunks (d64); then seq_q 3 x 4 heads (tiles
  // that span heads) with key padding and bottom-right causal, dims that are not (d36: element-wise
  // for f16/bf16, chunks for f32). Hidden K/V rows hold NaN and Inf.
  for (const DType dtype : kDTypes) {
    AttentionCase c = b.base(dtype, 1, 200, 64, 0);
    c.seed = b.seed(5400 + static_cast<uint64_t>(s.cases.size()));
    c.heads = 8;
    c.kv_heads = 2;
    c.mask = MaskKind::boolean;
    c.mask_heads = 8;
    c.mask_drop = 0.1;
    c.mask_blank_keys = {0, 5, 6, 7, 8, 9, 10, 11, 12, 199};
    c.poison_hidden_kv = true;
    s.cases.push_back(c);
    c = b.base(dtype, 3, 150, 36, 0);
    c.seed = b.seed(5400 + static_cast<uint64_t>(s.cases.size()));
    c.batch = 2;
    c.heads = 4;
    c.kv_heads = 1;
    c.kv_lengths = {150, 77};
    c.causal = Causal::bottom_right;
    c.poison_hidden_kv = true;
    s.cases.push_back(c);
  }
  // f32 key padding, f16 causal, bf16 blank key columns, bf16 blank key tiles (the same pipeline)
  s.quick = {0, 7, 14, 16};
  return s;
}

CaseSection clamped_lengths(const Builder& b) {
  CaseSection s = section("masks-kv-clamp", "key lengths outside [0, seq_k] are clamped on the device");
  uint64_t n = 150;
  for (const DType dtype : kDTypes) {
    AttentionCase c = b.base(dtype, 5, 70, 32, n++);
    c.batch = 4;
    c.kv_lengths = {0, 70, 0, 70};
    c.gpu_kv_lengths = {-5, 71, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
    s.cases.push_back(c);
  }
  s.quick = {1};
  return s;
}

CaseSection nan_rows(const Builder& b) {
  CaseSection s = section("masks-nan-rows", "NaN in one query row stays in that row");
  uint64_t n = 200;
  for (const DType dtype : kDTypes) {
    AttentionCase c = b.base(dtype, 40, 70, 64, n++);
    c.batch = 2;
    c.heads = 4;
    c.kv_heads = 2;  // head 1 shares its KV head with the poisoned head 0
    c.nan_q_rows = {3, 39};
    s.cases.push_back(c);
  }
  s.quick = {2};
  return s;
}

CaseSection split_kv(const Builder& b) {
  // seq_k in the thousands with few query rows: the plan splits the key range, and some splits are
  // entirely masked (their partial LSE is -inf) — the combine must ignore them.
  CaseSection s = section("masks-split-kv", "split-KV under every mask");
  uint64_t n = 300;
  for (const DType dtype : kDTypes) {
    AttentionCase c = b.base(dtype, 1, 3000, 64, n++);
    c.batch = 4;
    c.heads = 2;
    c.kv_lengths = {3, 2999, 0, 1500};
    c.poison_hidden_kv = true;
    s.cases.push_back(c);
    c = b.base(dtype, 4, 3001, 128, n++);
    c.heads = 4;
    c.kv_heads = 1;
    c.causal = Causal::bottom_right;
    c.layout = LayoutKind::bshd;
    s.cases.push_back(c);
    c = b.base(dtype, 2, 2500, 40, n++);
    c.mask = MaskKind::boolean;
    c.mask_drop = 0.9;
    c.mask_blank_rows = {1};
    c.poison_hidden_kv = true;
    s.cases.push_back(c);
    c = b.base(dtype, 3, 2048, 72, n++);
    c.mask = MaskKind::f32;
    c.mask_heads = c.heads = 2;
    c.mask_blank_keys = {0, 1, 2, 1000, 2047};
    c.causal = Causal::top_left;  // rows see 1..3 keys: almost every split is empty
    c.poison_hidden_kv = true;
    s.cases.push_back(c);
  }
  s.quick = {0, 5, 11};
  return s;
}

CaseSection scales(const Builder& b) {
  CaseSection s = section("masks-scales", "scales: zero, negative, large; default equals 1/sqrt(dim)");
  uint64_t n = 400;
  for (const DType dtype : kDTypes) {
    for (const float scale : {0.0f, -1.3f, 4.0f, 0.125f}) {
      AttentionCase c = b.base(dtype, 19, 37, 64, n++);
      c.scale = scale;
      c.mask = MaskKind::f16;
      s.cases.push_back(c);
    }
  }
  s.quick = {0, 5, 10};
  return s;
}

// docs/semantics.md, "Scores beyond the f32 range": scale * (q . k) beyond the f32 range saturates to +-FLT_MAX
// (so does adding the float mask), on every path; finite inputs never give NaN. Overflow after the
// scaling (huge scales, every dtype), in the dot itself (large f32 / bf16 inputs; f16 cannot hold
// them) with scores that are representable again after a tiny scale, and in split-KV's combine. A
// top-left causal row 0 sees one key whose score may saturate to -FLT_MAX: it must get weight 1.
CaseSection overflow(const Builder& b) {
  CaseSection s = section("masks-overflow", "scores beyond the f32 range saturate: finite inputs never give NaN");
  uint64_t n = 600;
  for (const DType dtype : kDTypes) {
    AttentionCase c = b.base(dtype, 19, 37, 64, n++);
    c.scale = 1e38f;
    c.mask = MaskKind::f32;  // + bias on top of +-FLT_MAX
    s.cases.push_back(c);
    c = b.base(dtype, 24, 40, 40, n++);
    c.scale = -1e38f;
    c.heads = 4;
    c.kv_heads = 2;
    c.causal = Causal::bottom_right;
    c.mask = MaskKind::f16;
    s.cases.push_back(c);
    c = b.base(dtype, 33, 33, 72, n++);
    c.scale = 3e38f;
    c.causal = Causal::top_left;
    c.batch = 2;
    s.cases.push_back(c);
    c = b.base(dtype, 1, 3000, 64, n++);  // split-KV: every partial LSE near +-FLT_MAX
    c.scale = -3e38f;
    c.batch = 3;
    c.kv_lengths = {2999, 1, 1700};
    c.poison_hidden_kv = true;
    s.cases.push_back(c);
    if (dtype == DType::f16) continue;  // f16 cannot hold values whose products overflow f32
    c = b.base(dtype, 21, 45, 64, n++);  // q . k overflows f32; the scores saturate
    c.qk_range = 1e20f;
    c.causal = Causal::bottom_right;
    c.mask = MaskKind::f32;
    s.cases.push_back(c);
    c = b.base(dtype, 17, 29, 32, n++);  // q . k overflows f32, scale * (q . k) is representable
    c.qk_range = 3e19f;
    c.scale = 3e-38f;
    s.cases.push_back(c);
    c = b.base(dtype, 2, 2500, 128, n++);  // split-KV with overflowing dots
    c.qk_range = 1e20f;
    c.heads = 2;
    c.mask = MaskKind::boolean;
    c.mask_drop = 0.5;
    s.cases.push_back(c);
  }
  s.quick = {0, 3, 4, 5, 8, 13};
  return s;
}

CaseSection strided(const Builder& b) {
  CaseSection s = section("masks-strided", "strided layouts and offsets with masks");
  uint64_t n = 500;
  for (const DType dtype : kDTypes) {
    for (const LayoutKind layout : {LayoutKind::bshd, LayoutKind::padded}) {
      AttentionCase c = b.base(dtype, 31, 47, 40, n++);
      c.dim_v = 24;
      c.batch = 2;
      c.heads = 6;
      c.kv_heads = 3;
      c.layout = layout;
      c.offset = 5;
      c.mask = MaskKind::boolean;
      c.mask_batch = 2;
      c.kv_lengths = {47, 30};
      c.causal = Causal::bottom_right;
      c.poison_hidden_kv = true;
      s.cases.push_back(c);
    }
  }
  s.quick = {1, 2};
  return s;
}

// K and V as q8_0 blocks (AttentionLayouts::kv_quant) on every fused kernel: decode over split keys,
// prefill with poisoned hidden keys, an offset that leaves the blocks' bindings unaligned, the
// modifiers. The three-stage path must refuse them.
CaseSection q8_0_kv(const Builder& b) {
  CaseSection s = section("masks-q8_0", "K and V stored as q8_0 blocks");
  const char* refusal = "kv_quant: q8_0 K and V run on the fused path only";
  AttentionCase c = b.base(DType::f16, 1, 3000, 128, 400);
  c.batch = 2;
  c.heads = 8;
  c.kv_heads = 2;
  c.layout = LayoutKind::bshd;
  c.kv_lengths = {3000, 700};
  s.cases.push_back(c);
  c = b.base(DType::f32, 33, 70, 64, 401);
  c.heads = 4;
  c.kv_heads = 4;
  c.causal = Causal::bottom_right;
  c.poison_hidden_kv = true;
  s.cases.push_back(c);
  c = b.base(DType::bf16, 20, 40, 32, 402);
  c.dim_v = 64;
  c.batch = 2;
  c.heads = 2;
  c.kv_heads = 1;
  c.offset = 32;  // one block (34 bytes) before K and V: their data start 2 bytes off a 4-byte word
  c.mask = MaskKind::boolean;
  c.kv_lengths = {40, 9};
  s.cases.push_back(c);
  c = b.base(DType::f16, 3, 300, 64, 403);
  c.heads = 4;
  c.kv_heads = 1;
  c.modifiers = every_modifier(Window{100, 0}, 20.0f, 1);
  c.causal = Causal::bottom_right;
  s.cases.push_back(c);
  // Decode on the subgroup kernel's decode form (on CPU devices; the tiled kernel elsewhere): d32
  // over an odd key count and an empty sequence; d64 with GQA, two query rows and masked keys
  // holding NaN (V used as read there: the careful loop); d128 with the heads of a GQA group 32/8.
  c = b.base(DType::f32, 1, 1537, 32, 404);
  c.batch = 3;
  c.heads = 8;
  c.kv_heads = 8;
  c.kv_lengths = {1537, 1, 0};
  s.cases.push_back(c);
  c = b.base(DType::f16, 2, 777, 64, 405);
  c.heads = 8;
  c.kv_heads = 2;
  c.causal = Causal::bottom_right;
  c.mask = MaskKind::boolean;
  c.poison_hidden_kv = true;
  s.cases.push_back(c);
  c = b.base(DType::f16, 1, 4099, 128, 406);
  c.heads = 32;
  c.kv_heads = 8;
  c.causal = Causal::bottom_right;
  s.cases.push_back(c);
  for (AttentionCase& x : s.cases) x.kv_quant = KvQuant::q8_0, x.unfused_refusal = refusal;
  s.quick = {0, 2, 4, 6};
  return s;
}

// A representative subset (fused, split + combine, every mask kind, every dtype, strided layouts)
// small enough to run again under synchronization validation, which is slow and is the only thing
// that catches a missing barrier on lavapipe (docs/devices.md).
CaseSection representative(const Builder& builder) {
  CaseSection s = section("representative", "a representative subset, small enough for synchronization validation",
                          "representative");
  s.cases.reserve(16);  // `add` hands out references into the vector
  auto add = [&](DType dtype, int64_t sq, int64_t sk, int64_t d) -> AttentionCase& {
    AttentionCase c;
    c.dtype = dtype;
    c.seq_q = sq;
    c.seq_k = sk;
    c.dim_qk = c.dim_v = d;
    c.seed = builder.seed(7000 + s.cases.size());
    s.cases.push_back(c);
    return s.cases.back();
  };
  add(DType::f32, 65, 63, 64);
  AttentionCase& a = add(DType::f16, 33, 70, 72);
  a.heads = 8;
  a.kv_heads = 2;
  a.causal = Causal::bottom_right;
  a.layout = LayoutKind::bshd;
  AttentionCase& b = add(DType::bf16, 20, 40, 40);
  b.batch = 2;
  b.heads = 2;
  b.mask = MaskKind::boolean;
  b.mask_batch = 2;
  b.mask_heads = 2;
  b.kv_lengths = {40, 0};
  AttentionCase& split = add(DType::f32, 1, 4096, 64);  // split + combine
  split.batch = 2;
  split.kv_lengths = {4000, 17};
  AttentionCase& f = add(DType::f16, 9, 4, 21);
  f.dim_v = 8;
  f.causal = Causal::bottom_right;  // fully masked rows
  f.mask = MaskKind::f32;
  f.layout = LayoutKind::padded;
  f.offset = 3;
  AttentionCase& h = add(DType::f32, 7, 30, 256);
  h.mask = MaskKind::f16;
  h.causal = Causal::top_left;
  h.scale = -0.5f;
  AttentionCase& l = add(DType::f16, 1, 16384, 128);  // many splits, one combine
  l.heads = 4;
  l.kv_heads = 2;
  l.layout = LayoutKind::bshd;
  s.quick = {0, 1, 2, 3, 4, 5, 6};
  return s;
}

}  // namespace

void add_targeted_sections(std::vector<CaseSection>& out, uint64_t base_seed) {
  const Builder b{base_seed};
  out.push_back(fully_masked(b));
  out.push_back(hidden_nan(b));
  out.push_back(clamped_lengths(b));
  out.push_back(nan_rows(b));
  out.push_back(split_kv(b));
  out.push_back(scales(b));
  out.push_back(overflow(b));
  out.push_back(strided(b));
  out.push_back(q8_0_kv(b));
  out.push_back(representative(b));
}

}  // namespace vkattn::conform::detail
