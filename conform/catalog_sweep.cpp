// The conformance sweep (docs/testing.md, "The test suite"): odd sequence lengths and head dims, GQA ratios, every mask
// kind and combination, strided layouts and offsets, custom scales, with and without LSE, for every
// dtype, each case against the fp64 reference. The axes cycle with co-prime periods, so every value
// of every axis meets many values of the others without the cost of the full cross product.
#include <random>

#include "conform/catalog_sections.hpp"

namespace vkattn::conform::detail {
namespace {

struct SeqPair {
  int64_t q, k;
};
// seq_q != seq_k both ways, the 64 tile edge from both sides, and long thin problems.
const SeqPair kSeqs[] = {{1, 1},    {1, 7},    {2, 65},  {7, 2},   {63, 64}, {64, 63},
                         {65, 113}, {113, 65}, {1, 587}, {587, 7}, {64, 64}};
struct DimPair {
  int64_t qk, v;
};
const DimPair kDims[] = {{1, 1},     {8, 8},     {21, 40},   {40, 21},  {64, 64}, {72, 72},
                         {128, 128}, {203, 203}, {256, 256}, {64, 128}, {128, 8}, {256, 72}};
struct HeadPair {
  int64_t heads, kv;
};
// GQA ratios: MHA (kv = heads), grouped (kv = heads / 2 and 1/4) and MQA (kv = 1).
const HeadPair kHeads[] = {{1, 1}, {3, 1}, {3, 3}, {8, 4}, {8, 1}, {8, 8}, {8, 2}};
constexpr int kMaskVariants = 13;
// The quick run takes every 5th case: 5 is co-prime with every axis period above (11, 12, 7, 3, 13),
// so the quick subset still visits every value of every axis.
constexpr int kQuickStride = 5;

// Applies mask variant `m` (see the list in the code) to `c`.
void apply_mask_variant(AttentionCase& c, int m, std::mt19937_64& rng) {
  auto lengths = [&](bool with_zero) {
    std::uniform_int_distribution<int64_t> len(1, c.seq_k);
    c.kv_lengths.clear();
    for (int64_t b = 0; b < c.batch; ++b) {
      // Batch 0 random, batch 1 the extremes (0: fully masked; seq_k: nothing masked).
      const int64_t value = b == 0 ? len(rng) : (b == 1 && with_zero ? 0 : c.seq_k);
      c.kv_lengths.push_back(static_cast<int32_t>(value));
    }
  };
  switch (m) {
    case 0:  // no mask at all
      break;
    case 1:
      c.causal = Causal::top_left;
      break;
    case 2:
      c.causal = Causal::bottom_right;
      break;
    case 3:
      c.batch = 2;
      lengths(true);
      break;
    case 4:  // bool (Sq, Sk)
      c.mask = MaskKind::boolean;
      break;
    case 5:  // bool (1, H, Sq, Sk)
      c.mask = MaskKind::boolean;
      c.mask_heads = c.heads;
      break;
    case 6:  // bool (B, 1, Sq, Sk)
      c.batch = 2;
      c.mask = MaskKind::boolean;
      c.mask_batch = 2;
      break;
    case 7:  // bool (B, H, Sq, Sk)
      c.batch = 2;
      c.mask = MaskKind::boolean;
      c.mask_batch = 2;
      c.mask_heads = c.heads;
      break;
    case 8:  // f32 additive, -inf entries
      c.batch = 2;
      c.mask = MaskKind::f32;
      c.mask_batch = 2;
      c.mask_heads = c.heads;
      c.mask_drop = 0.3;
      break;
    case 9:  // f16 additive, 2-D
      c.mask = MaskKind::f16;
      c.mask_drop = 0.3;
      break;
    case 10:  // everything at once: bool per head, bottom-right, key padding
      c.batch = 2;
      c.mask = MaskKind::boolean;
      c.mask_heads = c.heads;
      c.causal = Causal::bottom_right;
      lengths(false);
      break;
    case 11:
      c.batch = 2;
      c.mask = MaskKind::f32;
      c.mask_batch = 2;
      c.causal = Causal::top_left;
      lengths(true);
      break;
    case 12:
      c.batch = 2;
      c.mask = MaskKind::f16;
      c.mask_batch = 2;
      c.mask_heads = c.heads;
      c.causal = Causal::bottom_right;
      break;
  }
}

CaseSection sweep(DType dtype, int count, uint64_t salt, uint64_t base_seed) {
  CaseSection section;
  section.name = std::string("sweep-") + to_string(dtype);
  section.suite = "conformance";
  section.title = std::string("random sweep over every axis, ") + to_string(dtype);
  const int d = static_cast<int>(salt);
  for (int n = 0; n < count; ++n) {
    AttentionCase c;
    c.seed = case_seed(base_seed, salt * 1000 + static_cast<uint64_t>(n));
    std::mt19937_64 rng(c.seed);
    c.dtype = dtype;
    const SeqPair s = kSeqs[n % std::size(kSeqs)];
    const DimPair dims = kDims[(n * 5 + d) % std::size(kDims)];
    const HeadPair h = kHeads[(n * 3 + d) % std::size(kHeads)];
    c.seq_q = s.q;
    c.seq_k = s.k;
    c.dim_qk = dims.qk;
    c.dim_v = dims.v;
    c.heads = h.heads;
    c.kv_heads = h.kv;
    c.batch = 1 + (n / 3) % 2;
    c.layout = static_cast<LayoutKind>((n + d) % 3);
    c.offset = n % 4 == 1 ? 7 : (n % 4 == 2 ? 3 : 0);
    if (n % 6 == 5) c.scale = -0.35f;
    if (n % 6 == 2) c.scale = 1.7f;
    c.lse = n % 4 != 3;
    apply_mask_variant(c, (n * 4 + d) % kMaskVariants, rng);
    // Half the cases plant NaN / Inf in the keys nobody may see; the other half keep finite inputs
    // so that a kernel that reads masked keys does not hide its other errors behind NaN.
    c.poison_hidden_kv = n % 2 == 0;
    // Keep lavapipe busy for well under a second per case: shrink the heads of the big ones.
    const int64_t work = c.batch * c.heads * c.seq_q * c.seq_k * (c.dim_qk + c.dim_v);
    if (work > 40'000'000 && c.mask_heads == 1) {
      c.heads = 3;
      c.kv_heads = 1;
    }
    if (n % kQuickStride == 0) section.quick.push_back(section.cases.size());
    section.cases.push_back(c);
  }
  return section;
}

// The sweep keeps its problems small; these few reach the sweep's larger sizes (587, 1024) with the
// widest head dims, where tiles wrap many times and rounding has room to accumulate.
CaseSection larger_shapes(uint64_t base_seed) {
  CaseSection section;
  section.name = "larger";
  section.suite = "conformance";
  section.title = "larger shapes (587, 1024) with the widest head dims";
  auto add = [&](DType dtype, int64_t sq, int64_t sk, int64_t dqk, int64_t dv) -> AttentionCase& {
    AttentionCase c;
    c.dtype = dtype;
    c.seq_q = sq;
    c.seq_k = sk;
    c.dim_qk = dqk;
    c.dim_v = dv;
    c.seed = case_seed(base_seed, 4000 + section.cases.size());
    section.cases.push_back(c);
    return section.cases.back();
  };
  section.cases.reserve(8);  // `add` hands out references into the vector
  add(DType::f32, 587, 587, 256, 256).causal = Causal::top_left;
  AttentionCase& a = add(DType::f16, 1024, 1024, 64, 64);
  a.heads = 2;
  a.kv_heads = 1;
  a.causal = Causal::bottom_right;
  a.mask = MaskKind::boolean;
  a.mask_drop = 0.1;
  AttentionCase& b = add(DType::bf16, 113, 1024, 128, 128);
  b.batch = 2;
  b.kv_lengths = {1000, 77};
  b.layout = LayoutKind::bshd;
  AttentionCase& c = add(DType::f32, 587, 113, 203, 72);
  c.mask = MaskKind::f32;
  c.mask_heads = c.heads = 3;
  AttentionCase& d = add(DType::f16, 64, 1024, 256, 40);
  d.causal = Causal::bottom_right;
  d.scale = 0.3f;
  section.quick = {3};  // the fastest of them, with Sq > Sk and a per-head f32 mask
  return section;
}

}  // namespace

void add_sweep_sections(std::vector<CaseSection>& out, uint64_t base_seed) {
  out.push_back(sweep(DType::f32, 66, 0, base_seed));
  out.push_back(sweep(DType::f16, 52, 1, base_seed));
  out.push_back(sweep(DType::bf16, 52, 2, base_seed));
  out.push_back(larger_shapes(base_seed));
}

}  // namespace vkattn::conform::detail
