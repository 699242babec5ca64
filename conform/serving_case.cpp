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

// The three-stage path takes no paged q8_0 cache and no cascade (which run on the fused kernels). A
// packed q8_0 case runs there: its refusal is its pass.
std::string why_not_on(const ServingCase& c, AttentionPath path) {
  const auto* paged = std::get_if<PagedSource>(&c.kv);
  if (path != AttentionPath::unfused || !paged) return "";
  if (c.quant != KvQuant::none) return "the three-stage path takes no q8_0 paged cache (fused kernels only)";
  if (paged->cascade) return "the cascade runs on the fused kernels only";
  return "";
}

ServingResult run_serving_case(Context& context, const ServingCase& c, AttentionPath path, const DeviceInfo* plan_for) {
  if (const auto* paged = std::get_if<PagedSource>(&c.kv)) return run_source(context, c, *paged, path, plan_for);
  return run_source(context, c, std::get<PackedSource>(c.kv), path, plan_for);
}

std::optional<PreparedAttention> prepare_serving_call(Context& context, const AttentionSpec& spec,
                                                      const DeviceInfo* plan_for, ServingResult& result) {
  if (!plan_for) return PreparedAttention(context, spec);
  try {
    return PreparedAttention(context, spec, *plan_for);
  } catch (const PlanDoesNotFit& e) {
    result.skip_reason = e.what();
    return std::nullopt;
  }
}

CaseResult run_serving_case(Context& context, const ServingCase& c, const RunOptions& options) {
  const std::string why_not = why_not_on(c, options.path);
  if (!why_not.empty()) {
    CaseResult r;
    r.outcome = Outcome::skipped;
    r.skip_reason = why_not;
    return r;
  }
  return run_in_frame(context, c.dtype, options, [&](CaseResult& r) {
    const ServingResult s = run_serving_case(context, c, options.path, options.profile);
    r.worst = s.worst;
    if (!s.skip_reason.empty()) r.skip_reason = s.skip_reason;
    else if (!s.ok) r.problems.push_back(s.text);
  });
}

}  // namespace vkattn::conform
