// The conformance cases (conform/attention_case.hpp) as doctest checks: run_case runs one through
// the shared runner (conform/case_runner.hpp) on the test Context, with the path of --path=, and
// fails the current test with everything the runner found. The conformance, long-sequence and
// synchronization-validation suites run sections of the shared catalog (conform/catalog.hpp).
#pragma once

#include <string>
#include <vector>

#include <vkattn/vkattn.hpp>

#include "conform/attention_case.hpp"
#include "conform/backward_case.hpp"
#include "conform/catalog.hpp"
#include "conform/layer_case.hpp"

namespace vkattn::test {

using conform::AttentionCase;
using conform::LayoutKind;
using conform::MaskKind;

// conform::describe(c) says the case in one line (found by argument-dependent lookup as describe(c));
// the messages here add the path the tests run (--path=).
// Runs one case on `context` and checks it (guards, untouched gaps, reference comparison, no
// validation message). Returns false after FAILing the current test. Skips (with a MESSAGE) a dtype
// the device cannot store.
bool run_case(Context& context, const AttentionCase& c);

// Runs every case, each under its own INFO context. With --verbose it prints each case with its time.
void run_cases(Context& context, const std::vector<AttentionCase>& cases);

// The cases of one catalog section, with the tests' base seed (--seed=).
std::vector<AttentionCase> catalog_cases(const std::string& section);

// The multi-head layer's cases (conform/layer_case.hpp) the same way: each under its own INFO
// context, on --path=, failing the current test with what the runner found.
void run_layer_cases(Context& context, const std::vector<conform::LayerCase>& cases);
// The catalog's "layer" section, with the tests' base seed.
std::vector<conform::LayerCase> catalog_layer_cases();

// The backward pass's cases (conform/backward_case.hpp) the same way, on the Context's kernel variant
// (--kernel=: the backward's portable or subgroup form) and --path=.
void run_backward_cases(Context& context, const std::vector<conform::BackwardCase>& cases);

// Every case of one catalog section, whatever its kind (attention, layer, paged, packed or backward), each
// under its own INFO context, on --path= (the runners skip what a path does not take: paged caches
// on the three-stage path); under --quick the section's quick subset.
void run_section(Context& context, const std::string& section);

}  // namespace vkattn::test
