// Internal, for vkattn's own tests and tools; not installed. Fault injection, so that tests can prove
// what a caller sees when Vulkan fails (out of memory, device lost) without a device that fails on
// demand, and plans made for another device class (`vkattn conform --profile`).
#pragma once

#include <vulkan/vulkan.h>

#include <functional>
#include <string>

#include "vkattn/error.hpp"

#include "vkattn/attention.hpp"
#include "vkattn/context.hpp"

namespace vkattn::testing {

// Where a fault can be injected: before vkattn allocates device memory (Buffer::allocate, scratch,
// staging), and before it submits work to the queue (every synchronous call).
enum class FaultSite { allocate, submit };

// Called at each site with the site; returning anything but VK_SUCCESS makes vkattn behave as if the
// Vulkan call there had returned that result (nothing is allocated or submitted). An empty hook
// removes it. Set it while no other thread uses the context.
using FaultHook = std::function<VkResult(FaultSite)>;
void set_fault_hook(Context& context, FaultHook hook);

// Device buffers allocated afterwards are not mapped into the host even where their memory is
// host-visible, so that their uploads and downloads go through staging buffers, as on a discrete
// GPU (whose device buffers take memory the host cannot see). Set it while no other thread uses the
// context.
void set_device_memory_unmapped(Context& context, bool unmapped);

// Every call recorded afterwards first checks its own barriers: a pair of its dispatches that touch
// overlapping bytes of one buffer, one writing, with no barrier between them that orders the two as
// Vulkan requires, throws Error("internal: a missing barrier ...") and records nothing. For tests:
// synchronization validation sees whole bindings, not the byte ranges vkattn's dispatches use. Set it
// while no other thread uses the context.
void set_barrier_check(Context& context, bool enabled);

// Prepares `spec` with the plan vkattn would make on the device `profile` describes (its kind,
// limits and subgroup size: a device class that is not here, e.g. a GPU's tiles), to run on
// `context`'s device, so that other devices' configurations are proven on the local one
// (`vkattn conform --profile`). Throws PlanDoesNotFit, saying what, when the profile's device would
// refuse the call (e.g. f16 without 16-bit storage) or when its plan's needs exceed the local device
// (16-bit storage, workgroup size, shared memory, grid, binding range, alignment, lavapipe's loop
// limit); Error as PreparedAttention's constructor otherwise.
class PlanDoesNotFit : public Error {
 public:
  explicit PlanDoesNotFit(const std::string& message) : Error(ErrorCode::unsupported, message) {}
};
PreparedAttention prepare_for_profile(Context& context, const AttentionSpec& spec, const DeviceInfo& profile);

}  // namespace vkattn::testing
