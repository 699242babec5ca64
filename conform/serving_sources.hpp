// What differs by source in a serving case (serving_case.hpp): its description, its feature tags and
// its run, one overload per KvSource (paged_source.cpp, packed_source.cpp). serving_case.cpp picks
// the source's; nothing else includes this header.
#pragma once

#include <optional>
#include <string>

#include "conform/serving_case.hpp"

namespace vkattn::conform {

std::string describe(const ServingCase& c, const PagedSource& p);
std::string describe(const ServingCase& c, const PackedSource& p);

FeatureTags features(const ServingCase& c, const PagedSource& p);
FeatureTags features(const ServingCase& c, const PackedSource& p);

// The runs (serving_case.hpp, run_serving_case) on `path`, planned for `plan_for` where given.
ServingResult run_source(Context& context, const ServingCase& c, const PagedSource& p, AttentionPath path,
                         const DeviceInfo* plan_for);
ServingResult run_source(Context& context, const ServingCase& c, const PackedSource& p, AttentionPath path,
                         const DeviceInfo* plan_for);

// The call prepared as `run_serving_case` says: for this device, or with the plan made for
// `plan_for`; empty, with the skip reason in `result`, where that plan does not fit here.
std::optional<PreparedAttention> prepare_serving_call(Context& context, const AttentionSpec& spec,
                                                      const DeviceInfo* plan_for, ServingResult& result);

// The features of the fields every serving case has (K/V format, heads, the causal mask, the
// modifiers), after its source's own ("dtype", "layout").
void add_serving_features(const ServingCase& c, FeatureTags& f);

}  // namespace vkattn::conform
