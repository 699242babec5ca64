// How fast a CPU device's shaders read memory by three paths (load_paths.comp): a storage buffer of
// 64-bit words, as vkattn's CPU kernels read today, and a uniform texel buffer fetched 8 or 16 bytes
// at a time. llvmpipe (lavapipe) runs a storage-buffer load lane by lane, behind a bounds check per
// lane and component (docs/devices.md), while its texel fetches are the sampler's gathers: this
// probe measures what that difference is worth on the device at hand. Raw Vulkan, no vkattn: the
// first physical device the loader lists (the loader's VK_DRIVER_FILES chooses among drivers).
//
//   vkattn_load_paths [--groups G] [--iters I] [--repeats R]
//
// G workgroups of 8 invocations each read I x 8 words of 8 bytes (default 1024 x 256: 128 MiB);
// each path runs R + 1 times, the first untimed (on lavapipe the JIT compiles there). Prints per path
// the minimum and median wall time of a submit-and-wait, the bytes read over the minimum, and
// whether its sums equal the storage path's; then the device and driver.
#include <vulkan/vulkan.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

const uint32_t kStorage[] = {
#include "load_paths_storage.inc"
};
const uint32_t kTexel2[] = {
#include "load_paths_texel2.inc"
};
const uint32_t kTexel4[] = {
#include "load_paths_texel4.inc"
};

void check(VkResult r, const char* what) {
  if (r != VK_SUCCESS) throw std::runtime_error(std::string(what) + " failed: VkResult " + std::to_string(r));
}

uint32_t parse(const char* flag, const char* value) {
  char* end = nullptr;
  const unsigned long v = value ? std::strtoul(value, &end, 10) : 0;
  if (!value || *end != '\0' || v == 0 || v > (1ul << 20))
    throw std::runtime_error(std::string(flag) + ": expected a count from 1 to 2^20, got '" + (value ? value : "") + "'");
  return uint32_t(v);
}

struct Buffer {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
};

struct Probe {
  VkInstance instance = VK_NULL_HANDLE;
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  VkCommandPool pool = VK_NULL_HANDLE;

  Buffer make_buffer(VkDeviceSize size, VkBufferUsageFlags usage) {
    Buffer b;
    VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    info.size = size;
    info.usage = usage;
    check(vkCreateBuffer(device, &info, nullptr, &b.buffer), "vkCreateBuffer");
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(device, b.buffer, &req);
    VkPhysicalDeviceMemoryProperties props;
    vkGetPhysicalDeviceMemoryProperties(physical, &props);
    const VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    uint32_t type = 0;
    while (type < props.memoryTypeCount &&
           !((req.memoryTypeBits & (1u << type)) && (props.memoryTypes[type].propertyFlags & want) == want))
      ++type;
    if (type == props.memoryTypeCount) throw std::runtime_error("no host-visible, coherent memory type");
    VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    alloc.allocationSize = req.size;
    alloc.memoryTypeIndex = type;
    check(vkAllocateMemory(device, &alloc, nullptr, &b.memory), "vkAllocateMemory");
    check(vkBindBufferMemory(device, b.buffer, b.memory, 0), "vkBindBufferMemory");
    return b;
  }

  // Runs one path `repeats + 1` times; returns the wall times of the timed runs (ms).
  std::vector<double> run(const uint32_t* code, size_t code_bytes, VkDescriptorType source_type, VkBuffer source,
                          VkBufferView view, VkBuffer sums, uint32_t groups, uint32_t iters, uint32_t repeats) {
    VkDescriptorSetLayoutBinding bindings[2] = {};
    bindings[0] = {0, source_type, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
    bindings[1] = {1, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
    VkDescriptorSetLayoutCreateInfo set_info{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
    set_info.bindingCount = 2;
    set_info.pBindings = bindings;
    VkDescriptorSetLayout set_layout;
    check(vkCreateDescriptorSetLayout(device, &set_info, nullptr, &set_layout), "vkCreateDescriptorSetLayout");
    const VkPushConstantRange push{VK_SHADER_STAGE_COMPUTE_BIT, 0, 4};
    VkPipelineLayoutCreateInfo layout_info{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    layout_info.setLayoutCount = 1;
    layout_info.pSetLayouts = &set_layout;
    layout_info.pushConstantRangeCount = 1;
    layout_info.pPushConstantRanges = &push;
    VkPipelineLayout layout;
    check(vkCreatePipelineLayout(device, &layout_info, nullptr, &layout), "vkCreatePipelineLayout");
    VkShaderModuleCreateInfo module_info{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    module_info.codeSize = code_bytes;
    module_info.pCode = code;
    VkShaderModule module;
    check(vkCreateShaderModule(device, &module_info, nullptr, &module), "vkCreateShaderModule");
    VkComputePipelineCreateInfo pipe_info{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    pipe_info.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, nullptr, 0, VK_SHADER_STAGE_COMPUTE_BIT, module, "main", nullptr};
    pipe_info.layout = layout;
    VkPipeline pipeline;
    check(vkCreateComputePipelines(device, VK_NULL_HANDLE, 1, &pipe_info, nullptr, &pipeline), "vkCreateComputePipelines");

    const VkDescriptorPoolSize sizes[2] = {{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 2}, {VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER, 1}};
    VkDescriptorPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
    pool_info.maxSets = 1;
    pool_info.poolSizeCount = 2;
    pool_info.pPoolSizes = sizes;
    VkDescriptorPool descriptor_pool;
    check(vkCreateDescriptorPool(device, &pool_info, nullptr, &descriptor_pool), "vkCreateDescriptorPool");
    VkDescriptorSetAllocateInfo alloc{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    alloc.descriptorPool = descriptor_pool;
    alloc.descriptorSetCount = 1;
    alloc.pSetLayouts = &set_layout;
    VkDescriptorSet set;
    check(vkAllocateDescriptorSets(device, &alloc, &set), "vkAllocateDescriptorSets");
    const VkDescriptorBufferInfo source_info{source, 0, VK_WHOLE_SIZE}, sums_info{sums, 0, VK_WHOLE_SIZE};
    VkWriteDescriptorSet writes[2] = {{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET}, {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET}};
    writes[0].dstSet = writes[1].dstSet = set;
    writes[0].dstBinding = 0, writes[1].dstBinding = 1;
    writes[0].descriptorCount = writes[1].descriptorCount = 1;
    writes[0].descriptorType = source_type;
    if (view != VK_NULL_HANDLE) writes[0].pTexelBufferView = &view;
    else writes[0].pBufferInfo = &source_info;
    writes[1].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[1].pBufferInfo = &sums_info;
    vkUpdateDescriptorSets(device, 2, writes, 0, nullptr);

    VkCommandBufferAllocateInfo cb_info{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    cb_info.commandPool = pool;
    cb_info.commandBufferCount = 1;
    VkCommandBuffer cb;
    check(vkAllocateCommandBuffers(device, &cb_info, &cb), "vkAllocateCommandBuffers");
    VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    check(vkBeginCommandBuffer(cb, &begin), "vkBeginCommandBuffer");
    vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
    vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, &set, 0, nullptr);
    vkCmdPushConstants(cb, layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, 4, &iters);
    vkCmdDispatch(cb, groups, 1, 1);
    check(vkEndCommandBuffer(cb), "vkEndCommandBuffer");

    std::vector<double> ms;
    VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    submit.commandBufferCount = 1;
    submit.pCommandBuffers = &cb;
    for (uint32_t r = 0; r <= repeats; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      check(vkQueueSubmit(queue, 1, &submit, VK_NULL_HANDLE), "vkQueueSubmit");
      check(vkQueueWaitIdle(queue), "vkQueueWaitIdle");
      if (r > 0) ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    vkFreeCommandBuffers(device, pool, 1, &cb);
    vkDestroyDescriptorPool(device, descriptor_pool, nullptr);
    vkDestroyPipeline(device, pipeline, nullptr);
    vkDestroyShaderModule(device, module, nullptr);
    vkDestroyPipelineLayout(device, layout, nullptr);
    vkDestroyDescriptorSetLayout(device, set_layout, nullptr);
    return ms;
  }
};

int probe(int argc, char** argv) {
  uint32_t groups = 1024, iters = 256, repeats = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const char* value = i + 1 < argc ? argv[++i] : nullptr;
    if (flag == "--groups") groups = parse("--groups", value);
    else if (flag == "--iters") iters = parse("--iters", value);
    else if (flag == "--repeats") repeats = parse("--repeats", value);
    else throw std::runtime_error("unknown option '" + flag + "' (--groups G, --iters I, --repeats R)");
  }
  const uint64_t words = uint64_t(groups) * 8 * iters * 8;
  const VkDeviceSize bytes = words * 8;

  Probe p;
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.apiVersion = VK_API_VERSION_1_2;
  VkInstanceCreateInfo instance_info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  instance_info.pApplicationInfo = &app;
  check(vkCreateInstance(&instance_info, nullptr, &p.instance), "vkCreateInstance");
  uint32_t count = 1;
  const VkResult listed = vkEnumeratePhysicalDevices(p.instance, &count, &p.physical);
  if ((listed != VK_SUCCESS && listed != VK_INCOMPLETE) || count == 0) throw std::runtime_error("no Vulkan device");
  VkPhysicalDeviceFeatures supported;
  vkGetPhysicalDeviceFeatures(p.physical, &supported);
  if (!supported.shaderInt64) throw std::runtime_error("the device has no shaderInt64 (the storage path's 64-bit words)");
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(p.physical, &props);
  if (words / 2 > props.limits.maxTexelBufferElements || bytes > props.limits.maxStorageBufferRange)
    throw std::runtime_error(std::to_string(bytes) + " bytes exceed the device's binding limits: pass fewer --groups or --iters");
  const float priority = 1.0f;
  VkDeviceQueueCreateInfo queue_info{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  queue_info.queueCount = 1;  // family 0: lavapipe's only one, with compute
  queue_info.pQueuePriorities = &priority;
  VkPhysicalDeviceFeatures features{};
  features.shaderInt64 = VK_TRUE;
  VkDeviceCreateInfo device_info{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  device_info.queueCreateInfoCount = 1;
  device_info.pQueueCreateInfos = &queue_info;
  device_info.pEnabledFeatures = &features;
  check(vkCreateDevice(p.physical, &device_info, nullptr, &p.device), "vkCreateDevice");
  vkGetDeviceQueue(p.device, 0, 0, &p.queue);
  VkCommandPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  check(vkCreateCommandPool(p.device, &pool_info, nullptr, &p.pool), "vkCreateCommandPool");

  const Buffer source = p.make_buffer(bytes, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT);
  const uint64_t sums_bytes = uint64_t(groups) * 8 * 8;
  const Buffer sums = p.make_buffer(sums_bytes, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT);
  void* mapped = nullptr;
  check(vkMapMemory(p.device, source.memory, 0, bytes, 0, &mapped), "vkMapMemory");
  auto* w = static_cast<uint64_t*>(mapped);
  for (uint64_t i = 0; i < words; ++i) w[i] = (i + 1) * 0x9E3779B97F4A7C15ull;
  vkUnmapMemory(p.device, source.memory);
  VkBufferView view2, view4;
  VkBufferViewCreateInfo view_info{VK_STRUCTURE_TYPE_BUFFER_VIEW_CREATE_INFO};
  view_info.buffer = source.buffer;
  view_info.range = VK_WHOLE_SIZE;
  view_info.format = VK_FORMAT_R32G32_UINT;
  check(vkCreateBufferView(p.device, &view_info, nullptr, &view2), "vkCreateBufferView");
  view_info.format = VK_FORMAT_R32G32B32A32_UINT;
  check(vkCreateBufferView(p.device, &view_info, nullptr, &view4), "vkCreateBufferView");

  struct Path {
    const char* name;
    const uint32_t* code;
    size_t code_bytes;
    VkDescriptorType type;
    VkBufferView view;
  };
  const Path paths[] = {
      {"storage buffer, 64-bit words", kStorage, sizeof(kStorage), VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, VK_NULL_HANDLE},
      {"texel buffer, 8-byte texels", kTexel2, sizeof(kTexel2), VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER, view2},
      {"texel buffer, 16-byte texels", kTexel4, sizeof(kTexel4), VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER, view4},
  };
  std::vector<uint32_t> first_sums;
  for (const Path& path : paths) {
    std::vector<double> ms = p.run(path.code, path.code_bytes, path.type, source.buffer, path.view, sums.buffer, groups, iters, repeats);
    std::sort(ms.begin(), ms.end());
    check(vkMapMemory(p.device, sums.memory, 0, sums_bytes, 0, &mapped), "vkMapMemory");
    const auto* s = static_cast<const uint32_t*>(mapped);
    std::vector<uint32_t> got(s, s + sums_bytes / 4);
    vkUnmapMemory(p.device, sums.memory);
    if (first_sums.empty()) first_sums = got;
    std::printf("%-30s min %8.2f ms  median %8.2f ms  %6.2f GB/s  sums %s\n", path.name, ms.front(), ms[ms.size() / 2],
                double(bytes) / ms.front() / 1e6, got == first_sums ? "equal" : "DIFFER");
  }
  std::printf("%.0f MiB read by %u x 8 invocations; %s, driver version 0x%x\n", double(bytes) / (1 << 20), groups,
              props.deviceName, props.driverVersion);
  vkDestroyBufferView(p.device, view4, nullptr);
  vkDestroyBufferView(p.device, view2, nullptr);
  for (const Buffer& b : {source, sums}) {
    vkDestroyBuffer(p.device, b.buffer, nullptr);
    vkFreeMemory(p.device, b.memory, nullptr);
  }
  vkDestroyCommandPool(p.device, p.pool, nullptr);  // (its command buffers with it)
  vkDestroyDevice(p.device, nullptr);
  vkDestroyInstance(p.instance, nullptr);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return probe(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vkattn_load_paths: %s\n", e.what());
    return 1;
  }
}
