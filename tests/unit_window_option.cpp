// --window "L:R" on the command line (tools/support/window_option.hpp): each side an integer >= 0 or -1
// (unbounded); anything else is an Error naming the option and the side.
#include <doctest/doctest.h>

#include <string>

#include "support.hpp"
#include "window_option.hpp"

using vkattn::cli::parse_window;
using vkattn::test::error_message;

TEST_SUITE("unit") {
  TEST_CASE("cli --window: L:R with -1 for an unbounded side") {
    const vkattn::Window mistral = parse_window("4096:0");
    CHECK(mistral.left == 4096);
    CHECK(mistral.right == 0);
    const vkattn::Window right_only = parse_window("-1:5");
    CHECK(right_only.left == -1);
    CHECK(right_only.right == 5);
    CHECK(parse_window("0:-1").right == -1);
  }

  TEST_CASE("cli --window: bad values name the option and the side") {
    CHECK(error_message([] { parse_window("5"); }) ==
          "--window: '5' is not L:R (the window's left and right sides, each >= 0 or -1 for unbounded, e.g. 4096:0)");
    CHECK(error_message([] { parse_window("1:2:3"); }).find("'1:2:3' is not L:R") != std::string::npos);
    CHECK(error_message([] { parse_window("-2:0"); }) == "--window: the left side -2 must be >= 0, or -1 for unbounded");
    CHECK(error_message([] { parse_window("0:x"); }) == "--window: the right side 'x' is not a decimal integer");
    CHECK(error_message([] { parse_window(":4"); }) ==
          "--window: the left side is empty (give an integer >= 0, or -1 for unbounded)");
    CHECK(error_message([] { parse_window("007:1"); }).find("no leading zeros") != std::string::npos);
    CHECK(error_message([] { parse_window("99999999999999999999:0"); }) ==
          "--window: the left side '99999999999999999999' is out of range");
    CHECK_NOTHROW(parse_window("1:2", "--sliding"));
    CHECK(error_message([] { parse_window("1", "--sliding"); }).rfind("--sliding: ", 0) == 0);
  }
}
