#include "attention_case.hpp"

#include <doctest/doctest.h>

#include "conform/case_runner.hpp"
#include "support.hpp"

namespace vkattn::test {

namespace {

std::string describe_with_path(const AttentionCase& c) {
  return conform::describe(c) + " path=" + to_string(attention_path());
}

}  // namespace

bool run_case(Context& ctx, const AttentionCase& c) {
  conform::RunOptions options;
  options.path = attention_path();
  // The shared Context records validation messages; each case must leave none. (A test-owned
  // Context without the layer simply never produces any.)
  options.take_validation_messages = [] { return take_validation_messages(); };
  const conform::CaseResult result = conform::run_case(ctx, c, options);
  if (result.outcome == conform::Outcome::skipped) {
    MESSAGE("skipped (" << result.skip_reason << "): " << describe_with_path(c));
    return true;
  }
  for (const std::string& problem : result.problems) FAIL_CHECK(problem);
  if (verbose()) MESSAGE(result.seconds << " s: " << describe_with_path(c));
  return result.outcome == conform::Outcome::passed;
}

void run_cases(Context& ctx, const std::vector<AttentionCase>& cases) {
  for (const AttentionCase& c : cases) {
    INFO("case: " << describe_with_path(c));
    run_case(ctx, c);
  }
}

std::vector<AttentionCase> catalog_cases(const std::string& section) {
  return conform::catalog_section(section, base_seed()).cases;
}

}  // namespace vkattn::test
