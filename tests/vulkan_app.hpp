// A minimal Vulkan application for the adoption test: it owns its instance (with the validation
// layer and its own messenger when installed), device, queue, command buffer and buffers, the way an
// engine that lends them to vkattn would. Everything is destroyed in reverse order; validation
// messages that arrive then (a leaked handle) fail the test.
#pragma once

#include <doctest/doctest.h>
#include <vulkan/vulkan.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include <vkattn/vkattn.hpp>

#include "support.hpp"

namespace vkattn::test {

// A zero-initialised Vulkan struct with its sType set.
template <typename T>
T vk_struct(VkStructureType type) {
  T t{};
  t.sType = type;
  return t;
}

#define VKATTN_APP_CHECK(call)                                                       \
  do {                                                                        \
    const VkResult r_ = (call);                                               \
    REQUIRE_MESSAGE(r_ == VK_SUCCESS, #call " returned " << static_cast<int>(r_)); \
  } while (0)

inline VKAPI_ATTR VkBool32 VKAPI_CALL record_message(VkDebugUtilsMessageSeverityFlagBitsEXT,
                                              VkDebugUtilsMessageTypeFlagsEXT,
                                              const VkDebugUtilsMessengerCallbackDataEXT* data, void* user) {
  const std::string id = data->pMessageIdName ? data->pMessageIdName : "";
  if (id == "Loader Message") return VK_FALSE;  // the loader's notices are not validation errors
  static_cast<std::vector<std::string>*>(user)->push_back(id + ": " + (data->pMessage ? data->pMessage : ""));
  return VK_FALSE;
}

// A host-visible, coherent VkBuffer with its memory mapped.
struct AppBuffer {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  void* mapped = nullptr;
  VkDeviceSize size = 0;
};

// Everything the application owns, destroyed in reverse order.
class VulkanApp {
 public:
  VulkanApp() {
    uint32_t count = 0;
    vkEnumerateInstanceLayerProperties(&count, nullptr);
    std::vector<VkLayerProperties> layers(count);
    vkEnumerateInstanceLayerProperties(&count, layers.data());
    validation_ = validation_enabled() &&
                  std::any_of(layers.begin(), layers.end(), [](const VkLayerProperties& l) {
                    return std::strcmp(l.layerName, "VK_LAYER_KHRONOS_validation") == 0;
                  });

    auto app = vk_struct<VkApplicationInfo>(VK_STRUCTURE_TYPE_APPLICATION_INFO);
    app.pApplicationName = "vkattn adoption test";
    app.apiVersion = VK_API_VERSION_1_2;
    const char* layer = "VK_LAYER_KHRONOS_validation";
    const char* ext = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
    auto messenger = vk_struct<VkDebugUtilsMessengerCreateInfoEXT>(VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT);
    messenger.messageSeverity =
        VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    messenger.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                            VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                            VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    messenger.pfnUserCallback = record_message;
    messenger.pUserData = &messages_;
    const VkValidationFeatureEnableEXT sync = VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT;
    auto features = vk_struct<VkValidationFeaturesEXT>(VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT);
    features.enabledValidationFeatureCount = 1;
    features.pEnabledValidationFeatures = &sync;
    if (sync_validation()) features.pNext = &messenger;

    auto ici = vk_struct<VkInstanceCreateInfo>(VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO);
    ici.pApplicationInfo = &app;
    if (validation_) {
      ici.enabledLayerCount = 1;
      ici.ppEnabledLayerNames = &layer;
      ici.enabledExtensionCount = 1;
      ici.ppEnabledExtensionNames = &ext;
      ici.pNext = sync_validation() ? static_cast<const void*>(&features) : &messenger;
    }
    VKATTN_APP_CHECK(vkCreateInstance(&ici, nullptr, &instance_));
    if (validation_) {
      auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
          vkGetInstanceProcAddr(instance_, "vkCreateDebugUtilsMessengerEXT"));
      VKATTN_APP_CHECK(create(instance_, &messenger, nullptr, &messenger_));
    }

    // The device whose name contains "llvmpipe", else the first.
    vkEnumeratePhysicalDevices(instance_, &count, nullptr);
    REQUIRE(count > 0);
    std::vector<VkPhysicalDevice> devices(count);
    vkEnumeratePhysicalDevices(instance_, &count, devices.data());
    physical_ = devices[0];
    for (VkPhysicalDevice d : devices) {
      VkPhysicalDeviceProperties p;
      vkGetPhysicalDeviceProperties(d, &p);
      if (std::strstr(p.deviceName, "llvmpipe")) physical_ = d;
    }
    vkGetPhysicalDeviceProperties(physical_, &properties_);
    vkGetPhysicalDeviceMemoryProperties(physical_, &memory_);

    vkGetPhysicalDeviceQueueFamilyProperties(physical_, &count, nullptr);
    std::vector<VkQueueFamilyProperties> families(count);
    vkGetPhysicalDeviceQueueFamilyProperties(physical_, &count, families.data());
    family_ = static_cast<uint32_t>(std::find_if(families.begin(), families.end(), [](const auto& f) {
                                      return (f.queueFlags & VK_QUEUE_COMPUTE_BIT) != 0;
                                    }) - families.begin());
    REQUIRE(family_ < count);

    auto supported11 = vk_struct<VkPhysicalDeviceVulkan11Features>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES);
    auto supported = vk_struct<VkPhysicalDeviceFeatures2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2);
    supported.pNext = &supported11;
    vkGetPhysicalDeviceFeatures2(physical_, &supported);
    storage_16bit_ = supported11.storageBuffer16BitAccess == VK_TRUE;
    shader_int64_ = supported.features.shaderInt64 == VK_TRUE;

    auto enable11 = vk_struct<VkPhysicalDeviceVulkan11Features>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES);
    enable11.storageBuffer16BitAccess = storage_16bit_ ? VK_TRUE : VK_FALSE;
    auto enable = vk_struct<VkPhysicalDeviceFeatures2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2);
    enable.pNext = &enable11;
    enable.features.shaderInt64 = shader_int64_ ? VK_TRUE : VK_FALSE;
    const float priority = 1.0f;
    auto qci = vk_struct<VkDeviceQueueCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO);
    qci.queueFamilyIndex = family_;
    qci.queueCount = 1;
    qci.pQueuePriorities = &priority;
    const std::vector<const char*> extensions = Context::required_device_extensions();
    auto dci = vk_struct<VkDeviceCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO);
    dci.pNext = &enable;
    dci.queueCreateInfoCount = 1;
    dci.pQueueCreateInfos = &qci;
    dci.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
    dci.ppEnabledExtensionNames = extensions.data();
    VKATTN_APP_CHECK(vkCreateDevice(physical_, &dci, nullptr, &device_));
    vkGetDeviceQueue(device_, family_, 0, &queue_);

    auto pci = vk_struct<VkCommandPoolCreateInfo>(VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO);
    pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pci.queueFamilyIndex = family_;
    VKATTN_APP_CHECK(vkCreateCommandPool(device_, &pci, nullptr, &pool_));
    auto cai = vk_struct<VkCommandBufferAllocateInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO);
    cai.commandPool = pool_;
    cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    cai.commandBufferCount = 1;
    VKATTN_APP_CHECK(vkAllocateCommandBuffers(device_, &cai, &cmd_));
    auto fci = vk_struct<VkFenceCreateInfo>(VK_STRUCTURE_TYPE_FENCE_CREATE_INFO);
    VKATTN_APP_CHECK(vkCreateFence(device_, &fci, nullptr, &fence_));
  }

  ~VulkanApp() {
    for (AppBuffer& b : buffers_) {
      vkDestroyBuffer(device_, b.buffer, nullptr);
      vkFreeMemory(device_, b.memory, nullptr);
    }
    if (fence_) vkDestroyFence(device_, fence_, nullptr);
    if (pool_) vkDestroyCommandPool(device_, pool_, nullptr);
    if (device_) vkDestroyDevice(device_, nullptr);
    if (messenger_) {
      auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
          vkGetInstanceProcAddr(instance_, "vkDestroyDebugUtilsMessengerEXT"));
      destroy(instance_, messenger_, nullptr);
    }
    if (instance_) vkDestroyInstance(instance_, nullptr);
    // The object-lifetime layer reports handles still alive when the device (or the instance) is
    // destroyed — one vkattn left behind on the adopted device — only now, after the test's own
    // checks: they fail the test too, as do messages the test did not check.
    for (const std::string& m : messages_) FAIL_CHECK("validation message (adopted device, at its destruction): " << m);
  }
  VulkanApp(const VulkanApp&) = delete;
  VulkanApp& operator=(const VulkanApp&) = delete;

  AdoptedDevice adopted() const {
    AdoptedDevice a;
    a.instance = instance_;
    a.physical_device = physical_;
    a.device = device_;
    a.queue = queue_;
    a.queue_family_index = family_;
    a.storage_16bit_enabled = storage_16bit_;
    a.shader_int64_enabled = shader_int64_;
    return a;
  }

  // A buffer usable as storage and transfer source/destination, in host-visible coherent memory.
  AppBuffer create_buffer(VkDeviceSize size) {
    AppBuffer b;
    b.size = size;
    auto bci = vk_struct<VkBufferCreateInfo>(VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO);
    bci.size = size;
    // (Indirect: as a workspace, a buffer holds the grid of a split dispatch by key lengths.)
    bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT;
    bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    VKATTN_APP_CHECK(vkCreateBuffer(device_, &bci, nullptr, &b.buffer));
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(device_, b.buffer, &req);
    const VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    uint32_t type = UINT32_MAX;
    for (uint32_t i = 0; i < memory_.memoryTypeCount && type == UINT32_MAX; ++i) {
      if ((req.memoryTypeBits & (1u << i)) && (memory_.memoryTypes[i].propertyFlags & want) == want) type = i;
    }
    REQUIRE(type != UINT32_MAX);
    auto mai = vk_struct<VkMemoryAllocateInfo>(VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO);
    mai.allocationSize = req.size;
    mai.memoryTypeIndex = type;
    VKATTN_APP_CHECK(vkAllocateMemory(device_, &mai, nullptr, &b.memory));
    VKATTN_APP_CHECK(vkBindBufferMemory(device_, b.buffer, b.memory, 0));
    VKATTN_APP_CHECK(vkMapMemory(device_, b.memory, 0, VK_WHOLE_SIZE, 0, &b.mapped));
    buffers_.push_back(b);
    return b;
  }

  VkCommandBuffer cmd() const { return cmd_; }
  VkDeviceSize storage_alignment() const { return properties_.limits.minStorageBufferOffsetAlignment; }
  bool storage_16bit() const { return storage_16bit_; }

  // Submits the recorded command buffer and waits for it.
  void submit_and_wait() {
    auto si = vk_struct<VkSubmitInfo>(VK_STRUCTURE_TYPE_SUBMIT_INFO);
    si.commandBufferCount = 1;
    si.pCommandBuffers = &cmd_;
    VKATTN_APP_CHECK(vkQueueSubmit(queue_, 1, &si, fence_));
    VKATTN_APP_CHECK(vkWaitForFences(device_, 1, &fence_, VK_TRUE, UINT64_MAX));
    VKATTN_APP_CHECK(vkResetFences(device_, 1, &fence_));
  }

  bool validation() const { return validation_; }
  VkDevice device() const { return device_; }
  std::vector<std::string> take_messages() {
    std::vector<std::string> out;
    out.swap(messages_);
    return out;
  }

  void expect_no_messages() {
    for (const std::string& m : messages_) FAIL_CHECK("validation message (adopted device): " << m);
    messages_.clear();
  }

 private:
  bool validation_ = false, storage_16bit_ = false, shader_int64_ = false;
  std::vector<std::string> messages_;
  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkPhysicalDeviceProperties properties_{};
  VkPhysicalDeviceMemoryProperties memory_{};
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t family_ = 0;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  std::vector<AppBuffer> buffers_;
};

}  // namespace vkattn::test
