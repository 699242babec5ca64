// Packed variable-length batches (PreparedVarlenAttention) against the fp64 reference: the
// conformance catalog's varlen cases on the shared Context's kernel (ctest runs this suite once per
// fused kernel), the long case on lavapipe's loop limit, and the refusals that need a device.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "conform/catalog.hpp"
#include "support.hpp"

using namespace vkattn;
using namespace vkattn::test;

namespace {

// On the suite's path: the fused kernels, or with --path=unfused the three-stage path with the
// weights (q8_0 cases: its refusal).
void run_all(const std::vector<conform::ServingCase>& cases) {
  for (const conform::ServingCase& c : cases) {
    if (!device_supports(c.dtype)) continue;
    INFO(conform::describe(c));
    const conform::ServingResult r = conform::run_serving_case(context(), c, attention_path());
    INFO(r.plan);
    CHECK_MESSAGE(r.ok, r.text);
    expect_no_validation_messages();
  }
}

// Two sequences of 1 and 3 rows, MHA, 2 heads of 32 dims, f32.
VarlenAttentionLayouts small_layouts() {
  VarlenAttentionLayouts l;
  l.q = packed_layout(DType::f32, 4, 2, 32);
  l.k = packed_layout(DType::f32, 4, 2, 32);
  l.v = l.k;
  l.out = l.q;
  l.batch = 2;
  return l;
}


// A poison bit pattern (a quiet NaN with a payload): an output element that still holds it after a
// run was not written.
constexpr uint32_t kPoison = 0x7fc0dead;

uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

// Sequences longer than the bounds the plan was made for (issue 37): two sequences of
// (q, k) = (2, 2) and (4, 4), MHA over one KV head (H 2, G 1, D 32), f32. On the fused path the
// rows of a sequence past its first max_seqlen_q are never written (O and LSE keep their poison)
// and its keys past its first max_seqlen_k are masked for every row, the causal rule and the other
// alignments staying those of its own lengths; on the three-stage path, which does not use the
// bounds, every row is its sequence's with all its keys. Checked against the dense reference of each
// sequence with key lengths min(seq_k, max_seqlen_k) (fused) or seq_k (three-stage).
void check_past_bounds(int64_t max_q, int64_t max_k, Causal causal, int num_splits, AttentionPath path) {
  constexpr int64_t kH = 2, kG = 1, kD = 32, kTotal = 6;
  const std::vector<int32_t> cu = {0, 2, 6};
  VarlenAttentionLayouts l;
  l.q = packed_layout(DType::f32, kTotal, kH, kD);
  l.k = l.v = packed_layout(DType::f32, kTotal, kG, kD);
  l.out = l.q;
  l.batch = 2;
  l.max_seqlen_q = max_q;
  l.max_seqlen_k = max_k;
  l.has_lse = true;
  l.path = path;
  l.options.causal = causal;
  l.options.num_splits = num_splits;
  const PreparedVarlenAttention prepared(context(), l);
  INFO("plan: " << std::string(prepared.plan().path) << " " << std::string(prepared.plan().kernel) << " splits " << prepared.plan().splits);

  std::vector<float> q(std::size_t(kTotal * kH * kD)), kv(std::size_t(kTotal * kG * kD));
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = float(std::sin(0.37 * double(i) + 0.1));
  for (std::size_t i = 0; i < kv.size(); ++i) kv[i] = float(std::cos(0.61 * double(i) + 0.3));
  Buffer qb = Buffer::allocate(context(), q.size() * 4), kvb = Buffer::allocate(context(), kv.size() * 4);
  qb.upload(q.data(), q.size() * 4);
  kvb.upload(kv.data(), kv.size() * 4);
  std::vector<uint32_t> poison_o(q.size(), kPoison), poison_lse(std::size_t(kH * kTotal), kPoison);
  Buffer ob = Buffer::allocate(context(), poison_o.size() * 4), lseb = Buffer::allocate(context(), poison_lse.size() * 4);
  ob.upload(poison_o.data(), poison_o.size() * 4);
  lseb.upload(poison_lse.data(), poison_lse.size() * 4);
  Buffer cub = Buffer::allocate(context(), cu.size() * 4);
  cub.upload(cu.data(), cu.size() * 4);
  VarlenAttentionBuffers b;
  b.q = &qb, b.k = &kvb, b.v = &kvb, b.out = &ob, b.lse = {&lseb, 0};
  b.cu_seqlens_q = {&cub, 0}, b.cu_seqlens_k = {&cub, 0};
  prepared.run(b);
  expect_no_validation_messages();
  std::vector<float> o(q.size()), lse(poison_lse.size());
  ob.download(o.data(), o.size() * 4);
  lseb.download(lse.data(), lse.size() * 4);

  const bool fused = std::string(prepared.plan().path) == "fused";
  const int64_t bound_q = fused && max_q > 0 ? max_q : kTotal, bound_k = fused && max_k > 0 ? max_k : kTotal;
  for (int64_t s = 0; s < 2; ++s) {
    const int64_t q0 = cu[std::size_t(s)], sq = cu[std::size_t(s + 1)] - q0, sk = sq;
    // The sequence's dense problem (batch 1), its keys cut by key padding at the bound.
    reference::Inputs in;
    in.q_layout = TensorLayout::bshd(DType::f32, 1, sq, kH, kD);
    in.q_layout.offset = q0 * kH * kD;
    in.k_layout = in.v_layout = TensorLayout::bshd(DType::f32, 1, sk, kG, kD);
    in.k_layout.offset = in.v_layout.offset = q0 * kG * kD;
    in.q = q, in.k = kv, in.v = kv;
    const std::vector<int32_t> lengths = {int32_t(std::min(sk, bound_k))};
    in.kv_lengths = lengths;
    in.options.causal = causal;
    const reference::Outputs r = reference::attention(in);
    for (int64_t i = 0; i < sq; ++i)
      for (int64_t h = 0; h < kH; ++h) {
        INFO("sequence " << s << " row " << i << " head " << h);
        const float got_lse = lse[std::size_t(h * kTotal + q0 + i)];
        if (i >= bound_q) {
          CHECK(bits_of(got_lse) == kPoison);
          for (int64_t d = 0; d < kD; ++d) CHECK(bits_of(o[std::size_t(((q0 + i) * kH + h) * kD + d)]) == kPoison);
          continue;
        }
        const double want_lse = r.lse[std::size_t(h * sq + i)];
        CHECK(double(got_lse) == doctest::Approx(want_lse).epsilon(1e-4));
        for (int64_t d = 0; d < kD; ++d)
          CHECK(double(o[std::size_t(((q0 + i) * kH + h) * kD + d)]) == doctest::Approx(r.at(0, h, i, d)).epsilon(1e-4));
      }
  }
}

}  // namespace

TEST_SUITE("varlen") {
  TEST_CASE("varlen: empty and uneven sequences, decode, GQA, modifiers, split-KV, every dtype") {
    run_all(conform::catalog_section("varlen", base_seed()).serving_cases);
  }

  TEST_CASE("varlen: q8_0 K and V are sized in blocks, and their dims are whole blocks") {
    VarlenAttentionLayouts l = small_layouts();
    l.kv_quant = KvQuant::q8_0;  // K and V: 256 elements, 8 blocks, 272 bytes
    const PreparedVarlenAttention prepared(context(), l);
    Buffer q = Buffer::allocate(context(), 1024), out = Buffer::allocate(context(), 1024);
    Buffer kv = Buffer::allocate(context(), 272), small = Buffer::allocate(context(), 256);
    Buffer cu = Buffer::allocate(context(), 12);
    const int32_t offsets[3] = {0, 1, 4};
    cu.upload(offsets, 12);
    VarlenAttentionBuffers b;
    b.q = &q, b.k = &kv, b.v = &kv, b.out = &out;
    b.cu_seqlens_q = {&cu, 0}, b.cu_seqlens_k = {&cu, 0};
    CHECK_NOTHROW(prepared.run(b));
    b.v = &small;  // 256 int8 would fit; their blocks do not
    CHECK(contains(error_message([&] { prepared.run(b); }), "v: needs 272 bytes"));
    l.k = l.v = packed_layout(DType::f32, 4, 2, 48);
    l.q = l.out = packed_layout(DType::f32, 4, 2, 48);
    CHECK(contains(error_message([&] { PreparedVarlenAttention(context(), l); }), "must be a multiple of 32 for q8_0"));
    expect_no_validation_messages();
  }

  TEST_CASE("varlen: max_seqlen past the totals is refused, naming it") {
    VarlenAttentionLayouts l = small_layouts();
    l.max_seqlen_k = 5;
    CHECK(contains(error_message([&] { PreparedVarlenAttention(context(), l); }),
                   "max_seqlen_k (5) must be in [0, total_k (4)]"));
    l.max_seqlen_k = 0;
    l.max_seqlen_q = -1;
    CHECK(contains(error_message([&] { PreparedVarlenAttention(context(), l); }), "max_seqlen_q (-1)"));
  }

  TEST_CASE("varlen: buffers that do not fit are refused, naming them") {
    const VarlenAttentionLayouts l = small_layouts();
    const PreparedVarlenAttention prepared(context(), l);
    Buffer q = Buffer::allocate(context(), 4 * 2 * 32 * 4), out = Buffer::allocate(context(), 4 * 2 * 32 * 4);
    Buffer kv = Buffer::allocate(context(), 4 * 2 * 32 * 4), small = Buffer::allocate(context(), 8);
    Buffer cu = Buffer::allocate(context(), 12);
    const int32_t offsets[3] = {0, 1, 4};
    cu.upload(offsets, sizeof offsets);
    VarlenAttentionBuffers b;
    b.q = &q, b.k = &kv, b.v = &kv, b.out = &out;
    b.cu_seqlens_q = {&cu, 0}, b.cu_seqlens_k = {&cu, 0};
    CHECK_NOTHROW(prepared.run(b));  // K and V, and the two offsets, may share a buffer: they are only read
    b.cu_seqlens_k = {&small, 0};
    CHECK(contains(error_message([&] { prepared.run(b); }), "cu_seqlens_k: needs 12 bytes"));
    b.cu_seqlens_k = {&cu, 0};
    b.out = &kv;
    CHECK(contains(error_message([&] { prepared.run(b); }), "out overlaps k"));
    b.out = &out;
    b.lse = {&small, 0};
    CHECK(contains(error_message([&] { prepared.run(b); }), "lse: given, but the call was prepared without it"));
    expect_no_validation_messages();
  }

  TEST_CASE("varlen: offsets that break the contract are clamped on the device, never out of bounds") {
    // Offsets past the totals, decreasing, and a sequence longer than max_seqlen: wrong rows, but the
    // guard bytes after O and the LSE stay intact (the runner's GuardedBuffer is not needed: the
    // kernels clamp every row into the tensors, which the buffers here are exactly large enough for).
    // Both paths: the fused kernels, and the three-stage one with the weights (its row softmax).
    for (const bool weights : {false, true}) {
      INFO("weights: " << weights);
      VarlenAttentionLayouts l = small_layouts();
      l.max_seqlen_q = 2;
      l.max_seqlen_k = 2;
      l.has_lse = true;
      l.weights = weights;
      const PreparedVarlenAttention prepared(context(), l);
      CHECK(std::string(prepared.plan().path) == (weights ? "unfused" : "fused"));
      Buffer q = Buffer::allocate(context(), 4 * 2 * 32 * 4), kv = Buffer::allocate(context(), 4 * 2 * 32 * 4);
      Buffer out = Buffer::allocate(context(), 4 * 2 * 32 * 4 + 256), lse = Buffer::allocate(context(), 2 * 4 * 4 + 256);
      Buffer p = Buffer::allocate(context(), 2 * 4 * 4 * 4 + 256);
      q.fill(0), kv.fill(0), out.fill(0xA5), lse.fill(0xA5), p.fill(0xA5);
      Buffer cu_q = Buffer::allocate(context(), 12), cu_k = Buffer::allocate(context(), 12);
      const int32_t bad_q[3] = {3, -7, 1000}, bad_k[3] = {-1, 100, 2};
      cu_q.upload(bad_q, sizeof bad_q);
      cu_k.upload(bad_k, sizeof bad_k);
      VarlenAttentionBuffers b;
      b.q = &q, b.k = &kv, b.v = &kv, b.out = &out, b.lse = {&lse, 0};
      if (weights) b.weights = {&p, 0};
      b.cu_seqlens_q = {&cu_q, 0}, b.cu_seqlens_k = {&cu_k, 0};
      prepared.run(b);
      std::vector<uint8_t> tail(256);
      out.download(tail.data(), 256, 4 * 2 * 32 * 4);
      CHECK(std::all_of(tail.begin(), tail.end(), [](uint8_t x) { return x == 0xA5; }));
      lse.download(tail.data(), 256, 2 * 4 * 4);
      CHECK(std::all_of(tail.begin(), tail.end(), [](uint8_t x) { return x == 0xA5; }));
      p.download(tail.data(), 256, 2 * 4 * 4 * 4);
      CHECK(std::all_of(tail.begin(), tail.end(), [](uint8_t x) { return x == 0xA5; }));
      expect_no_validation_messages();
    }
  }

  TEST_CASE("varlen: a sequence longer than max_seqlen_q or max_seqlen_k: rows inside the bounds right, rows past them untouched") {
    // Issue 37: max_seqlen_q 2 beside a sequence of 4 queries gave NaN in the rows inside the bound
    // and the split path's uninitialised partials in the LSE. Every split choice (0: the planner's),
    // causal or not, the bound on queries, on keys and on both; the three-stage path ignores them.
    const AttentionPath path = attention_path() == AttentionPath::unfused ? AttentionPath::unfused : AttentionPath::fused;
    for (const auto& [max_q, max_k] : {std::pair<int64_t, int64_t>{2, 0}, {0, 2}, {2, 2}, {3, 3}})
      for (const Causal causal : {Causal::none, Causal::bottom_right})
        for (const int splits : {0, 1, 2, 4}) {
          INFO("max_seqlen_q " << max_q << " max_seqlen_k " << max_k << " causal " << int(causal) << " num_splits " << splits);
          check_past_bounds(max_q, max_k, causal, splits, path);
        }
  }

  TEST_CASE("varlen: the weights buffer is checked like the others, and path fused cannot give it") {
    VarlenAttentionLayouts l = small_layouts();
    l.weights = true;
    const PreparedVarlenAttention prepared(context(), l);
    CHECK(std::string(prepared.plan().path) == "unfused");
    Buffer q = Buffer::allocate(context(), 4 * 2 * 32 * 4), out = Buffer::allocate(context(), 4 * 2 * 32 * 4);
    Buffer kv = Buffer::allocate(context(), 4 * 2 * 32 * 4), p = Buffer::allocate(context(), 2 * 4 * 4 * 4);
    Buffer cu = Buffer::allocate(context(), 12);
    const int32_t offsets[3] = {0, 1, 4};
    cu.upload(offsets, sizeof offsets);
    VarlenAttentionBuffers b;
    b.q = &q, b.k = &kv, b.v = &kv, b.out = &out;
    b.cu_seqlens_q = {&cu, 0}, b.cu_seqlens_k = {&cu, 0};
    CHECK(contains(error_message([&] { prepared.run(b); }), "weights: the call was prepared with it, but none was given"));
    b.weights = {&p, 4};
    CHECK(contains(error_message([&] { prepared.run(b); }), "weights: needs 128 bytes"));
    b.weights = {&out, 0};
    CHECK(contains(error_message([&] { prepared.run(b); }), "overlaps"));
    b.weights = {&p, 0};
    CHECK_NOTHROW(prepared.run(b));
    // Sequence 0 (query 0) sees key 0 only, sequence 1 (queries 1-3) keys 1-3: every other weight is 0.
    std::vector<float> w(2 * 4 * 4);
    p.download(w.data(), w.size() * 4);
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t i = 0; i < 4; ++i)
        for (int64_t j = 0; j < 4; ++j)
          if ((i == 0) != (j == 0)) CHECK(w[std::size_t((h * 4 + i) * 4 + j)] == 0.0f);
    l.path = AttentionPath::fused;
    CHECK(contains(error_message([&] { PreparedVarlenAttention(context(), l); }), "path: fused, but the weights P were requested"));
    expect_no_validation_messages();
  }
}

TEST_SUITE("long") {
  TEST_CASE("varlen: a sequence of 70,000 keys beside short ones") {
    run_all(conform::catalog_section("long-varlen", base_seed()).serving_cases);
  }
}
