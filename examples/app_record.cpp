// An application that owns everything — instance, device, queue, buffers, command buffer — and lends
// them to vkattn. In ONE command buffer it uploads Q, K and V, runs a compute shader of its own
// (scaling Q), records vkattn's attention after it, and copies the output back; then it submits once
// and checks the result against vkattn's fp64 CPU reference.
//
//   app_record [--validate]
//
// --validate enables the Khronos validation layer with synchronization validation (what catches a
// missing barrier: most drivers give right answers without one) and fails on any message.
#include <vkattn/vkattn.hpp>
#include <vulkan/vulkan.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

// scale.comp, compiled by glslc at build time (examples/CMakeLists.txt) into a list of numbers.
const uint32_t kScaleSpirv[] = {
#include "scale.spv.inc"
};

void check(VkResult result, const char* call) {
  if (result != VK_SUCCESS) throw std::runtime_error(std::string(call) + " failed: VkResult " + std::to_string(result));
}
#define CHECK_VK(call) check((call), #call)

// Every validation message counts as a failure; the loader's own notices are not validation.
int g_validation_messages = 0;
VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT, VkDebugUtilsMessageTypeFlagsEXT,
                                          const VkDebugUtilsMessengerCallbackDataEXT* data, void*) {
  if (data->pMessageIdName && std::strcmp(data->pMessageIdName, "Loader Message") == 0) return VK_FALSE;
  ++g_validation_messages;
  std::fprintf(stderr, "validation: %s\n", data->pMessage);
  return VK_FALSE;
}

struct AppBuffer {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  VkDeviceSize size = 0;
  void* mapped = nullptr;  // host-visible buffers only
};

// A memory type with all of `want`; `fallback` when none has them (lavapipe's memory is all of them).
uint32_t memory_type(const VkPhysicalDeviceMemoryProperties& props, uint32_t allowed, VkMemoryPropertyFlags want,
                     VkMemoryPropertyFlags fallback) {
  for (const VkMemoryPropertyFlags flags : {want, fallback})
    for (uint32_t i = 0; i < props.memoryTypeCount; ++i)
      if ((allowed & (1u << i)) && (props.memoryTypes[i].propertyFlags & flags) == flags) return i;
  throw std::runtime_error("no suitable memory type");
}

AppBuffer create_buffer(VkDevice device, const VkPhysicalDeviceMemoryProperties& props, VkDeviceSize size,
                        bool host_visible) {
  AppBuffer b;
  b.size = size;
  VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  info.size = size;
  // vkattn binds its buffers as storage buffers; the copies need the transfer bits, and a workspace
  // the indirect bit (a split call with key lengths reads its dispatch's grid from it).
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT |
               VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  CHECK_VK(vkCreateBuffer(device, &info, nullptr, &b.buffer));
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(device, b.buffer, &req);
  const VkMemoryPropertyFlags host = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  alloc.allocationSize = req.size;
  alloc.memoryTypeIndex = host_visible ? memory_type(props, req.memoryTypeBits, host, host)
                                       : memory_type(props, req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
  CHECK_VK(vkAllocateMemory(device, &alloc, nullptr, &b.memory));
  CHECK_VK(vkBindBufferMemory(device, b.buffer, b.memory, 0));
  if (host_visible) CHECK_VK(vkMapMemory(device, b.memory, 0, VK_WHOLE_SIZE, 0, &b.mapped));
  return b;
}

void destroy_buffer(VkDevice device, AppBuffer& b) {
  vkDestroyBuffer(device, b.buffer, nullptr);
  vkFreeMemory(device, b.memory, nullptr);
  b = {};
}

// One global memory barrier: `src` work's writes become visible to `dst` work.
void barrier(VkCommandBuffer cmd, VkPipelineStageFlags src_stage, VkAccessFlags src_access,
             VkPipelineStageFlags dst_stage, VkAccessFlags dst_access) {
  VkMemoryBarrier b{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  b.srcAccessMask = src_access;
  b.dstAccessMask = dst_access;
  vkCmdPipelineBarrier(cmd, src_stage, dst_stage, 0, 1, &b, 0, nullptr, 0, nullptr);
}

bool has_layer(const char* name) {
  uint32_t count = 0;
  vkEnumerateInstanceLayerProperties(&count, nullptr);
  std::vector<VkLayerProperties> layers(count);
  vkEnumerateInstanceLayerProperties(&count, layers.data());
  return std::any_of(layers.begin(), layers.end(), [&](const VkLayerProperties& l) { return std::strcmp(l.layerName, name) == 0; });
}

bool has_device_extension(VkPhysicalDevice device, const char* name) {
  uint32_t count = 0;
  vkEnumerateDeviceExtensionProperties(device, nullptr, &count, nullptr);
  std::vector<VkExtensionProperties> extensions(count);
  vkEnumerateDeviceExtensionProperties(device, nullptr, &count, extensions.data());
  return std::any_of(extensions.begin(), extensions.end(),
                     [&](const VkExtensionProperties& e) { return std::strcmp(e.extensionName, name) == 0; });
}

// The application's instance, with the validation layer and synchronization validation when asked.
struct AppInstance {
  VkInstance instance = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger = VK_NULL_HANDLE;  // --validate only
};

AppInstance create_instance(bool validate) {
  const char* layer = "VK_LAYER_KHRONOS_validation";
  if (validate && !has_layer(layer)) throw std::runtime_error("--validate: VK_LAYER_KHRONOS_validation is not installed");
  VkApplicationInfo app_info{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app_info.pApplicationName = "vkattn app_record example";
  app_info.apiVersion = vkattn::Context::required_api_version;
  VkDebugUtilsMessengerCreateInfoEXT messenger_info{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
  messenger_info.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  messenger_info.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                               VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  messenger_info.pfnUserCallback = on_message;
  const VkValidationFeatureEnableEXT sync_validation = VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT;
  VkValidationFeaturesEXT features{VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT};
  features.enabledValidationFeatureCount = 1;
  features.pEnabledValidationFeatures = &sync_validation;
  features.pNext = &messenger_info;  // also reports what happens inside vkCreateInstance/vkDestroyInstance
  const char* debug_utils = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
  VkInstanceCreateInfo instance_info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  instance_info.pApplicationInfo = &app_info;
  if (validate) {
    instance_info.pNext = &features;
    instance_info.enabledLayerCount = 1;
    instance_info.ppEnabledLayerNames = &layer;
    instance_info.enabledExtensionCount = 1;
    instance_info.ppEnabledExtensionNames = &debug_utils;
  }
  AppInstance app;
  CHECK_VK(vkCreateInstance(&instance_info, nullptr, &app.instance));
  if (validate) {
    auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(vkGetInstanceProcAddr(app.instance, "vkCreateDebugUtilsMessengerEXT"));
    CHECK_VK(create(app.instance, &messenger_info, nullptr, &app.messenger));
  }
  return app;
}

void destroy_instance(AppInstance& app) {
  if (app.messenger) {
    auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(vkGetInstanceProcAddr(app.instance, "vkDestroyDebugUtilsMessengerEXT"));
    destroy(app.instance, app.messenger, nullptr);
  }
  vkDestroyInstance(app.instance, nullptr);
}

// The application's device: what it found, what it enabled, and its queue.
struct AppDevice {
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  uint32_t family = 0;  // a queue family with compute
  VkPhysicalDeviceMemoryProperties memory{};
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  bool storage_16bit = false;  // 16-bit storage enabled (vkattn's f16/bf16)
  bool shader_int64 = false;   // 64-bit integers enabled (vkattn's GEMM on CPU devices reads with them)
};

// The first physical device with what vkattn needs (its extensions) and a compute queue.
void pick_physical_device(VkInstance instance, AppDevice& d) {
  uint32_t count = 0;
  vkEnumeratePhysicalDevices(instance, &count, nullptr);
  std::vector<VkPhysicalDevice> physical_devices(count);
  vkEnumeratePhysicalDevices(instance, &count, physical_devices.data());
  for (VkPhysicalDevice candidate : physical_devices) {
    const auto needed = vkattn::Context::required_device_extensions();
    if (!std::all_of(needed.begin(), needed.end(), [&](const char* e) { return has_device_extension(candidate, e); }))
      continue;
    vkGetPhysicalDeviceQueueFamilyProperties(candidate, &count, nullptr);
    std::vector<VkQueueFamilyProperties> families(count);
    vkGetPhysicalDeviceQueueFamilyProperties(candidate, &count, families.data());
    for (uint32_t i = 0; i < count && !d.physical; ++i)
      if (families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) d.physical = candidate, d.family = i;
    if (d.physical) break;
  }
  if (!d.physical) throw std::runtime_error("no Vulkan device with VK_KHR_push_descriptor and a compute queue");
  VkPhysicalDeviceProperties properties;
  vkGetPhysicalDeviceProperties(d.physical, &properties);
  vkGetPhysicalDeviceMemoryProperties(d.physical, &d.memory);
  std::printf("device: %s\n", properties.deviceName);
}

// The device: vkattn's extensions, 16-bit storage when supported (vkattn's f16/bf16) and 64-bit
// integers when supported (what vkattn uses is told to it in AdoptedDevice).
AppDevice create_device(VkInstance instance) {
  AppDevice d;
  pick_physical_device(instance, d);
  VkPhysicalDeviceVulkan11Features supported11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceFeatures2 supported{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  supported.pNext = &supported11;
  vkGetPhysicalDeviceFeatures2(d.physical, &supported);
  VkPhysicalDeviceVulkan11Features enable11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  enable11.storageBuffer16BitAccess = supported11.storageBuffer16BitAccess;
  VkPhysicalDeviceFeatures2 enable{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  enable.pNext = &enable11;
  enable.features.shaderInt64 = supported.features.shaderInt64;
  const float priority = 1.0f;
  VkDeviceQueueCreateInfo queue_info{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  queue_info.queueFamilyIndex = d.family;
  queue_info.queueCount = 1;
  queue_info.pQueuePriorities = &priority;
  const std::vector<const char*> extensions = vkattn::Context::required_device_extensions();
  VkDeviceCreateInfo device_info{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  device_info.pNext = &enable;
  device_info.queueCreateInfoCount = 1;
  device_info.pQueueCreateInfos = &queue_info;
  device_info.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  device_info.ppEnabledExtensionNames = extensions.data();
  CHECK_VK(vkCreateDevice(d.physical, &device_info, nullptr, &d.device));
  vkGetDeviceQueue(d.device, d.family, 0, &d.queue);
  d.storage_16bit = enable11.storageBuffer16BitAccess == VK_TRUE;
  d.shader_int64 = enable.features.shaderInt64 == VK_TRUE;
  return d;
}

// The application's own compute pipeline (scale.comp: x *= factor over `count` floats), with an
// ordinary descriptor set.
struct ScalePush {
  uint32_t count;
  float factor;
};

struct ScalePipeline {
  VkShaderModule module;
  VkDescriptorSetLayout set_layout;
  VkPipelineLayout layout;
  VkPipeline pipeline;
};

ScalePipeline create_scale_pipeline(VkDevice device) {
  ScalePipeline p;
  VkShaderModuleCreateInfo module_info{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  module_info.codeSize = sizeof kScaleSpirv;
  module_info.pCode = kScaleSpirv;
  CHECK_VK(vkCreateShaderModule(device, &module_info, nullptr, &p.module));
  const VkDescriptorSetLayoutBinding binding{0, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
  VkDescriptorSetLayoutCreateInfo set_layout_info{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  set_layout_info.bindingCount = 1;
  set_layout_info.pBindings = &binding;
  CHECK_VK(vkCreateDescriptorSetLayout(device, &set_layout_info, nullptr, &p.set_layout));
  const VkPushConstantRange push_range{VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(ScalePush)};
  VkPipelineLayoutCreateInfo pipeline_layout_info{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  pipeline_layout_info.setLayoutCount = 1;
  pipeline_layout_info.pSetLayouts = &p.set_layout;
  pipeline_layout_info.pushConstantRangeCount = 1;
  pipeline_layout_info.pPushConstantRanges = &push_range;
  CHECK_VK(vkCreatePipelineLayout(device, &pipeline_layout_info, nullptr, &p.layout));
  VkComputePipelineCreateInfo pipeline_info{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  pipeline_info.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  pipeline_info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  pipeline_info.stage.module = p.module;
  pipeline_info.stage.pName = "main";
  pipeline_info.layout = p.layout;
  CHECK_VK(vkCreateComputePipelines(device, VK_NULL_HANDLE, 1, &pipeline_info, nullptr, &p.pipeline));
  return p;
}

void destroy_scale_pipeline(VkDevice device, ScalePipeline& p) {
  vkDestroyPipeline(device, p.pipeline, nullptr);
  vkDestroyPipelineLayout(device, p.layout, nullptr);
  vkDestroyDescriptorSetLayout(device, p.set_layout, nullptr);
  vkDestroyShaderModule(device, p.module, nullptr);
}

// The problem: 4 new tokens of 8 query heads (GQA over 2 KV heads) against 1000 cached keys.
struct Problem {
  vkattn::TensorLayout q_layout, kv_layout;
  std::vector<float> q, k, v;
  VkDeviceSize q_bytes, kv_bytes;
};

constexpr float kQFactor = 0.5f;  // what the application's shader does to Q before attention

Problem make_problem() {
  const int64_t heads = 8, kv_heads = 2, seq_q = 4, seq_k = 1000, dim = 64;
  Problem p;
  p.q_layout = vkattn::TensorLayout::bhsd(vkattn::DType::f32, 1, heads, seq_q, dim);
  p.kv_layout = vkattn::TensorLayout::bhsd(vkattn::DType::f32, 1, kv_heads, seq_k, dim);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  auto random = [&](const vkattn::TensorLayout& layout) {
    std::vector<float> x(static_cast<std::size_t>(layout.element_count()));
    for (float& e : x) e = normal(rng);
    return x;
  };
  p.q = random(p.q_layout);
  p.k = random(p.kv_layout);
  p.v = random(p.kv_layout);
  p.q_bytes = p.q.size() * 4;
  p.kv_bytes = p.k.size() * 4;
  return p;
}

// Device buffers for the tensors; host-visible ones to upload from and read back into.
struct TensorBuffers {
  AppBuffer q, k, v, o, upload, readback;
};

TensorBuffers create_tensor_buffers(const AppDevice& d, const Problem& p) {
  TensorBuffers b;
  b.q = create_buffer(d.device, d.memory, p.q_bytes, false);
  b.k = create_buffer(d.device, d.memory, p.kv_bytes, false);
  b.v = create_buffer(d.device, d.memory, p.kv_bytes, false);
  b.o = create_buffer(d.device, d.memory, p.q_bytes, false);
  b.upload = create_buffer(d.device, d.memory, p.q_bytes + 2 * p.kv_bytes, true);
  b.readback = create_buffer(d.device, d.memory, p.q_bytes, true);
  std::memcpy(static_cast<char*>(b.upload.mapped), p.q.data(), p.q_bytes);
  std::memcpy(static_cast<char*>(b.upload.mapped) + p.q_bytes, p.k.data(), p.kv_bytes);
  std::memcpy(static_cast<char*>(b.upload.mapped) + p.q_bytes + p.kv_bytes, p.v.data(), p.kv_bytes);
  return b;
}

// The scale shader's descriptor set, binding Q.
struct ScaleDescriptors {
  VkDescriptorPool pool;
  VkDescriptorSet q_set;
};

ScaleDescriptors create_scale_descriptors(VkDevice device, const ScalePipeline& scale, const AppBuffer& q) {
  ScaleDescriptors s;
  VkDescriptorPoolSize pool_size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1};
  VkDescriptorPoolCreateInfo descriptor_pool_info{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  descriptor_pool_info.maxSets = 1;
  descriptor_pool_info.poolSizeCount = 1;
  descriptor_pool_info.pPoolSizes = &pool_size;
  CHECK_VK(vkCreateDescriptorPool(device, &descriptor_pool_info, nullptr, &s.pool));
  VkDescriptorSetAllocateInfo set_info{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  set_info.descriptorPool = s.pool;
  set_info.descriptorSetCount = 1;
  set_info.pSetLayouts = &scale.set_layout;
  CHECK_VK(vkAllocateDescriptorSets(device, &set_info, &s.q_set));
  const VkDescriptorBufferInfo q_desc{q.buffer, 0, q.size};
  VkWriteDescriptorSet write{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
  write.dstSet = s.q_set;
  write.descriptorCount = 1;
  write.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
  write.pBufferInfo = &q_desc;
  vkUpdateDescriptorSets(device, 1, &write, 0, nullptr);
  return s;
}

// The command buffer everything is recorded into, and the fence its one submission signals.
struct Commands {
  VkCommandPool pool;
  VkCommandBuffer cmd;
  VkFence fence;
};

Commands create_commands(const AppDevice& d) {
  Commands c;
  VkCommandPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pool_info.queueFamilyIndex = d.family;
  CHECK_VK(vkCreateCommandPool(d.device, &pool_info, nullptr, &c.pool));
  VkCommandBufferAllocateInfo cmd_info{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  cmd_info.commandPool = c.pool;
  cmd_info.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  cmd_info.commandBufferCount = 1;
  CHECK_VK(vkAllocateCommandBuffers(d.device, &cmd_info, &c.cmd));
  VkFenceCreateInfo fence_info{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  CHECK_VK(vkCreateFence(d.device, &fence_info, nullptr, &c.fence));
  return c;
}

// The upload of Q, K and V from the host-visible buffer, and the barrier that orders it before any
// shader reads or writes them (the scale shader and attention).
void record_upload(VkCommandBuffer cmd, const Problem& p, const TensorBuffers& b) {
  const VkBufferCopy to_q{0, 0, p.q_bytes}, to_k{p.q_bytes, 0, p.kv_bytes}, to_v{p.q_bytes + p.kv_bytes, 0, p.kv_bytes};
  vkCmdCopyBuffer(cmd, b.upload.buffer, b.q.buffer, 1, &to_q);
  vkCmdCopyBuffer(cmd, b.upload.buffer, b.k.buffer, 1, &to_k);
  vkCmdCopyBuffer(cmd, b.upload.buffer, b.v.buffer, 1, &to_v);
  barrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
          VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
}

// The application's own work: Q *= 0.5, in place.
void record_scale(VkCommandBuffer cmd, const ScalePipeline& scale, const ScaleDescriptors& sets, const Problem& p) {
  vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, scale.pipeline);
  vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, scale.layout, 0, 1, &sets.q_set, 0, nullptr);
  const ScalePush push{static_cast<uint32_t>(p.q.size()), kQFactor};
  vkCmdPushConstants(cmd, scale.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof push, &push);
  vkCmdDispatch(cmd, static_cast<uint32_t>((p.q.size() + 63) / 64), 1, 1);
}

// O copied into the host-visible buffer: attention's shader writes of O before the transfer that
// reads it (the other side of record_attention's contract), and that transfer's write before the
// host reads the mapped memory.
void record_readback(VkCommandBuffer cmd, const Problem& p, const TensorBuffers& b) {
  barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
          VK_ACCESS_TRANSFER_READ_BIT);
  const VkBufferCopy from_o{0, 0, p.q_bytes};
  vkCmdCopyBuffer(cmd, b.o.buffer, b.readback.buffer, 1, &from_o);
  barrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
          VK_ACCESS_HOST_READ_BIT);
}

// Everything the one command buffer needs from the application.
struct App {
  const AppInstance& instance;
  const AppDevice& device;
  const ScalePipeline& scale;
  const ScaleDescriptors& scale_sets;
  const TensorBuffers& buffers;
  const Commands& commands;
};

// vkattn borrows the device and the buffers; it owns none of them. Its objects (the Context, the
// Buffer views) are gone when this returns, before the handles they borrow; the workspace it asks
// for is the application's, in `workspace_buf`. Records upload, the application's dispatch,
// attention and readback into one command buffer, submits it once, and returns O.
std::vector<float> attend_in_one_command_buffer(const App& app, const Problem& p, AppBuffer& workspace_buf) {
  const AppDevice& d = app.device;
  const TensorBuffers& b = app.buffers;
  vkattn::AdoptedDevice lent;
  lent.instance = app.instance.instance;
  lent.physical_device = d.physical;
  lent.device = d.device;
  lent.queue = d.queue;
  lent.queue_family_index = d.family;
  lent.storage_16bit_enabled = d.storage_16bit;
  lent.shader_int64_enabled = d.shader_int64;
  vkattn::Context context = vkattn::Context::adopt(lent);
  vkattn::Buffer q_view = vkattn::Buffer::wrap(context, b.q.buffer, 0, p.q_bytes);
  vkattn::Buffer k_view = vkattn::Buffer::wrap(context, b.k.buffer, 0, p.kv_bytes);
  vkattn::Buffer v_view = vkattn::Buffer::wrap(context, b.v.buffer, 0, p.kv_bytes);
  vkattn::Buffer o_view = vkattn::Buffer::wrap(context, b.o.buffer, 0, p.q_bytes);
  vkattn::AttentionArgs args;
  args.q = {&q_view, p.q_layout};
  args.k = {&k_view, p.kv_layout};
  args.v = {&v_view, p.kv_layout};
  args.out = {&o_view, p.q_layout};
  args.options.causal = vkattn::Causal::bottom_right;  // the new tokens see the cache and each other causally

  // plan_attention checks everything (throws vkattn::Error) and says how much workspace the
  // recorded work needs (split-KV partials); the application provides it, like every buffer.
  const vkattn::AttentionPlan plan = vkattn::plan_attention(context, args);
  std::printf("plan: %s path, %s kernel, %u key splits, workspace %llu bytes\n", plan.path, plan.kernel, plan.splits,
              static_cast<unsigned long long>(plan.workspace_bytes));
  vkattn::Buffer workspace_view;
  vkattn::BufferSlice workspace;
  if (plan.workspace_bytes > 0) {
    workspace_buf = create_buffer(d.device, d.memory, plan.workspace_bytes, false);
    workspace_view = vkattn::Buffer::wrap(context, workspace_buf.buffer, 0, plan.workspace_bytes);
    workspace = {&workspace_view, 0};
  }

  // ---- One command buffer: upload, the application's dispatch, attention, readback. ----
  const VkCommandBuffer cmd = app.commands.cmd;
  VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  CHECK_VK(vkBeginCommandBuffer(cmd, &begin));
  record_upload(cmd, p, b);
  record_scale(cmd, app.scale, app.scale_sets, p);
  // The caller's side of record_attention's contract: its inputs' writes (here the scale shader's
  // write of Q) are made visible to compute-shader reads before it.
  barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
          VK_ACCESS_SHADER_READ_BIT);
  // vkattn records its dispatches (and the barriers between them) here; nothing is submitted. It
  // binds its own pipelines, push descriptors and push constants: rebind yours after it.
  vkattn::record_attention(context, cmd, args, workspace);
  record_readback(cmd, p, b);
  CHECK_VK(vkEndCommandBuffer(cmd));

  VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &cmd;
  CHECK_VK(vkQueueSubmit(d.queue, 1, &submit, app.commands.fence));
  CHECK_VK(vkWaitForFences(d.device, 1, &app.commands.fence, VK_TRUE, UINT64_MAX));
  std::vector<float> out(p.q.size());
  std::memcpy(out.data(), b.readback.mapped, p.q_bytes);
  return out;
}

// The largest error of O against the fp64 reference (fed Q as the application's shader left it),
// normalised by max|V|; infinite when O holds NaN.
double max_error_against_reference(const Problem& p, const std::vector<float>& out) {
  vkattn::reference::Inputs in;
  in.q_layout = p.q_layout;
  in.k_layout = p.kv_layout;
  in.v_layout = p.kv_layout;
  std::vector<float> scaled_q = p.q;
  for (float& x : scaled_q) x *= kQFactor;  // exact: a power of two
  in.q = scaled_q;
  in.k = p.k;
  in.v = p.v;
  in.options.causal = vkattn::Causal::bottom_right;
  const vkattn::reference::Outputs expected = vkattn::reference::attention(in);
  double max_v = 0.0, max_err = 0.0;
  for (const float x : p.v) max_v = std::max(max_v, static_cast<double>(std::fabs(x)));
  for (std::size_t i = 0; i < out.size(); ++i) {
    const double err = std::fabs(out[i] - expected.out[i]) / max_v;
    max_err = std::isnan(err) ? INFINITY : std::max(max_err, err);
  }
  return max_err;
}

int run(bool validate) {
  AppInstance instance = create_instance(validate);
  const AppDevice d = create_device(instance.instance);
  ScalePipeline scale = create_scale_pipeline(d.device);
  const Problem p = make_problem();
  TensorBuffers b = create_tensor_buffers(d, p);
  const ScaleDescriptors scale_sets = create_scale_descriptors(d.device, scale, b.q);
  const Commands commands = create_commands(d);

  AppBuffer workspace_buf;  // sized by plan_attention
  const std::vector<float> out =
      attend_in_one_command_buffer(App{instance, d, scale, scale_sets, b, commands}, p, workspace_buf);
  // The Context and the Buffer views are gone; the device and buffers are still the application's.
  const double max_err = max_error_against_reference(p, out);
  std::printf("max error (normalised by max|V|): %.3g\n", max_err);

  // ---- Tear down in reverse order of creation. ----
  vkDestroyFence(d.device, commands.fence, nullptr);
  vkDestroyCommandPool(d.device, commands.pool, nullptr);
  vkDestroyDescriptorPool(d.device, scale_sets.pool, nullptr);
  for (AppBuffer* buffer : {&b.q, &b.k, &b.v, &b.o, &b.upload, &b.readback}) destroy_buffer(d.device, *buffer);
  if (workspace_buf.buffer) destroy_buffer(d.device, workspace_buf);
  destroy_scale_pipeline(d.device, scale);
  vkDestroyDevice(d.device, nullptr);
  destroy_instance(instance);

  if (validate) std::printf("validation messages: %d (synchronization validation on)\n", g_validation_messages);
  if (!(max_err <= 1e-5) || g_validation_messages > 0) {
    std::printf("FAILED\n");
    return 1;
  }
  std::printf("ok\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) try {
  bool validate = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--validate") == 0) {
      validate = true;
    } else {
      std::fprintf(stderr, "usage: app_record [--validate]\n");
      return 2;
    }
  }
  return run(validate);
} catch (const std::exception& e) {  // vkattn::Error included
  std::fprintf(stderr, "app_record: %s\n", e.what());
  return 1;
}
