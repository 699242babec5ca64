// The conformance cases: one generator for both the doctest suites (tests/conformance_*.cpp,
// tests/long_sequences.cpp, tests/representative.cpp) and `vkattn conform`, so the two cannot drift
// apart. Cases come in named sections; a case's id is "<section>/<index>", stable for a given
// catalog version, and its seed derives from the base seed and a fixed case number.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "conform/attention_case.hpp"
#include "conform/backward_case.hpp"
#include "conform/layer_case.hpp"
#include "conform/serving_case.hpp"

namespace vkattn::conform {

struct CaseSection {
  std::string name;   // e.g. "sweep-f16": the first part of each case id
  std::string suite;  // the doctest suite that runs it: conformance, conformance-masks, conformance-mha, long, representative
  std::string title;  // what the section is about, one line
  // A section holds attention cases (dense keys and values), or multi-head layer cases (the "layer"
  // section), or serving cases (a paged KV cache or packed sequences: the "paged" and "varlen"
  // sections), or backward cases (the "backward" section); one kind only.
  std::vector<AttentionCase> cases;
  std::vector<LayerCase> layer_cases;
  std::vector<ServingCase> serving_cases;
  std::vector<BackwardCase> backward_cases;
  // Indices of the cases `vkattn conform --quick` runs (a spread over every axis of the section).
  std::vector<std::size_t> quick;

  std::size_t size() const { return cases.size() + layer_cases.size() + serving_cases.size() + backward_cases.size(); }
};

// Every section, in the order `vkattn conform` runs them.
std::vector<CaseSection> catalog(uint64_t base_seed);

// One section by name; throws Error naming the known sections when there is none.
CaseSection catalog_section(const std::string& name, uint64_t base_seed);

}  // namespace vkattn::conform
