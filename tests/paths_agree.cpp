// The fused and the three-stage paths agree with each other directly, not only each with the
// reference: same O (within the dtype's tolerance of max|V|), same LSE, exactly the same fully masked
// rows (0, LSE -inf) and the same NaN rows, on the same inputs and buffers.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "compare.hpp"
#include "support.hpp"

using namespace vkattn;
using namespace vkattn::test;

namespace {

struct PathCase {
  DType dtype = DType::f32;
  int64_t batch = 2, heads = 4, kv_heads = 2, seq_q = 19, seq_k = 45, dim = 40;
  Causal causal = Causal::none;
  bool mask = false;     // a random f32 mask with -inf entries and a fully masked row
  bool nan_row = false;  // NaN in one query row
};

Buffer upload(Context& ctx, DType dtype, const std::vector<float>& values) {
  std::vector<std::byte> bytes(values.size() * dtype_size(dtype));
  encode(dtype, values.data(), bytes.data(), values.size());
  Buffer b = Buffer::allocate(ctx, bytes.size());
  b.upload(bytes.data(), bytes.size());
  return b;
}

void check_paths_agree(const PathCase& c, uint64_t seed) {
  INFO("dtype " << to_string(c.dtype) << " B" << c.batch << " H" << c.heads << "/" << c.kv_heads << " Sq" << c.seq_q
                << " Sk" << c.seq_k << " D" << c.dim << " causal " << to_string(c.causal) << (c.mask ? " mask" : "")
                << (c.nan_row ? " nan-row" : "") << " seed " << seed);
  if (!device_supports(c.dtype)) return;
  Context& ctx = context();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const auto random = [&](int64_t n) {
    std::vector<float> x(static_cast<std::size_t>(n));
    for (float& e : x) e = round_to(c.dtype, u(rng));
    return x;
  };
  const TensorLayout ql = TensorLayout::bhsd(c.dtype, c.batch, c.heads, c.seq_q, c.dim);
  const TensorLayout kl = TensorLayout::bhsd(c.dtype, c.batch, c.kv_heads, c.seq_k, c.dim);
  std::vector<float> q = random(ql.element_count()), k = random(kl.element_count()), v = random(kl.element_count());
  if (c.nan_row) q[static_cast<std::size_t>(3 * c.dim)] = std::numeric_limits<float>::quiet_NaN();
  Buffer qb = upload(ctx, c.dtype, q), kb = upload(ctx, c.dtype, k), vb = upload(ctx, c.dtype, v);
  std::optional<Buffer> mb;
  AttentionArgs args;
  args.q = {&qb, ql};
  args.k = {&kb, kl};
  args.v = {&vb, kl};
  args.options.causal = c.causal;
  if (c.mask) {
    std::vector<float> m(static_cast<std::size_t>(c.seq_q * c.seq_k));
    for (float& e : m) e = u(rng) < -0.5f ? -std::numeric_limits<float>::infinity() : u(rng);
    for (int64_t j = 0; j < c.seq_k; ++j) m[static_cast<std::size_t>(j)] = -std::numeric_limits<float>::infinity();
    mb.emplace(upload(ctx, DType::f32, m));
    args.mask = {&*mb, MaskLayout::dense(MaskType::f32, 1, 1, c.seq_q, c.seq_k)};
  }

  const uint64_t rows = uint64_t(c.batch * c.heads * c.seq_q);
  std::vector<float> out[2], lse[2];
  for (int path = 0; path < 2; ++path) {
    Buffer ob = Buffer::allocate(ctx, rows * c.dim * dtype_size(c.dtype)), lb = Buffer::allocate(ctx, rows * 4);
    ob.fill(0xFF);  // NaN poison
    lb.fill(0xFF);
    AttentionArgs a = args;
    a.out = {&ob, ql};
    a.lse = {&lb, 0};
    a.path = path == 0 ? AttentionPath::fused : AttentionPath::unfused;
    attention(ctx, a);
    std::vector<std::byte> raw(rows * c.dim * dtype_size(c.dtype));
    ob.download(raw.data(), raw.size());
    out[path].resize(rows * c.dim);
    decode(c.dtype, raw.data(), out[path].data(), out[path].size());
    lse[path].resize(rows);
    lb.download(lse[path].data(), rows * 4);
  }
  expect_no_validation_messages();

  const double tol = tolerance_for(c.dtype).out;
  std::size_t bad = 0;
  for (std::size_t i = 0; i < out[0].size(); ++i) {
    const float f = out[0][i], g = out[1][i];  // fused, unfused
    const bool same = std::isnan(f) ? std::isnan(g) : (!std::isnan(g) && std::abs(double(f) - g) <= tol);
    if (!same && bad++ < 5) MESSAGE("out[" << i << "]: fused " << f << ", unfused " << g);
  }
  for (std::size_t r = 0; r < rows; ++r) {
    const float f = lse[0][r], g = lse[1][r];
    bool same = std::isnan(f) ? std::isnan(g) : (std::isinf(f) || std::isinf(g)) ? f == g : std::abs(f - g) <= 1e-4 * std::max(1.0f, std::abs(f));
    // A fully masked row is exactly 0 on both paths.
    if (f == -std::numeric_limits<float>::infinity())
      for (int64_t d = 0; d < c.dim; ++d) same = same && out[0][r * c.dim + d] == 0.0f && out[1][r * c.dim + d] == 0.0f;
    if (!same && bad++ < 5) MESSAGE("row " << r << ": lse fused " << f << ", unfused " << g);
  }
  CHECK_MESSAGE(bad == 0, bad << " differences between the fused and the unfused path");
}

}  // namespace

TEST_SUITE("conformance-masks") {
  TEST_CASE("the fused and the three-stage paths agree with each other") {
    uint64_t n = 0;
    for (const DType dtype : {DType::f32, DType::f16, DType::bf16}) {
      PathCase c;
      c.dtype = dtype;
      check_paths_agree(c, case_seed(7100 + n++));
      c.causal = Causal::bottom_right;
      c.mask = true;
      c.nan_row = true;
      check_paths_agree(c, case_seed(7100 + n++));
    }
    PathCase wide;
    wide.heads = wide.kv_heads = 1;
    wide.seq_q = 70, wide.seq_k = 3000, wide.dim = 128;  // split-KV on the fused path, long P·V
    wide.causal = Causal::top_left;
    check_paths_agree(wide, case_seed(7110));
  }
}
