// The host's side of the score modifiers' extreme values (issue 37): window sides up to 2^63 - 1 in
// the int64 rules and the kernels' 32-bit constants, ALiBi's bias saturating for FLT_MAX-sized slopes
// in the fp64 reference, and softcaps that devices could flush to 0 refused. The device's side runs
// in the catalog's extremes sections (conformance_extremes.cpp).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "pipelines.hpp"
#include "support.hpp"

using namespace vkattn;
using vkattn::test::contains;
using vkattn::test::error_message;

namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// A checked problem of seq_q 10, seq_k 12 (bottom-right offset 2) with the given window.
AttentionProblem problem_with_window(Window w, Align align = Align::bottom_right) {
  AttentionLayouts l;
  l.q = TensorLayout::bhsd(DType::f32, 1, 1, 10, 8);
  l.k = TensorLayout::bhsd(DType::f32, 1, 1, 12, 8);
  l.v = l.k;
  l.out = l.q;
  l.options.window = w;
  l.options.align = align;
  return check_attention(l);
}

}  // namespace

TEST_SUITE("unit") {
  TEST_CASE("window sides up to 2^63 - 1 bound nothing, with no overflow in the host's rule") {
    for (const Align align : {Align::bottom_right, Align::top_left}) {
      for (const int64_t side : {kInt64Max, kInt64Max - 1, int64_t(1) << 32, int64_t(INT32_MAX), int64_t(21)}) {
        INFO("side " << side << " align " << to_string(align));
        const AttentionProblem both = problem_with_window(Window{side, side}, align);
        const AttentionProblem right = problem_with_window(Window{0, side}, align);
        const AttentionProblem left = problem_with_window(Window{side, 0}, align);
        for (int64_t i = 0; i < 10; ++i) {
          const int64_t d = i + both.diagonal_offset();
          CHECK(both.visible_key_begin(i) == 0);
          CHECK(both.visible_key_end(i) == 12);
          CHECK(right.visible_key_begin(i) == std::clamp<int64_t>(d, 0, 12));
          CHECK(right.visible_key_end(i) == 12);
          CHECK(left.visible_key_begin(i) == 0);
          CHECK(left.visible_key_end(i) == std::clamp<int64_t>(d + 1, 0, 12));
        }
      }
    }
  }

  TEST_CASE("a window side reaching past every key is the kernels' unbounded constant; others are kept") {
    const AttentionProblem p = problem_with_window(Window{0, 0});  // seq_q + seq_k = 22
    constexpr uint32_t kUnbounded = 0xffffffffu;
    CHECK(detail::window_side_constant(-1, p) == kUnbounded);
    CHECK(detail::window_side_constant(22, p) == kUnbounded);
    CHECK(detail::window_side_constant(INT32_MAX, p) == kUnbounded);
    CHECK(detail::window_side_constant(int64_t(1) << 32, p) == kUnbounded);
    CHECK(detail::window_side_constant(kInt64Max, p) == kUnbounded);
    CHECK(detail::window_side_constant(21, p) == 21u);
    CHECK(detail::window_side_constant(0, p) == 0u);
    // The same pipeline as no window at all when both sides bound nothing.
    AttentionOptions o;
    o.window = Window{kInt64Max, 22};
    const detail::ModifierConstants m = detail::modifier_constants(p, o);
    CHECK(m.at(MOD_SPEC_WINDOW_LEFT_OFFSET) == kUnbounded);
    CHECK(m.at(MOD_SPEC_WINDOW_RIGHT_OFFSET) == kUnbounded);
  }

  TEST_CASE("reference: a FLT_MAX-sized ALiBi slope saturates its bias: finite, never NaN") {
    // Three keys, one query (bottom-right: the query sits at key 2), all scores 0. Slope -2e38: key 0's
    // bias 4e38 saturates to FLT_MAX, key 1's is 2e38, key 2's 0: key 0 takes the row. Slope -FLT_MAX:
    // keys 0 and 1 both saturate to FLT_MAX and share it. Slope FLT_MAX: keys 0 and 1 at -FLT_MAX.
    for (const float slope : {-2e38f, -std::numeric_limits<float>::max(), std::numeric_limits<float>::max()}) {
      INFO("slope " << slope);
      reference::Inputs in;
      in.q_layout = TensorLayout::bhsd(DType::f32, 1, 1, 1, 1);
      in.k_layout = TensorLayout::bhsd(DType::f32, 1, 1, 3, 1);
      in.v_layout = in.k_layout;
      const std::vector<float> q = {0.0f}, k = {0.0f, 0.0f, 0.0f}, v = {1.0f, 2.0f, 4.0f}, slopes = {slope};
      in.q = q;
      in.k = k;
      in.v = v;
      in.alibi_layout = HeadValuesLayout{1, 1, 0};
      in.alibi = slopes;
      const reference::Outputs o = reference::attention(in);
      REQUIRE(std::isfinite(o.at(0, 0, 0, 0)));
      REQUIRE(std::isfinite(o.lse[0]));
      if (slope == -2e38f) {
        CHECK(o.at(0, 0, 0, 0) == 1.0);
        CHECK(o.lse[0] == doctest::Approx(std::numeric_limits<float>::max()));
      } else if (slope < 0) {
        CHECK(o.at(0, 0, 0, 0) == doctest::Approx(1.5));
      } else {
        CHECK(o.at(0, 0, 0, 0) == doctest::Approx(4.0));  // only the diagonal key keeps a finite weight
      }
    }
  }

  TEST_CASE("softcaps that a device could flush to 0 are refused, naming the value") {
    AttentionLayouts l;
    l.q = TensorLayout::bhsd(DType::f32, 1, 1, 4, 8);
    l.k = l.q;
    l.v = l.q;
    l.out = l.q;
    l.options.softcap = 1e-40f;
    CHECK(contains(error_message([&] { check_attention(l); }), " is subnormal (below 1.17549e-38"));
    l.options.softcap = std::numeric_limits<float>::min();
    CHECK_NOTHROW(check_attention(l));
    l.options.softcap = std::numeric_limits<float>::max();
    CHECK_NOTHROW(check_attention(l));
  }
}
