// A serving case with its source as a parameter (serving_case.hpp): the source's own parts are picked
// here, by the case's KvSource.
#include "conform/serving_case.hpp"

#include "conform/serving_sources.hpp"

namespace vkattn::conform {

std::string describe(const ServingCase& c) {
  return std::visit([&](const auto& source) { return describe(c, source); }, c.kv);
}

FeatureTags features(const ServingCase& c) {
  return std::visit([&](const auto& source) { return features(c, source); }, c.kv);
}

void add_serving_features(const ServingCase& c, FeatureTags& f) {
  if (c.quant != KvQuant::none) f.emplace_back("dtype", std::string("K/V ") + to_string(c.quant));
  f.emplace_back("heads", c.kv_heads == c.heads ? "MHA" : "GQA " + std::to_string(c.heads / c.kv_heads) + ":1");
  f.emplace_back("mask", c.causal == Causal::none ? std::string("none") : std::string("causal ") + to_string(c.causal));
  add_serving_features(c.modifiers, f);
}

bool runs_on(const ServingCase& c, AttentionPath path) {
  return path != AttentionPath::unfused || std::holds_alternative<PackedSource>(c.kv);
}

ServingResult run_serving_case(Context& context, const ServingCase& c, AttentionPath path) {
  if (const auto* paged = std::get_if<PagedSource>(&c.kv)) return run_source(context, c, *paged);
  return run_source(context, c, std::get<PackedSource>(c.kv), path);
}

CaseResult run_serving_case(Context& context, const ServingCase& c, const RunOptions& options) {
  const std::string source =
      std::holds_alternative<PagedSource>(c.kv) ? "paged KV cache" : "packed variable-length batch";
  if (!runs_on(c, options.path) || options.profile) {
    CaseResult r;
    r.outcome = Outcome::skipped;
    r.skip_reason = options.profile ? source + " calls are planned for the device they run on, not a profile"
                                    : "the three-stage path takes no " + source + " (fused kernels only)";
    return r;
  }
  return run_in_frame(context, c.dtype, options, [&](CaseResult& r) {
    const ServingResult s = run_serving_case(context, c, options.path);
    r.worst = s.worst;
    if (!s.ok) r.problems.push_back(s.text);
  });
}

}  // namespace vkattn::conform
