// Internal, for vkattn's own tests; not installed. Fault injection, so that tests can prove
// what a caller sees when Vulkan fails (out of memory, device lost) without a device that fails on
// demand.
#pragma once

#include <vulkan/vulkan.h>

#include <functional>
#include <string>

#include "vkattn/error.hpp"

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

}  // namespace vkattn::testing
