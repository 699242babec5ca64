// Device descriptions of the device classes vkattn is meant to run on, from published limits, so the
// planners can be tested against each without the device (tests/unit_planner_presets.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "vkattn/context.hpp"

namespace vkattn::test {

struct DevicePreset {
  DeviceInfo info;  // info.subgroup_size: the size the driver reports (VkPhysicalDeviceSubgroupProperties)
  // The sizes a pipeline may run with (VK_EXT_subgroup_size_control's minSubgroupSize and
  // maxSubgroupSize; both equal subgroup_size where the device has one size). vkattn requests none,
  // so a driver may pick any of them: a plan must suit all.
  uint32_t min_subgroup_size = 0, max_subgroup_size = 0;
};

// NVIDIA H100, AMD RDNA3, Intel Arc, Apple M-series (MoltenVK), ARM Mali (Valhall), Qualcomm Adreno
// 7xx, the Vulkan 1.2 required minimums, and llvmpipe (lavapipe).
const std::vector<DevicePreset>& device_presets();

}  // namespace vkattn::test
