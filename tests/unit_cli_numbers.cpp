// The strict syntax every numeric option of `vkattn` goes through (tools/support/cli_numbers.hpp): what
// CLI11 alone would have read as a number ("0x10", "010", "-1" for an unsigned, "nan") is refused.
#include <doctest/doctest.h>

#include <string>

#include "cli_numbers.hpp"

using vkattn::cli::integer_syntax_error;
using vkattn::cli::real_syntax_error;

TEST_SUITE("unit") {
  TEST_CASE("cli numbers: integers are plain decimal") {
    for (const char* good : {"0", "7", "1024", "9223372036854775807"}) CHECK(integer_syntax_error(good, false).empty());
    CHECK(integer_syntax_error("-3", true).empty());
    CHECK(integer_syntax_error("-1", false) == "'-1' is not a decimal integer >= 0");  // --seed -1 wrapped to 2^64-1
    for (const char* bad : {"0x10", "010", "1e3", "1.0", "+1", " 1", "1 ", "12abc", "-", "--1", "nan"}) {
      CAPTURE(bad);
      CHECK(!integer_syntax_error(bad, true).empty());
    }
    CHECK(integer_syntax_error("", true) == "empty value (give a number)");
  }

  TEST_CASE("cli numbers: reals are finite decimal numbers") {
    for (const char* good : {"1", "-0.5", "2e-3", ".5", "5.", "1E+6", "0"}) {
      CAPTURE(good);
      CHECK(real_syntax_error(good).empty());
    }
    for (const char* bad : {"nan", "NaN", "inf", "-inf", "0x10", "1e", ".", "-", "1.5x", " 1", "1e999", "", "e5"}) {
      CAPTURE(bad);
      CHECK(!real_syntax_error(bad).empty());
    }
    CHECK(real_syntax_error("1e999") == "'1e999' is out of range");
  }
}
