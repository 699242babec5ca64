// What the serving-layout cases (paged_case.hpp, varlen_case.hpp) share: the result of one case,
// the features every such case reports, and their frame in `vkattn conform`.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <vkattn/vkattn.hpp>

#include "conform/case_modifiers.hpp"
#include "conform/case_runner.hpp"

namespace vkattn::conform {

// One serving case run on the device and compared with its fp64 reference.
struct ServingResult {
  bool ok = false;
  std::string text;    // what went wrong (empty when ok)
  std::string plan;    // "subgroup-decode 2 splits", for reports
  double worst = 0.0;  // the largest error as a fraction of its tolerance
};

// The features of the fields every serving case has (K/V format, heads, the causal mask, the
// modifiers), after its own ("dtype", "layout"): `vkattn conform`'s feature tables.
template <typename Case>
void add_serving_features(const Case& c, std::vector<std::pair<std::string, std::string>>& f) {
  if (c.quant != KvQuant::none) f.emplace_back("dtype", std::string("K/V ") + to_string(c.quant));
  f.emplace_back("heads", c.kv_heads == c.heads ? "MHA" : "GQA " + std::to_string(c.heads / c.kv_heads) + ":1");
  f.emplace_back("mask", c.causal == Causal::none ? std::string("none") : std::string("causal ") + to_string(c.causal));
  add_serving_features(c.modifiers, f);
}

// A serving case in `vkattn conform`'s frame (case_runner.hpp): skipped under a device profile (such
// calls are planned for the device they run on) and on the three-stage path unless the layout runs
// there (`three_stage`: packed batches do, paged caches do not); else `run` in run_in_frame. `layout`
// names the layout in the skip reasons.
CaseResult run_serving_case(Context& context, DType dtype, const RunOptions& options, const std::string& layout,
                            const std::function<ServingResult()>& run, bool three_stage = false);

}  // namespace vkattn::conform
