// Instance creation (optionally with the validation layer and a messenger) and physical-device
// discovery: the parts of setting up Vulkan that do not need a logical device.
#pragma once

#include <vulkan/vulkan.h>

#include <vector>

#include "vkattn/context.hpp"

namespace vkattn::detail {

// An owned VkInstance plus its debug messenger. The callback (if any) must outlive the instance.
struct InstanceHandles {
  VkInstance instance = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger = VK_NULL_HANDLE;
};

// `callback` receives each warning/error message of the validation layer; it is stored by pointer.
InstanceHandles create_instance(bool validation, bool synchronization_validation, const ValidationCallback* callback);
void destroy_instance(InstanceHandles& handles);

// Reads the properties vkattn cares about.
DeviceInfo query_device_info(VkPhysicalDevice physical_device, uint32_t index);
// query_device_info of each device, indexed as enumerated.
std::vector<DeviceInfo> query_device_infos(const std::vector<VkPhysicalDevice>& devices);
std::vector<VkPhysicalDevice> enumerate_physical_devices(VkInstance instance);

// Picks a device by `selector` (index or case-insensitive name substring; empty: best type).
// Throws Error listing the devices when nothing matches or no device can run vkattn.
uint32_t select_device(const std::vector<DeviceInfo>& devices, const std::string& selector);

}  // namespace vkattn::detail
