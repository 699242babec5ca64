#include "attention_case.hpp"

#include <doctest/doctest.h>

#include "conform/case_runner.hpp"
#include "support.hpp"

namespace vkattn::test {

namespace {

// An AttentionCase or a LayerCase in one line, with the path the tests run.
template <typename Case>
std::string describe_with_path(const Case& c) {
  return conform::describe(c) + " path=" + to_string(attention_path());
}

// The options every case runs with: the path of --path=, and the shared Context's validation
// messages, of which each case must leave none. (A test-owned Context without the layer simply never
// produces any.)
conform::RunOptions test_run_options() {
  conform::RunOptions options;
  options.path = attention_path();
  options.take_validation_messages = [] { return take_validation_messages(); };
  return options;
}

// Turns what the runner found into doctest checks; true when the case passed or was skipped.
bool report(const conform::CaseResult& result, const std::string& description) {
  if (result.outcome == conform::Outcome::skipped) {
    MESSAGE("skipped (" << result.skip_reason << "): " << description);
    return true;
  }
  for (const std::string& problem : result.problems) FAIL_CHECK(problem);
  if (verbose()) MESSAGE(result.seconds << " s: " << description);
  return result.outcome == conform::Outcome::passed;
}

// The cases of `all` that --quick keeps (the section's quick indices), or all of them. A section
// holds cases of one kind: its indices are those of its one non-empty list.
template <typename Case>
std::vector<Case> quick_subset(const std::vector<Case>& all, const std::vector<std::size_t>& quick_indices) {
  if (!quick() || all.empty()) return all;
  std::vector<Case> cases;
  for (const std::size_t i : quick_indices) cases.push_back(all[i]);
  return cases;
}

}  // namespace

bool run_case(Context& ctx, const AttentionCase& c) {
  return report(conform::run_case(ctx, c, test_run_options()), describe_with_path(c));
}

void run_cases(Context& ctx, const std::vector<AttentionCase>& cases) {
  for (const AttentionCase& c : cases) {
    INFO("case: " << describe_with_path(c));
    run_case(ctx, c);
  }
}

void run_layer_cases(Context& ctx, const std::vector<conform::LayerCase>& cases) {
  for (const conform::LayerCase& c : cases) {
    INFO("case: " << describe_with_path(c));
    report(conform::run_layer_case(ctx, c, test_run_options()), describe_with_path(c));
  }
}

void run_backward_cases(Context& ctx, const std::vector<conform::BackwardCase>& cases) {
  for (const conform::BackwardCase& c : cases) {
    INFO("case: " << describe_with_path(c));
    report(conform::run_backward_case(ctx, c, test_run_options()), describe_with_path(c));
  }
}

std::vector<AttentionCase> catalog_cases(const std::string& section) {
  const conform::CaseSection s = conform::catalog_section(section, base_seed());
  return quick_subset(s.cases, s.quick);
}

std::vector<conform::LayerCase> catalog_layer_cases() { return conform::catalog_section("layer", base_seed()).layer_cases; }

void run_section(Context& ctx, const std::string& name) {
  const conform::CaseSection s = conform::catalog_section(name, base_seed());
  run_cases(ctx, quick_subset(s.cases, s.quick));
  run_layer_cases(ctx, quick_subset(s.layer_cases, s.quick));
  run_backward_cases(ctx, quick_subset(s.backward_cases, s.quick));
  for (const conform::ServingCase& c : quick_subset(s.serving_cases, s.quick)) {
    INFO("case: " << describe_with_path(c));
    report(conform::run_serving_case(ctx, c, test_run_options()), describe_with_path(c));
  }
}

}  // namespace vkattn::test
