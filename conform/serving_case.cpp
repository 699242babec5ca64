#include "conform/serving_case.hpp"

namespace vkattn::conform {

CaseResult run_serving_case(Context& context, DType dtype, const RunOptions& options, const std::string& layout,
                            const std::function<ServingResult()>& run, bool three_stage) {
  if ((options.path == AttentionPath::unfused && !three_stage) || options.profile) {
    CaseResult r;
    r.outcome = Outcome::skipped;
    r.skip_reason = options.profile ? layout + " calls are planned for the device they run on, not a profile"
                                    : "the three-stage path takes no " + layout + " (fused kernels only)";
    return r;
  }
  return run_in_frame(context, dtype, options, [&](CaseResult& r) {
    const ServingResult s = run();
    r.worst = s.worst;
    if (!s.ok) r.problems.push_back(s.text);
  });
}

}  // namespace vkattn::conform
