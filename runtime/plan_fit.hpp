// Whether a plan made for one device can run on another: `vkattn conform --profile` plans each case
// as vkattn would for a device class it does not have here (an H100's tiles, an Adreno's), then runs
// it on the local device to prove those configurations right — where the plan's needs fit it.
#pragma once

#include "attention_record.hpp"
#include "command_list.hpp"
#include "vkattn/attention.hpp"
#include "vkattn/context.hpp"
#include "vkattn/problem.hpp"

namespace vkattn::detail {

// A profile constructor's two refusals (PreparedAttention's and PreparedAttentionBackward's): `plan`
// planning for the device `profile` describes, whose Error becomes PlanDoesNotFit "<profile> would
// refuse this call"; and `check` of that plan against the device `here`, whose Error becomes
// PlanDoesNotFit "the plan for <profile> does not fit <here>".
template <class Plan>
auto plan_for_profile(const DeviceInfo& profile, Plan&& plan) -> decltype(plan()) {
  try {
    return plan();
  } catch (const Error& e) {
    throw PlanDoesNotFit(profile.name + " would refuse this call: " + e.what());
  }
}
template <class Check>
void check_profile_plan_fits(const DeviceInfo& profile, const DeviceInfo& here, Check&& check) {
  try {
    check();
  } catch (const Error& e) {
    throw PlanDoesNotFit("the plan for " + profile.name + " does not fit " + here.name + ": " + e.what());
  }
}

// Throws Error saying what does not fit `device` (16-bit storage, workgroup size, shared memory, the
// offset alignment, lavapipe's loop limit) when `planned`, made for another device, cannot run
// correctly on `device`. Checked before its pipelines are built (a pipeline beyond the device's
// limits is invalid); the grid and the bindings' ranges are checked on its command list afterwards
// (CommandList::check_fits).
void check_plan_fits(const PathPlan& planned, const AttentionLayouts& layouts, bool weights,
                     const DeviceInfo& device);

}  // namespace vkattn::detail
