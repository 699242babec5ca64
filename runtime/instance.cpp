#include "instance.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <string>

#include "vk_check.hpp"
#include "vkattn/error.hpp"

namespace vkattn::detail {
namespace {

constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";

bool has_instance_layer(const char* name) {
  uint32_t count = 0;
  vkEnumerateInstanceLayerProperties(&count, nullptr);
  std::vector<VkLayerProperties> layers(count);
  vkEnumerateInstanceLayerProperties(&count, layers.data());
  return std::any_of(layers.begin(), layers.end(), [&](const auto& l) { return std::strcmp(l.layerName, name) == 0; });
}

bool has_instance_extension(const char* name) {
  uint32_t count = 0;
  vkEnumerateInstanceExtensionProperties(nullptr, &count, nullptr);
  std::vector<VkExtensionProperties> exts(count);
  vkEnumerateInstanceExtensionProperties(nullptr, &count, exts.data());
  return std::any_of(exts.begin(), exts.end(), [&](const auto& e) { return std::strcmp(e.extensionName, name) == 0; });
}

VKAPI_ATTR VkBool32 VKAPI_CALL on_debug_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                VkDebugUtilsMessageTypeFlagsEXT,
                                                const VkDebugUtilsMessengerCallbackDataEXT* data, void* user) {
  if (severity < VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) return VK_FALSE;
  const std::string message = data && data->pMessage ? data->pMessage : "(no message)";
  // The loader reports itself through the same messenger; those are not validation findings.
  if (data && data->pMessageIdName && std::strcmp(data->pMessageIdName, "Loader Message") == 0) return VK_FALSE;
  const auto* callback = static_cast<const ValidationCallback*>(user);
  if (callback && *callback)
    (*callback)(message);
  else
    std::fprintf(stderr, "vkattn: validation: %s\n", message.c_str());
  return VK_FALSE;
}

bool has_device_extension(VkPhysicalDevice device, const char* name) {
  uint32_t count = 0;
  vkEnumerateDeviceExtensionProperties(device, nullptr, &count, nullptr);
  std::vector<VkExtensionProperties> exts(count);
  vkEnumerateDeviceExtensionProperties(device, nullptr, &count, exts.data());
  return std::any_of(exts.begin(), exts.end(), [&](const auto& e) { return std::strcmp(e.extensionName, name) == 0; });
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

int type_rank(DeviceType type) {
  switch (type) {
    case DeviceType::discrete: return 4;
    case DeviceType::integrated: return 3;
    case DeviceType::virtual_gpu: return 2;
    case DeviceType::cpu: return 1;
    default: return 0;
  }
}

}  // namespace

InstanceHandles create_instance(bool validation, bool synchronization_validation, const ValidationCallback* callback) {
  validation = validation || synchronization_validation;
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "vkattn";
  app.pEngineName = "vkattn";
  app.apiVersion = VK_API_VERSION_1_2;

  std::vector<const char*> layers, extensions;
  if (validation) {
    if (!has_instance_layer(kValidationLayer))
      throw unsupported("validation: the layer VK_LAYER_KHRONOS_validation is not installed (Debian package "
                        "vulkan-validationlayers)");
    layers.push_back(kValidationLayer);
    extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
  }
  VkInstanceCreateInfo info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  if (has_instance_extension(VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME)) {
    extensions.push_back(VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME);
    info.flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
  }
  info.pApplicationInfo = &app;
  info.enabledLayerCount = static_cast<uint32_t>(layers.size());
  info.ppEnabledLayerNames = layers.data();
  info.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  info.ppEnabledExtensionNames = extensions.data();

  const VkValidationFeatureEnableEXT sync_feature = VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT;
  VkValidationFeaturesEXT features{VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT};
  features.enabledValidationFeatureCount = 1;
  features.pEnabledValidationFeatures = &sync_feature;
  if (synchronization_validation) info.pNext = &features;

  VkDebugUtilsMessengerCreateInfoEXT messenger_info{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
  messenger_info.messageSeverity =
      VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  messenger_info.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                               VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                               VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  messenger_info.pfnUserCallback = on_debug_message;
  messenger_info.pUserData = const_cast<ValidationCallback*>(callback);

  InstanceHandles handles;
  VK_TRY(vkCreateInstance(&info, nullptr, &handles.instance));
  if (validation) {
    auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(handles.instance, "vkCreateDebugUtilsMessengerEXT"));
    if (!create) {
      vkDestroyInstance(handles.instance, nullptr);
      throw unsupported("validation: the instance offers no vkCreateDebugUtilsMessengerEXT (VK_EXT_debug_utils)");
    }
    const VkResult result = create(handles.instance, &messenger_info, nullptr, &handles.messenger);
    if (result != VK_SUCCESS) {
      vkDestroyInstance(handles.instance, nullptr);
      throw_vk_error("vkCreateDebugUtilsMessengerEXT", result);
    }
  }
  return handles;
}

void destroy_instance(InstanceHandles& handles) {
  if (handles.messenger != VK_NULL_HANDLE) {
    auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(handles.instance, "vkDestroyDebugUtilsMessengerEXT"));
    if (destroy) destroy(handles.instance, handles.messenger, nullptr);
  }
  if (handles.instance != VK_NULL_HANDLE) vkDestroyInstance(handles.instance, nullptr);
  handles = {};
}

std::vector<VkPhysicalDevice> enumerate_physical_devices(VkInstance instance) {
  uint32_t count = 0;
  VK_TRY(vkEnumeratePhysicalDevices(instance, &count, nullptr));
  std::vector<VkPhysicalDevice> devices(count);
  VK_TRY(vkEnumeratePhysicalDevices(instance, &count, devices.data()));
  devices.resize(count);
  return devices;
}

DeviceInfo query_device_info(VkPhysicalDevice physical_device, uint32_t index) {
  VkPhysicalDeviceDriverProperties driver{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  VkPhysicalDeviceMaintenance3Properties maintenance3{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
  maintenance3.pNext = &driver;
  // maxBufferSize is Vulkan 1.3 (maintenance4); chained only where the device reports 1.3.
  VkPhysicalDeviceMaintenance4Properties maintenance4{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_PROPERTIES};
  VkPhysicalDeviceProperties base{};
  vkGetPhysicalDeviceProperties(physical_device, &base);
  const bool has_maintenance4 = base.apiVersion >= VK_API_VERSION_1_3;
  if (has_maintenance4) maintenance4.pNext = &maintenance3;
  // The subgroup size range is Vulkan 1.3 (subgroup size control) too, or VK_EXT_subgroup_size_control,
  // which vkattn enables (the instance asks for Vulkan 1.2) to require a size.
  const bool has_size_control_ext = has_device_extension(physical_device, VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
  const bool has_size_control = has_maintenance4 || has_size_control_ext;
  VkPhysicalDeviceSubgroupSizeControlProperties size_control{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES};
  size_control.pNext = has_maintenance4 ? static_cast<void*>(&maintenance4) : static_cast<void*>(&maintenance3);
  VkPhysicalDeviceSubgroupProperties subgroup{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  subgroup.pNext = has_size_control ? static_cast<void*>(&size_control)
                   : has_maintenance4 ? static_cast<void*>(&maintenance4)
                                      : static_cast<void*>(&maintenance3);
  // Float controls are Vulkan 1.2 core: chained only where the device reports 1.2.
  VkPhysicalDeviceFloatControlsProperties float_controls{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FLOAT_CONTROLS_PROPERTIES};
  const bool has_float_controls = base.apiVersion >= VK_API_VERSION_1_2;
  if (has_float_controls) float_controls.pNext = &subgroup;
  VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  props.pNext = has_float_controls ? static_cast<void*>(&float_controls) : static_cast<void*>(&subgroup);
  vkGetPhysicalDeviceProperties2(physical_device, &props);

  VkPhysicalDevice16BitStorageFeatures storage16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  VkPhysicalDeviceShaderFloat16Int8Features float16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
  float16.pNext = &storage16;
  VkPhysicalDeviceSubgroupSizeControlFeatures size_control_features{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES};
  if (has_size_control_ext) storage16.pNext = &size_control_features;
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  features.pNext = &float16;
  vkGetPhysicalDeviceFeatures2(physical_device, &features);

  const VkPhysicalDeviceLimits& limits = props.properties.limits;
  DeviceInfo info;
  info.index = index;
  info.name = props.properties.deviceName;
  switch (props.properties.deviceType) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: info.type = DeviceType::discrete; break;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: info.type = DeviceType::integrated; break;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: info.type = DeviceType::virtual_gpu; break;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: info.type = DeviceType::cpu; break;
    default: info.type = DeviceType::other; break;
  }
  info.driver_name = driver.driverName;
  info.driver_info = driver.driverInfo;
  info.api_version = props.properties.apiVersion;
  info.driver_version = props.properties.driverVersion;
  info.vendor_id = props.properties.vendorID;
  info.is_llvmpipe = driver.driverID == VK_DRIVER_ID_MESA_LLVMPIPE;
  info.subgroup_size = subgroup.subgroupSize;
  if (has_size_control) {
    info.min_subgroup_size = size_control.minSubgroupSize;
    info.max_subgroup_size = size_control.maxSubgroupSize;
  }
  info.required_subgroup_size = has_size_control_ext && size_control_features.subgroupSizeControl == VK_TRUE &&
                                size_control_features.computeFullSubgroups == VK_TRUE &&
                                (size_control.requiredSubgroupSizeStages & VK_SHADER_STAGE_COMPUTE_BIT) != 0 &&
                                info.min_subgroup_size >= 1 && info.min_subgroup_size <= info.max_subgroup_size;
  info.subgroup_shuffle = (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) != 0 &&
                          (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT) != 0;
  info.max_shared_memory = limits.maxComputeSharedMemorySize;
  info.max_workgroup_invocations = limits.maxComputeWorkGroupInvocations;
  for (int d = 0; d < 3; ++d) info.max_workgroup_count[d] = limits.maxComputeWorkGroupCount[d];
  info.max_storage_buffer_range = limits.maxStorageBufferRange;
  info.min_storage_buffer_offset_alignment = limits.minStorageBufferOffsetAlignment;
  info.max_push_constants_size = limits.maxPushConstantsSize;
  info.storage_16bit = storage16.storageBuffer16BitAccess == VK_TRUE;
  info.shader_float16 = float16.shaderFloat16 == VK_TRUE;
  info.shader_int64 = features.features.shaderInt64 == VK_TRUE;
  info.preserves_nan = has_float_controls && float_controls.shaderSignedZeroInfNanPreserveFloat32 == VK_TRUE;
  info.push_descriptor = has_device_extension(physical_device, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
  info.cooperative_matrix = has_device_extension(physical_device, "VK_NV_cooperative_matrix") ||
                            has_device_extension(physical_device, "VK_KHR_cooperative_matrix");
  info.timestamps = limits.timestampComputeAndGraphics == VK_TRUE && limits.timestampPeriod > 0.0f;
  info.timestamp_period_ns = limits.timestampPeriod;
  info.max_allocation_size = maintenance3.maxMemoryAllocationSize;
  info.max_buffer_size = has_maintenance4 ? maintenance4.maxBufferSize : UINT64_MAX;
  VkPhysicalDeviceMemoryProperties memory{};
  vkGetPhysicalDeviceMemoryProperties(physical_device, &memory);
  for (uint32_t h = 0; h < memory.memoryHeapCount; ++h)
    if (memory.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
      info.device_memory_bytes = std::max<uint64_t>(info.device_memory_bytes, memory.memoryHeaps[h].size);
  return info;
}

std::vector<DeviceInfo> query_device_infos(const std::vector<VkPhysicalDevice>& devices) {
  std::vector<DeviceInfo> infos;
  for (uint32_t i = 0; i < devices.size(); ++i) infos.push_back(query_device_info(devices[i], i));
  return infos;
}

uint32_t select_device(const std::vector<DeviceInfo>& devices, const std::string& selector) {
  auto usable = [](const DeviceInfo& d) { return d.push_descriptor && d.api_version >= VK_API_VERSION_1_2; };
  auto listing = [&]() {
    std::string s;
    for (const auto& d : devices) s += (s.empty() ? "" : ", ") + std::to_string(d.index) + ": " + d.name;
    return s.empty() ? std::string("none") : s;
  };
  if (devices.empty())
    throw unsupported("device: no Vulkan device found (is a Vulkan driver installed? Debian: mesa-vulkan-drivers)");

  if (!selector.empty()) {
    const bool numeric = std::all_of(selector.begin(), selector.end(), [](unsigned char c) { return std::isdigit(c); });
    for (const auto& d : devices) {
      const bool match = numeric ? std::to_string(d.index) == selector
                                 : lower(d.name).find(lower(selector)) != std::string::npos;
      if (!match) continue;
      if (!usable(d))
        throw unsupported("device: '" + d.name + "' lacks Vulkan 1.2 or VK_KHR_push_descriptor, which vkattn needs");
      return d.index;
    }
    throw Error("device: no Vulkan device matches '" + selector + "' (available: " + listing() + ")");
  }
  int best = -1;
  for (const auto& d : devices)
    if (usable(d) && (best < 0 || type_rank(d.type) > type_rank(devices[best].type))) best = static_cast<int>(d.index);
  if (best < 0)
    throw unsupported("device: no Vulkan device has Vulkan 1.2 and VK_KHR_push_descriptor (available: " + listing() + ")");
  return static_cast<uint32_t>(best);
}

}  // namespace vkattn::detail

namespace vkattn {

const char* to_string(DeviceType type) {
  switch (type) {
    case DeviceType::discrete: return "discrete";
    case DeviceType::integrated: return "integrated";
    case DeviceType::virtual_gpu: return "virtual";
    case DeviceType::cpu: return "cpu";
    default: return "other";
  }
}

std::string DeviceInfo::api_version_string() const {
  return std::to_string(VK_API_VERSION_MAJOR(api_version)) + "." + std::to_string(VK_API_VERSION_MINOR(api_version)) +
         "." + std::to_string(VK_API_VERSION_PATCH(api_version));
}

std::vector<DeviceInfo> list_devices() {
  detail::InstanceHandles handles = detail::create_instance(false, false, nullptr);
  std::vector<DeviceInfo> infos;
  try {
    infos = detail::query_device_infos(detail::enumerate_physical_devices(handles.instance));
  } catch (...) {
    detail::destroy_instance(handles);
    throw;
  }
  detail::destroy_instance(handles);
  return infos;
}

}  // namespace vkattn
