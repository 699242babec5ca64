// The table of score options (vkattn/score_options.hpp): its rows, and what every front end reads
// from them (presence, copy, text, feature tags, checks, the fp64 score step and its derivative).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "support.hpp"
#include "vkattn/score_options.hpp"

using namespace vkattn;
using vkattn::test::error_message;

namespace {

const ScoreOption& row(std::string_view name) {
  for (const ScoreOption& o : score_options())
    if (o.name == name) return o;
  FAIL("no score option named " << name);
  return score_options().front();  // (not reached: FAIL throws)
}

AttentionOptions every_option() {
  AttentionOptions o;
  o.window = Window{7, 3};
  o.align = Align::top_left;
  o.softcap = 1e8f;
  return o;
}

}  // namespace

TEST_SUITE("unit") {
  TEST_CASE("score options: the rows, in the order checks run and the command line lists them") {
    std::vector<std::string> names;
    for (const ScoreOption& o : score_options()) {
      names.emplace_back(o.name);
      CHECK(!o.help.empty());
      const bool has_check = o.check != nullptr;
      CHECK(has_check);
    }
    CHECK(names == std::vector<std::string>{"window", "align", "softcap"});
    // Only the softcap changes scores; the window masks keys and align places the window and ALiBi.
    const bool window_steps = row("window").score != nullptr, align_steps = row("align").score != nullptr,
               softcap_steps = row("softcap").score != nullptr;
    CHECK_FALSE(window_steps);
    CHECK_FALSE(align_steps);
    CHECK(softcap_steps);
    // A step has its derivative (the backward pass chains them), and an option without a step none.
    for (const ScoreOption& o : score_options()) {
      INFO(o.name);
      CHECK((o.score != nullptr) == (o.score_derivative != nullptr));
    }
  }

  TEST_CASE("score options: presence, copy and text of each member") {
    const AttentionOptions none, all = every_option();
    for (const ScoreOption& o : score_options()) {
      CHECK_FALSE(o.is_set(none));
      CHECK(o.is_set(all));
      CHECK(o.text(none).empty());
      AttentionOptions copy;
      copy.causal = Causal::top_left;  // not a score option: left as it is
      o.copy(all, copy);
      CHECK(o.is_set(copy));
      CHECK(o.text(copy) == o.text(all));
      CHECK(copy.causal == Causal::top_left);
    }
    CHECK(row("window").text(all) == "7:3");
    CHECK(row("align").text(all) == "top-left");
    CHECK(row("softcap").text(all) == "1e+08");
    AttentionOptions max;
    max.softcap = std::numeric_limits<float>::max();
    CHECK(row("softcap").text(max) == "3.4028235e+38");  // reads back to the same float
    CHECK(score_options_text(all, " ") == " window 7:3 align top-left softcap 1e+08");
    CHECK(score_options_text(all, "=") == " window=7:3 align=top-left softcap=1e+08");
    CHECK(score_options_text(none, " ").empty());
    AttentionOptions copied;
    copy_score_options(all, copied);
    CHECK(score_options_text(copied, " ") == score_options_text(all, " "));
  }

  TEST_CASE("score options: feature tags (align is none of its own)") {
    AttentionOptions o = every_option();
    CHECK(row("window").feature(o) == "window, two-sided");
    CHECK(row("align").feature(o).empty());
    CHECK(row("softcap").feature(o) == "softcap");
    o.window = Window{16, -1};
    CHECK(row("window").feature(o) == "window, one-sided");
    CHECK(row("softcap").feature(AttentionOptions{}).empty());
  }

  TEST_CASE("score options: each row's check names the option and the value") {
    AttentionOptions o;
    o.window = Window{-2, 3};
    CHECK(error_message([&] { row("window").check(o); }) == "window: (-2, 3) sides must be >= 0, or -1 for unbounded");
    o.align = static_cast<Align>(5);
    CHECK(error_message([&] { row("align").check(o); }) == "align: invalid value 5");
    o.align = Align::top_left;
    o.causal = Causal::bottom_right;
    CHECK(test::contains(error_message([&] { row("align").check(o); }),
                         "align (top-left) must agree with causal (bottom-right)"));
    o.causal = Causal::top_left;
    CHECK_NOTHROW(row("align").check(o));
    for (const float bad : {0.0f, -1.0f, std::numeric_limits<float>::infinity()}) {
      o.softcap = bad;
      CHECK(test::contains(error_message([&] { row("softcap").check(o); }), "softcap: must be finite and > 0, got "));
    }
    o.softcap = 1e-40f;
    CHECK(test::contains(error_message([&] { row("softcap").check(o); }), "softcap: 1e-40 is subnormal"));
    o.softcap = std::numeric_limits<float>::min();
    CHECK_NOTHROW(row("softcap").check(o));
  }

  TEST_CASE("score options: the softcap's fp64 step bends finite scores and passes NaN and Inf") {
    const auto step = row("softcap").score;
    CHECK(step(2.0, 5.0) == 5.0 * std::tanh(2.0 / 5.0));
    CHECK(step(-1e300, 5.0) == -5.0);
    CHECK(std::isinf(step(std::numeric_limits<double>::infinity(), 5.0)));
    CHECK(std::isnan(step(std::nan(""), 5.0)));
  }

  TEST_CASE("score options: each step's derivative agrees with central differences of the step") {
    for (const ScoreOption& o : score_options()) {
      if (!o.score) continue;
      INFO(o.name);
      for (const double value : {0.5, 5.0, 30.0})
        for (const double s : {-40.0, -3.0, -0.7, 0.0, 0.2, 1.5, 8.0, 60.0}) {
          INFO("value " << value << ", s " << s);
          const double h = 1e-5 * std::max(1.0, std::abs(s));
          const double numeric = (o.score(s + h, value) - o.score(s - h, value)) / (2 * h);
          CHECK(o.score_derivative(s, value) == doctest::Approx(numeric).epsilon(1e-6).scale(1.0));
        }
    }
    // The softcap's is 1 - tanh²(s/c): 1 at 0, toward 0 far out; 1 where the step passes the score.
    const auto derivative = row("softcap").score_derivative;
    CHECK(derivative(0.0, 5.0) == 1.0);
    CHECK(derivative(2.0, 5.0) == 1.0 - std::tanh(0.4) * std::tanh(0.4));
    CHECK(derivative(1e300, 5.0) == 0.0);
    CHECK(derivative(std::numeric_limits<double>::infinity(), 5.0) == 1.0);
  }
}
