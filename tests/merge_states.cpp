// Merging attention states (vkattn/merge_states.hpp) against its fp64 reference: 1 to 64 parts, every
// dtype, strided parts into another layout, parts that saw no key (LSE -inf, their O poisoned with
// NaN) and rows no part saw a key of; outputs poisoned before each run; query-row ranges where the
// parts' f32 rows pass one binding; the errors, nothing written. And the merge of attention over two
// halves of the keys is attention over all of them.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "support.hpp"
#include "vkattn/vkattn.hpp"

using namespace vkattn;
using namespace vkattn::test;

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

Buffer upload_values(Context& ctx, DType dtype, const std::vector<float>& values) {
  std::vector<uint8_t> bytes(std::max<std::size_t>(values.size() * dtype_size(dtype), 4));
  encode(dtype, values.data(), bytes.data(), values.size());
  Buffer b = Buffer::allocate(ctx, bytes.size());
  b.upload(bytes.data(), bytes.size());
  return b;
}

std::vector<float> download_values(const Buffer& b, DType dtype, std::size_t count) {
  std::vector<uint8_t> bytes(count * dtype_size(dtype));
  b.download(bytes.data(), bytes.size());
  std::vector<float> values(count);
  decode(dtype, bytes.data(), values.data(), count);
  return values;
}

// Element (b, h, i, d) of `t` in a dense row-major vector.
std::vector<double> dense(const std::vector<float>& values, const TensorLayout& t) {
  std::vector<double> d;
  for (int64_t b = 0; b < t.batch; ++b)
    for (int64_t h = 0; h < t.heads; ++h)
      for (int64_t i = 0; i < t.seq; ++i)
        for (int64_t e = 0; e < t.dim; ++e) d.push_back(values[std::size_t(t.index(b, h, i, e))]);
  return d;
}

struct MergeCase {
  DType dtype = DType::f32;
  int64_t parts = 2, batch = 2, heads = 3, seq = 13, dim = 24;
  bool strided = false;  // parts BSHD with a gap between rows, out BHSD
  uint64_t seed = 1;
};

void check_merge(Context& ctx, const MergeCase& c) {
  CAPTURE(c.parts);
  CAPTURE(to_string(c.dtype));
  CAPTURE(c.dim);
  std::mt19937_64 rng(c.seed);
  std::uniform_real_distribution<float> value(-2.0f, 2.0f), logit(-4.0f, 4.0f);
  MergeStatesSpec spec;
  spec.parts = c.parts;
  spec.part = TensorLayout::bhsd(c.dtype, c.batch, c.heads, c.seq, c.dim);
  if (c.strided) {
    spec.part = TensorLayout::bshd(c.dtype, c.batch, c.seq, c.heads, c.dim);
    spec.part.stride_seq += 5, spec.part.stride_batch = spec.part.stride_seq * c.seq;  // rows apart
    spec.part.offset = 3;
  }
  spec.out = TensorLayout::bhsd(c.dtype, c.batch, c.heads, c.seq, c.dim);
  spec.lse = true;
  const int64_t rows = c.batch * c.heads * c.seq;

  // Each part's O and LSE; about a sixth of a part's rows saw no key (LSE -inf, O NaN), and row 1 of
  // every (batch, head) none in any part.
  std::vector<Buffer> o_buffers, lse_buffers;
  std::vector<std::vector<double>> want_o, want_lse;
  for (int64_t part = 0; part < c.parts; ++part) {
    std::vector<float> o(std::size_t(spec.part.required_elements()), std::nanf(""));
    std::vector<float> lse(static_cast<std::size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      const bool empty = rng() % 6 == 0 || r % c.seq == 1;
      lse[std::size_t(r)] = empty ? kNegInf : logit(rng);
      for (int64_t d = 0; d < c.dim; ++d) {
        const int64_t b = r / (c.heads * c.seq), h = (r / c.seq) % c.heads, i = r % c.seq;
        o[std::size_t(spec.part.index(b, h, i, d))] = empty ? std::nanf("") : round_to(c.dtype, value(rng));
      }
    }
    o_buffers.push_back(upload_values(ctx, c.dtype, o));
    lse_buffers.push_back(upload_values(ctx, DType::f32, lse));
    want_o.push_back(dense(o, spec.part));
    want_lse.emplace_back(lse.begin(), lse.end());
  }
  const reference::MergedStates want = reference::merge_attention_states(want_o, want_lse, rows, c.dim);

  std::vector<const Buffer*> part_o;
  std::vector<BufferSlice> part_lse;
  for (int64_t part = 0; part < c.parts; ++part) {
    part_o.push_back(&o_buffers[std::size_t(part)]);
    part_lse.push_back({&lse_buffers[std::size_t(part)], 0});
  }
  Buffer out = upload_values(ctx, c.dtype, std::vector<float>(std::size_t(spec.out.required_elements()), std::nanf("")));
  Buffer lse_out = upload_values(ctx, DType::f32, std::vector<float>(std::size_t(rows), std::nanf("")));
  const PreparedMergeStates merge(ctx, spec);
  merge.run({part_o, part_lse, &out, {&lse_out, 0}});
  expect_no_validation_messages();

  const std::vector<double> got_o = dense(download_values(out, c.dtype, std::size_t(spec.out.required_elements())), spec.out);
  const std::vector<float> got_lse = download_values(lse_out, DType::f32, std::size_t(rows));
  const double tolerance = c.dtype == DType::f32 ? 2e-6 : c.dtype == DType::f16 ? 2e-3 : 1.6e-2;
  int bad = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const double lse_want = want.lse[std::size_t(r)];
    if (std::isinf(lse_want) ? got_lse[std::size_t(r)] != kNegInf : std::abs(got_lse[std::size_t(r)] - lse_want) > 1e-5 * (1 + std::abs(lse_want)))
      if (bad++ < 5) FAIL_CHECK("row " << r << ": lse " << got_lse[std::size_t(r)] << ", want " << lse_want);
    for (int64_t d = 0; d < c.dim; ++d) {
      const double w = want.o[std::size_t(r * c.dim + d)], g = got_o[std::size_t(r * c.dim + d)];
      // A row no part saw a key of: exactly 0.
      if (std::isinf(lse_want) ? g != 0.0 : !(std::abs(g - w) <= tolerance * std::max(1.0, std::abs(w))))
        if (bad++ < 5) FAIL_CHECK("row " << r << " dim " << d << ": " << g << ", want " << w);
    }
  }
  CHECK(bad == 0);
}

}  // namespace

TEST_SUITE("merge") {
  TEST_CASE("merge_attention_states: 1 to 16 parts, every dtype, strided parts, empty parts and rows") {
    Context& ctx = context();
    uint64_t seed = case_seed(4000);
    for (const DType dtype : {DType::f32, DType::f16, DType::bf16}) {
      if (!device_supports(dtype)) continue;
      for (const int64_t parts : {1, 2, 3, 16}) check_merge(ctx, {dtype, parts, 2, 3, 13, 24, parts == 3, ++seed});
    }
    check_merge(ctx, {DType::f32, 5, 1, 2, 9, 21, true, ++seed});   // a dim not a multiple of 4 (scalar units)
    check_merge(ctx, {DType::f16, 7, 1, 1, 1, 512, false, ++seed});  // one row, wide
  }

  TEST_CASE("merge_attention_states: 64 parts whose f32 rows pass one binding run in query-row ranges") {
    Context& ctx = context();
    MergeStatesSpec spec;
    spec.parts = 64;
    spec.part = spec.out = TensorLayout::bhsd(DType::f16, 1, 1, 1100, 512);
    const PreparedMergeStates merge(ctx, spec);
    const uint64_t range = ctx.device_info().max_storage_buffer_range;
    // 64 parts x 1100 rows x 512 f32 is 144 MB: past lavapipe's 128 MiB bindings.
    CHECK(merge.ranges() == (64ull * 1100 * 512 * 4 > range - 256 ? 2u : 1u));
    check_merge(ctx, {DType::f16, 64, 1, 1, 1100, 512, false, case_seed(4100)});
  }

  TEST_CASE("merge_attention_states: attention over two halves of the keys, merged, is attention over all of them") {
    Context& ctx = context();
    const int64_t heads = 4, seq_q = 9, seq_k = 40, dim = 32;
    std::mt19937_64 rng(case_seed(4200));
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const auto random = [&](std::size_t n) {
      std::vector<float> v(n);
      for (float& x : v) x = u(rng);
      return v;
    };
    const std::vector<float> q = random(std::size_t(heads * seq_q * dim)), k = random(std::size_t(heads * seq_k * dim)),
                             v = random(std::size_t(heads * seq_k * dim));
    const TensorLayout ql = TensorLayout::bhsd(DType::f32, 1, heads, seq_q, dim);
    // Attention of the queries over keys [k0, k0 + n) (bottom-right causal over the whole: each half
    // sees its own keys' part of every row's window), with its LSE.
    const auto attend = [&](int64_t k0, int64_t n, Buffer& out, Buffer& lse) {
      std::vector<float> kh, vh;
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t j = k0; j < k0 + n; ++j)
          for (int64_t d = 0; d < dim; ++d) {
            kh.push_back(k[std::size_t((h * seq_k + j) * dim + d)]);
            vh.push_back(v[std::size_t((h * seq_k + j) * dim + d)]);
          }
      AttentionLayouts l;
      l.q = ql;
      l.k = l.v = TensorLayout::bhsd(DType::f32, 1, heads, n, dim);
      l.out = ql;
      l.has_lse = true;
      l.options.scale = 1.0f / std::sqrt(float(dim));
      Buffer qb = upload_values(ctx, DType::f32, q), kb = upload_values(ctx, DType::f32, kh),
             vb = upload_values(ctx, DType::f32, vh);
      AttentionBuffers b;
      b.q = &qb, b.k = &kb, b.v = &vb, b.out = &out, b.lse = {&lse, 0};
      PreparedAttention(ctx, AttentionSpec::dense(l)).run(b);
    };
    const auto buffer = [&](int64_t n) { return Buffer::allocate(ctx, uint64_t(n) * 4); };
    Buffer whole = buffer(heads * seq_q * dim), whole_lse = buffer(heads * seq_q);
    Buffer first = buffer(heads * seq_q * dim), first_lse = buffer(heads * seq_q);
    Buffer second = buffer(heads * seq_q * dim), second_lse = buffer(heads * seq_q);
    attend(0, seq_k, whole, whole_lse);
    attend(0, 17, first, first_lse);
    attend(17, seq_k - 17, second, second_lse);
    Buffer merged = buffer(heads * seq_q * dim), merged_lse = buffer(heads * seq_q);
    const Buffer* parts_o[] = {&first, &second};
    const BufferSlice parts_lse[] = {{&first_lse, 0}, {&second_lse, 0}};
    merge_attention_states(ctx, {2, ql, ql, true}, {parts_o, parts_lse, &merged, {&merged_lse, 0}});
    const std::vector<float> want = download_values(whole, DType::f32, std::size_t(heads * seq_q * dim)),
                             got = download_values(merged, DType::f32, want.size());
    for (std::size_t e = 0; e < want.size(); ++e) REQUIRE(std::abs(got[e] - want[e]) <= 1e-5f);
    const std::vector<float> want_lse = download_values(whole_lse, DType::f32, std::size_t(heads * seq_q)),
                             got_lse = download_values(merged_lse, DType::f32, want_lse.size());
    for (std::size_t r = 0; r < want_lse.size(); ++r) REQUIRE(std::abs(got_lse[r] - want_lse[r]) <= 1e-5f * (1 + std::abs(want_lse[r])));
  }

  TEST_CASE("merge_attention_states: errors name the argument, and nothing is written") {
    Context& ctx = context();
    const TensorLayout l = TensorLayout::bhsd(DType::f32, 1, 2, 3, 4);
    CHECK(contains(error_message([&] { (void)PreparedMergeStates(ctx, {0, l, l, false}); }), "parts: 0"));
    CHECK(contains(error_message([&] { (void)PreparedMergeStates(ctx, {65, l, l, false}); }), "parts: 65"));
    CHECK(contains(error_message([&] { (void)PreparedMergeStates(ctx, {2, l, TensorLayout::bhsd(DType::f32, 1, 2, 3, 5), false}); }),
                   "out: shape (1, 2, 3, 5) differs from part's (1, 2, 3, 4)"));
    CHECK(contains(error_message([&] { (void)PreparedMergeStates(ctx, {2, l, TensorLayout::bhsd(DType::f16, 1, 2, 3, 4), false}); }),
                   "out: dtype f16 differs from part's f32"));
    TensorLayout negative = l;
    negative.stride_seq = -4;
    CHECK(contains(error_message([&] { (void)PreparedMergeStates(ctx, {2, negative, l, false}); }), "part.stride_seq"));

    Buffer a = upload_values(ctx, DType::f32, std::vector<float>(24, 1.0f)), b = upload_values(ctx, DType::f32, std::vector<float>(24, 2.0f));
    Buffer la = upload_values(ctx, DType::f32, std::vector<float>(6, 0.0f)), lb = upload_values(ctx, DType::f32, std::vector<float>(6, 0.0f));
    Buffer out = upload_values(ctx, DType::f32, std::vector<float>(24, 7.0f)), small = Buffer::allocate(ctx, 16);
    const Buffer* two[] = {&a, &b};
    const Buffer* one[] = {&a};
    const BufferSlice lses[] = {{&la, 0}, {&lb, 0}};
    const PreparedMergeStates merge(ctx, {2, l, l, false});
    CHECK(contains(error_message([&] { merge.run({one, lses, &out, {}}); }), "prepared for 2 parts"));
    CHECK(contains(error_message([&] { merge.run({two, lses, &small, {}}); }), "out"));
    CHECK(contains(error_message([&] { merge.run({two, lses, &out, {&la, 0}}); }), "lse"));
    const Buffer* aliased[] = {&a, &out};
    CHECK(contains(error_message([&] { merge.run({aliased, lses, &out, {}}); }), "out"));
    const BufferSlice short_lse[] = {{&la, 0}, {&small, 8}};
    CHECK(contains(error_message([&] { merge.run({two, short_lse, &out, {}}); }), "part_lse[1]"));
    CHECK(download_values(out, DType::f32, 24) == std::vector<float>(24, 7.0f));
    // And a good run: equal LSE, so the mean of the parts.
    merge.run({two, lses, &out, {}});
    CHECK(download_values(out, DType::f32, 24) == std::vector<float>(24, 1.5f));
  }
}
