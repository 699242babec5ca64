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
  // info.subgroup_size: the size the driver reports (VkPhysicalDeviceSubgroupProperties);
  // info.min/max_subgroup_size: the sizes a pipeline may run with. A plan must suit all.
  DeviceInfo info;
};

// NVIDIA H100, AMD RDNA3, Intel Arc, Apple M-series (MoltenVK), ARM Mali (Valhall), Qualcomm Adreno
// 7xx, the Vulkan 1.2 required minimums, and llvmpipe (lavapipe).
const std::vector<DeviceProfile>& device_profiles();

// The profile named `id`; throws Error listing the ids otherwise.
const DeviceProfile& find_device_profile(const std::string& id);

}  // namespace vkattn::conform
