// Whether a backward plan made for one device can run on another: PreparedAttentionBackward's
// profile constructor plans a call as vkattn would for a device class that is not here (`vkattn
// conform --profile`), then runs it on the local device — where the plan's needs fit it. The
// backward's counterpart of plan_fit.hpp.
#pragma once

#include "backward_plan.hpp"
#include "vkattn/context.hpp"

namespace vkattn::detail {

// Throws Error saying what does not fit `device` (16-bit storage, the offset alignment, workgroup
// size, the subgroup form's lanes, shared memory, lavapipe's loop limit) when `plan`, made for another
// device, cannot run correctly on `device`. Checked before its pipelines are built (a pipeline beyond
// the device's limits is invalid); the grid and the bindings' ranges are checked on its command list
// afterwards (CommandList::check_fits).
void check_backward_plan_fits(const BackwardCallPlan& plan, const DeviceInfo& device);

}  // namespace vkattn::detail
