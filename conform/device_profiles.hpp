// Device descriptions of the device classes vkattn is meant to run on, from published limits: the
// planners are tested against each without the device (tests/unit_planner_presets.cpp), and
// `vkattn conform --profile ID` runs the conformance cases with each one's plans on the local device.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vkattn/context.hpp"

namespace vkattn::conform {

struct DeviceProfile {
  std::string id;   // the --profile name: h100, rdna3, arc, apple, mali, adreno, vulkan12-min, llvmpipe
  DeviceInfo info;  // info.subgroup_size: the size the driver reports (VkPhysicalDeviceSubgroupProperties)
  // The sizes a pipeline may run with (VK_EXT_subgroup_size_control's minSubgroupSize and
  // maxSubgroupSize; both equal subgroup_size where the device has one size). vkattn requests none,
  // so a driver may pick any of them: a plan must suit all.
  uint32_t min_subgroup_size = 0, max_subgroup_size = 0;
};

// NVIDIA H100, AMD RDNA3, Intel Arc, Apple M-series (MoltenVK), ARM Mali (Valhall), Qualcomm Adreno
// 7xx, the Vulkan 1.2 required minimums, and llvmpipe (lavapipe).
const std::vector<DeviceProfile>& device_profiles();

// The profile named `id`; throws Error listing the ids otherwise.
const DeviceProfile& find_device_profile(const std::string& id);

}  // namespace vkattn::conform
