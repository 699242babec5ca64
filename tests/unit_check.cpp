// check_attention: the problem it derives from valid layouts, and a message that names the argument
// and its values for each kind of bad argument.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "support.hpp"

using namespace vkattn;
using vkattn::test::contains;
using vkattn::test::error_message;

namespace {

// B 2, H 8 over 2 KV heads, Sq 10, Sk 12, Dqk 64, Dv 32: every size distinct, so a message that
// quotes the wrong field shows.
AttentionLayouts valid(DType dtype = DType::f32) {
  AttentionLayouts l;
  l.q = TensorLayout::bhsd(dtype, 2, 8, 10, 64);
  l.k = TensorLayout::bhsd(dtype, 2, 2, 12, 64);
  l.v = TensorLayout::bhsd(dtype, 2, 2, 12, 32);
  l.out = TensorLayout::bhsd(dtype, 2, 8, 10, 32);
  return l;
}

std::string check_message(const AttentionLayouts& l) {
  return error_message([&] { check_attention(l); });
}

}  // namespace

TEST_SUITE("unit") {
  TEST_CASE("check_attention: a valid problem") {
    AttentionLayouts l = valid(DType::bf16);
    l.has_lse = true;
    const AttentionProblem p = check_attention(l);
    CHECK(p.batch == 2);
    CHECK(p.heads == 8);
    CHECK(p.kv_heads == 2);
    CHECK(p.group_size() == 4);
    CHECK(p.seq_q == 10);
    CHECK(p.seq_k == 12);
    CHECK(p.dim_qk == 64);
    CHECK(p.dim_v == 32);
    CHECK(p.scale == doctest::Approx(0.125));
    CHECK(p.dtype == DType::bf16);
    CHECK(p.causal == Causal::none);
    CHECK_FALSE(p.has_mask);
    CHECK_FALSE(p.has_kv_lengths);
    CHECK(p.has_lse);

    l.options.scale = -0.5f;
    l.options.causal = Causal::bottom_right;
    l.mask = MaskLayout::dense(MaskType::f16, 1, 8, 10, 12);
    l.has_kv_lengths = true;
    const AttentionProblem p2 = check_attention(l);
    CHECK(p2.scale == -0.5f);
    CHECK(p2.causal == Causal::bottom_right);
    CHECK(p2.has_mask);
    CHECK(p2.has_kv_lengths);
  }

  TEST_CASE("check_attention: head dims 1 and 256 are accepted, other layouts too") {
    AttentionLayouts l = valid();
    l.q = TensorLayout::bhsd(DType::f32, 2, 8, 10, 256);
    l.k = TensorLayout::bshd(DType::f32, 2, 12, 2, 256);
    l.v = TensorLayout::bshd(DType::f32, 2, 12, 2, 1);
    l.out = TensorLayout::bshd(DType::f32, 2, 10, 8, 1);
    CHECK_NOTHROW(check_attention(l));
    // Inputs may alias or broadcast: a stride-0 batch in Q is fine.
    l.q.stride_batch = 0;
    CHECK_NOTHROW(check_attention(l));
    // A dim of size 1 may have any stride in the output.
    AttentionLayouts one = valid();
    one.out = TensorLayout::bhsd(DType::f32, 1, 1, 10, 32);
    one.q = TensorLayout::bhsd(DType::f32, 1, 1, 10, 64);
    one.k = TensorLayout::bhsd(DType::f32, 1, 1, 12, 64);
    one.v = TensorLayout::bhsd(DType::f32, 1, 1, 12, 32);
    one.out.stride_batch = 0;
    one.out.stride_head = 5;
    CHECK_NOTHROW(check_attention(one));
  }

  TEST_CASE("check_attention: sizes must be at least 1") {
    AttentionLayouts l = valid();
    l.q.dim = 0;
    CHECK(contains(check_message(l), "q.dim (0)"));
    l = valid();
    l.k.seq = 0;
    l.v.seq = 0;
    CHECK(contains(check_message(l), "k.seq (0)"));
    l = valid();
    l.out.batch = -1;
    CHECK(contains(check_message(l), "out.batch (-1)"));
  }

  TEST_CASE("check_attention: strides and offsets must not be negative") {
    AttentionLayouts l = valid();
    l.q.stride_seq = -64;
    CHECK(contains(check_message(l), "q.stride_seq (-64)"));
    l = valid();
    l.v.offset = -3;
    CHECK(contains(check_message(l), "v.offset (-3)"));
  }

  TEST_CASE("check_attention: layouts reaching past 2^62 elements are refused, not wrapped") {
    const int64_t huge = 2147483647;
    AttentionLayouts l;
    l.q = TensorLayout::bhsd(DType::f32, huge, huge, huge, 256);  // strides saturate instead of wrapping
    l.k = l.q;
    l.v = l.q;
    l.out = l.q;
    CHECK(contains(check_message(l), "q: sizes and strides reach past element 2^62"));
    l = valid();
    l.mask = MaskLayout::dense(MaskType::boolean, 1, 1, 10, 12);
    l.mask->stride_q = int64_t(1) << 61;
    CHECK(contains(check_message(l), "mask: sizes and strides reach past element 2^62"));
  }

  TEST_CASE("check_attention: extents whose products pass 2^127 are refused without overflow (found by fuzzing)") {
    // Three (size - 1) x stride products near 2^126 each: their sum overflowed a signed 128-bit
    // integer (undefined behaviour, reported by UBSan) before the sum became unsigned.
    AttentionLayouts l = valid();
    const int64_t big = INT64_MAX;  // (2^63 - 1)^2 is about 2^126: three of them pass 2^127
    l.q.batch = l.q.heads = l.q.seq = big;
    l.q.stride_batch = l.q.stride_head = l.q.stride_seq = big;
    CHECK(contains(check_message(l), "reach past element 2^62"));
  }

  TEST_CASE("check_attention: a dtype outside the enum is refused (found by fuzzing)") {
    AttentionLayouts l = valid();
    for (TensorLayout* t : {&l.q, &l.k, &l.v, &l.out}) t->dtype = static_cast<DType>(7);
    CHECK(contains(check_message(l), "q.dtype: invalid value 7"));
  }

  TEST_CASE("check_attention: one dtype for q, k, v and out") {
    AttentionLayouts l = valid();
    l.k.dtype = DType::f16;
    CHECK(check_message(l) == "k.dtype (f16) must equal q.dtype (f32)");
    l = valid(DType::f16);
    l.out.dtype = DType::bf16;
    CHECK(check_message(l) == "out.dtype (bf16) must equal q.dtype (f16)");
  }

  TEST_CASE("check_attention: shapes must agree") {
    AttentionLayouts l = valid();
    l.v.seq = 10;
    CHECK(check_message(l) == "v.seq (10) must equal k.seq (12)");
    l = valid();
    l.k.batch = 3;
    CHECK(check_message(l) == "k.batch (3) must equal q.batch (2)");
    l = valid();
    l.out.heads = 4;
    CHECK(check_message(l) == "out.heads (4) must equal q.heads (8)");
    l = valid();
    l.v.heads = 4;
    CHECK(check_message(l) == "v.heads (4) must equal k.heads (2)");
    l = valid();
    l.out.seq = 11;
    CHECK(check_message(l) == "out.seq (11) must equal q.seq (10)");
    l = valid();
    l.k.dim = 32;
    CHECK(check_message(l) == "k.dim (32) must equal q.dim (64)");
    l = valid();
    l.out.dim = 64;
    CHECK(check_message(l) == "out.dim (64) must equal v.dim (32)");
  }

  TEST_CASE("check_attention: GQA needs heads % kv_heads == 0") {
    AttentionLayouts l = valid();
    l.k.heads = l.v.heads = 3;
    CHECK(check_message(l) == "k.heads (3) must divide q.heads (8) (GQA requires heads % kv_heads == 0)");
    l = valid();
    l.k.heads = l.v.heads = 16;  // more KV heads than query heads
    CHECK(contains(check_message(l), "k.heads (16) must divide q.heads (8)"));
  }

  TEST_CASE("check_attention: head dims up to 576, none above") {
    AttentionLayouts l = valid();
    l.q = TensorLayout::bhsd(DType::f32, 2, 8, 10, 576);
    l.k = TensorLayout::bhsd(DType::f32, 2, 2, 12, 576);
    l.v = TensorLayout::bhsd(DType::f32, 2, 2, 12, 512);
    l.out = TensorLayout::bhsd(DType::f32, 2, 8, 10, 512);
    CHECK(check_message(l) == "<no vkattn::Error thrown>");
    l = valid();
    l.q.dim = l.k.dim = 577;
    CHECK(check_message(l) == "q.dim (577) exceeds the maximum head dim 576");
    l = valid();
    l.v.dim = l.out.dim = 600;
    CHECK(check_message(l) == "v.dim (600) exceeds the maximum head dim 576");
  }

  TEST_CASE("check_attention: distinct output elements must not overlap") {
    AttentionLayouts l = valid();
    l.out.stride_head = 0;  // every head writes the same place
    std::string m = check_message(l);
    CHECK(contains(m, "out"));
    CHECK(contains(m, "overlap"));
    l = valid();
    l.out.stride_seq = 16;  // rows of 32 elements, 16 apart
    CHECK(contains(check_message(l), "overlap"));
    l = valid();
    l.out.stride_batch = l.out.stride_head;  // batch 1 lands on head 1
    CHECK(contains(check_message(l), "overlap"));
    l = valid();
    l.out = TensorLayout::bshd(DType::f32, 2, 10, 8, 32);  // transposed, but one-to-one
    CHECK_NOTHROW(check_attention(l));
    l.out.stride_head = 40;  // padded rows: still one-to-one
    l.out.stride_seq = 8 * 40;
    l.out.stride_batch = 10 * 8 * 40;
    CHECK_NOTHROW(check_attention(l));
  }

  TEST_CASE("check_attention: the mask must broadcast") {
    AttentionLayouts l = valid();
    for (const auto& [mb, mh] : {std::pair<int64_t, int64_t>{1, 1}, {2, 1}, {1, 8}, {2, 8}}) {
      l.mask = MaskLayout::dense(MaskType::boolean, mb, mh, 10, 12);
      CHECK_NOTHROW(check_attention(l));
    }
    l.mask = MaskLayout::dense(MaskType::boolean, 3, 1, 10, 12);
    CHECK(check_message(l) == "mask: batch 3 does not broadcast to batch 2 (must be 1 or 2)");
    l.mask = MaskLayout::dense(MaskType::f32, 1, 2, 10, 12);  // KV heads, not query heads
    CHECK(check_message(l) == "mask: heads 2 does not broadcast to heads 8 (must be 1 or 8)");
    l.mask = MaskLayout::dense(MaskType::f32, 1, 1, 12, 12);
    std::string m = check_message(l);
    CHECK(contains(m, "mask"));
    CHECK(contains(m, "seq_q (12)"));
    l.mask = MaskLayout::dense(MaskType::f32, 1, 1, 10, 10);
    m = check_message(l);
    CHECK(contains(m, "mask"));
    CHECK(contains(m, "seq_k (10)"));
    l.mask = MaskLayout::dense(MaskType::f16, 1, 1, 10, 12);
    l.mask->stride_q = -12;
    CHECK(contains(check_message(l), "mask.stride_q (-12)"));
  }

  TEST_CASE("check_attention: the scale must be finite") {
    AttentionLayouts l = valid();
    l.options.scale = std::numeric_limits<float>::infinity();
    CHECK(check_message(l) == "scale: must be finite, got inf");
    l.options.scale = -std::numeric_limits<float>::infinity();
    CHECK(check_message(l) == "scale: must be finite, got -inf");
    l.options.scale = std::numeric_limits<float>::quiet_NaN();
    CHECK(check_message(l) == "scale: must be finite, got nan");
    l.options.scale = 0.0f;  // finite: allowed (uniform attention)
    CHECK_NOTHROW(check_attention(l));
  }

  TEST_CASE("AttentionProblem::causal_key_end") {
    AttentionProblem p;
    p.seq_q = 3;
    p.seq_k = 5;
    CHECK(p.causal_key_end(0) == 5);
    p.causal = Causal::top_left;
    CHECK(p.causal_key_end(0) == 1);
    CHECK(p.causal_key_end(2) == 3);
    p.causal = Causal::bottom_right;
    CHECK(p.causal_key_end(0) == 3);
    CHECK(p.causal_key_end(2) == 5);
    p.seq_q = 5;
    p.seq_k = 2;
    CHECK(p.causal_key_end(0) == -2);  // fully masked row
    CHECK(p.causal_key_end(3) == 1);
    CHECK(p.causal_key_end(4) == 2);
  }

  TEST_CASE("check_attention: the score modifiers") {
    AttentionLayouts l = valid();
    l.options.window = Window{-2, 3};
    CHECK(check_message(l) == "window: (-2, 3) sides must be >= 0, or -1 for unbounded");
    l.options.window = Window{4, -1};
    AttentionProblem p = check_attention(l);
    CHECK((p.window_left == 4 && p.window_right == -1 && p.align == Align::bottom_right));
    l.options.causal = Causal::top_left;  // causal is the window's right side 0, and sets the alignment
    p = check_attention(l);
    CHECK((p.window_left == 4 && p.window_right == 0 && p.align == Align::top_left));
    l.options.align = Align::bottom_right;
    CHECK(check_message(l) ==
          "align (bottom-right) must agree with causal (top-left) or be absent: one alignment serves causal, the "
          "window and ALiBi");
    l.options.align = Align::top_left;
    CHECK_NOTHROW(check_attention(l));
    l.options = {};
    for (const float c : {0.0f, -1.0f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
      l.options.softcap = c;
      CHECK(contains(check_message(l), "softcap: must be finite and > 0, got "));
    }
    l.options = {};
    l.alibi = HeadValuesLayout{1, 7, 0};
    CHECK(check_message(l) == "alibi: shape (7) must be (heads) = (8) or (batch, heads) = (2, 8)");
    l.alibi = HeadValuesLayout{2, 8, 0};
    p = check_attention(l);
    CHECK((p.per_head.alibi && p.alibi_per_batch));
    l.alibi = HeadValuesLayout{1, 8, 3};
    p = check_attention(l);
    CHECK((p.per_head.alibi && !p.alibi_per_batch));
    l.alibi.reset();
    l.sinks = HeadValuesLayout{2, 8, 0};
    CHECK(check_message(l) == "sinks: shape (2, 8) must be (heads) = (8)");
    l.sinks = HeadValuesLayout{1, 8, -1};
    CHECK(check_message(l) == "sinks.offset (-1) must be >= 0");
  }

  TEST_CASE("AttentionProblem: visible keys under causal and a window, both alignments") {
    AttentionLayouts l = valid();  // seq_q 10, seq_k 12: bottom-right offset 2
    l.options.window = Window{3, 1};
    AttentionProblem p = check_attention(l);
    CHECK(p.visible_key_begin(0) == 0);  // 0 + 2 - 3 < 0
    CHECK(p.visible_key_end(0) == 4);    // keys 0..3
    CHECK(p.visible_key_begin(5) == 4);
    CHECK(p.visible_key_end(9) == 12);   // clamped to seq_k
    l.options.align = Align::top_left;
    p = check_attention(l);
    CHECK(p.visible_key_begin(5) == 2);
    CHECK(p.visible_key_end(5) == 7);
    l.options.align.reset();
    l.options.causal = Causal::bottom_right;  // right side 0
    p = check_attention(l);
    CHECK(p.visible_key_end(5) == 8);
    CHECK(p.visible_key_begin(5) == 4);
    l.options.window = Window{-1, -1};  // unbounded: causal alone
    p = check_attention(l);
    CHECK((p.visible_key_begin(5) == 0 && p.visible_key_end(5) == 8));
  }
}
