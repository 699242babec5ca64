// Probe host (not part of vkattn, not built by CMake): times the three shaders of
// lavapipe-2026-11-27-q8_0-read-probe.glsl (mode0.spv .. mode2.spv in the working directory) on device 0,
// 64 workgroups of 8 lanes x 4096 keys of 136-byte q8_0 rows, 7 alternating rounds, host clock around
// submit and wait; checks that modes 0 and 1 give the same sums.
// Built with: g++ -O2 -std=c++17 THIS -o probe -lvulkan -include algorithm
#include <vulkan/vulkan.h>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <vector>
#define CK(x) do { VkResult r_ = (x); if (r_ != VK_SUCCESS) { printf("fail %d at %s\n", r_, #x); return 1; } } while (0)
static std::vector<uint32_t> spv(const char* p) { std::ifstream f(p, std::ios::binary | std::ios::ate); size_t n = f.tellg(); f.seekg(0); std::vector<uint32_t> v(n / 4); f.read((char*)v.data(), n); return v; }
int main() {
  VkApplicationInfo ai{VK_STRUCTURE_TYPE_APPLICATION_INFO}; ai.apiVersion = VK_API_VERSION_1_2;
  VkInstanceCreateInfo ici{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO}; ici.pApplicationInfo = &ai;
  VkInstance inst; CK(vkCreateInstance(&ici, nullptr, &inst));
  uint32_t n = 1; VkPhysicalDevice pd; vkEnumeratePhysicalDevices(inst, &n, &pd);
  VkPhysicalDeviceProperties props; vkGetPhysicalDeviceProperties(pd, &props); printf("device %s\n", props.deviceName);
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  f12.bufferDeviceAddress = VK_TRUE; f12.scalarBlockLayout = VK_TRUE; f12.storageBuffer8BitAccess = VK_FALSE; f12.shaderInt8 = VK_FALSE;
  VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES}; f11.storageBuffer16BitAccess = VK_TRUE; f12.pNext = &f11;
  VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2}; f2.features.shaderInt64 = VK_TRUE; f2.features.shaderInt16 = VK_TRUE; f2.pNext = &f12;
  float prio = 1; VkDeviceQueueCreateInfo qci{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO}; qci.queueCount = 1; qci.pQueuePriorities = &prio;
  VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO}; dci.pNext = &f2; dci.queueCreateInfoCount = 1; dci.pQueueCreateInfos = &qci;
  VkDevice dev; CK(vkCreateDevice(pd, &dci, nullptr, &dev)); VkQueue q; vkGetDeviceQueue(dev, 0, 0, &q);
  const uint32_t rows = 262144; const VkDeviceSize data_bytes = VkDeviceSize(rows) * 136 + 64, out_bytes = 1 << 20;
  auto make = [&](VkDeviceSize bytes, VkBufferUsageFlags usage, VkBuffer& b, VkDeviceMemory& m, void** map) -> int {
    VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO}; bci.size = bytes; bci.usage = usage; CK(vkCreateBuffer(dev, &bci, nullptr, &b));
    VkMemoryRequirements req; vkGetBufferMemoryRequirements(dev, b, &req);
    VkMemoryAllocateFlagsInfo fi{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO}; fi.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
    VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO}; mai.pNext = &fi; mai.allocationSize = req.size; mai.memoryTypeIndex = 0;
    CK(vkAllocateMemory(dev, &mai, nullptr, &m)); CK(vkBindBufferMemory(dev, b, m, 0)); CK(vkMapMemory(dev, m, 0, bytes, 0, map)); return 0; };
  VkBuffer data, out; VkDeviceMemory dm, om; void *dp, *op;
  if (make(data_bytes, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT, data, dm, &dp)) return 1;
  if (make(out_bytes, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT, out, om, &op)) return 1;
  std::mt19937 rng(1); uint8_t* bytes = (uint8_t*)dp;
  for (VkDeviceSize i = 0; i < data_bytes; ++i) bytes[i] = uint8_t(rng());
  for (uint32_t blk = 0; blk < rows * 4; ++blk) { uint16_t d = 0x2000 + (rng() & 0x3ff); memcpy(bytes + 34 * size_t(blk), &d, 2); }  // small positive scales
  VkBufferDeviceAddressInfo bai{VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO}; bai.buffer = data; uint64_t addr = vkGetBufferDeviceAddress(dev, &bai);
  VkDescriptorSetLayoutBinding bd[2] = {{0, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr}, {1, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr}};
  VkDescriptorSetLayoutCreateInfo dl{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO}; dl.bindingCount = 2; dl.pBindings = bd; VkDescriptorSetLayout dsl; CK(vkCreateDescriptorSetLayout(dev, &dl, nullptr, &dsl));
  VkPushConstantRange pcr{VK_SHADER_STAGE_COMPUTE_BIT, 0, 16};
  VkPipelineLayoutCreateInfo plc{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO}; plc.setLayoutCount = 1; plc.pSetLayouts = &dsl; plc.pushConstantRangeCount = 1; plc.pPushConstantRanges = &pcr;
  VkPipelineLayout pl; CK(vkCreatePipelineLayout(dev, &plc, nullptr, &pl));
  VkDescriptorPoolSize ps{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 2}; VkDescriptorPoolCreateInfo dpc{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO}; dpc.maxSets = 1; dpc.poolSizeCount = 1; dpc.pPoolSizes = &ps;
  VkDescriptorPool dpool; CK(vkCreateDescriptorPool(dev, &dpc, nullptr, &dpool));
  VkDescriptorSetAllocateInfo dsa{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO}; dsa.descriptorPool = dpool; dsa.descriptorSetCount = 1; dsa.pSetLayouts = &dsl; VkDescriptorSet ds; CK(vkAllocateDescriptorSets(dev, &dsa, &ds));
  VkDescriptorBufferInfo dbi[2] = {{data, 0, data_bytes}, {out, 0, out_bytes}};
  VkWriteDescriptorSet w[2]; for (int i = 0; i < 2; ++i) { w[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET}; w[i].dstSet = ds; w[i].dstBinding = i; w[i].descriptorCount = 1; w[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER; w[i].pBufferInfo = &dbi[i]; }
  vkUpdateDescriptorSets(dev, 2, w, 0, nullptr);
  VkPipeline pipes[3];
  for (int m = 0; m < 3; ++m) {
    char name[32]; snprintf(name, 32, "mode%d.spv", m); auto code = spv(name);
    VkShaderModuleCreateInfo smc{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO}; smc.codeSize = code.size() * 4; smc.pCode = code.data(); VkShaderModule sm; CK(vkCreateShaderModule(dev, &smc, nullptr, &sm));
    VkComputePipelineCreateInfo cpc{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO}; cpc.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO}; cpc.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT; cpc.stage.module = sm; cpc.stage.pName = "main"; cpc.layout = pl;
    CK(vkCreateComputePipelines(dev, VK_NULL_HANDLE, 1, &cpc, nullptr, &pipes[m]));
  }
  VkCommandPoolCreateInfo cpi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO}; cpi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT; VkCommandPool cp; CK(vkCreateCommandPool(dev, &cpi, nullptr, &cp));
  VkCommandBufferAllocateInfo cba{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO}; cba.commandPool = cp; cba.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY; cba.commandBufferCount = 1; VkCommandBuffer cb; CK(vkAllocateCommandBuffers(dev, &cba, &cb));
  struct { uint64_t addr; uint32_t keys, rows; } pcv{addr, 4096, rows};
  const uint32_t groups = 64;
  auto run = [&](int m, std::vector<float>* res) -> double {
    vkResetCommandBuffer(cb, 0); VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO}; vkBeginCommandBuffer(cb, &bi);
    vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipes[m]); vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pl, 0, 1, &ds, 0, nullptr);
    vkCmdPushConstants(cb, pl, VK_SHADER_STAGE_COMPUTE_BIT, 0, 16, &pcv); vkCmdDispatch(cb, groups, 1, 1); vkEndCommandBuffer(cb);
    VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO}; si.commandBufferCount = 1; si.pCommandBuffers = &cb;
    auto t0 = std::chrono::steady_clock::now(); vkQueueSubmit(q, 1, &si, VK_NULL_HANDLE); vkQueueWaitIdle(q); auto t1 = std::chrono::steady_clock::now();
    if (res) { res->assign((float*)op, (float*)op + groups * 8); }
    return std::chrono::duration<double, std::milli>(t1 - t0).count(); };
  std::vector<float> r0, r1, r2; run(0, &r0); run(1, &r1); run(2, &r2);
  double maxrel = 0; for (size_t i = 0; i < r0.size(); ++i) maxrel = std::max(maxrel, double(std::fabs(r0[i] - r1[i]) / (std::fabs(r0[i]) + 1e-6)));
  printf("mode0 vs mode1 max rel diff %.3g (r0[0] %g r1[0] %g r2[0] %g)\n", maxrel, r0[0], r1[0], r2[0]);
  const char* names[3] = {"descriptor + realignment", "buffer reference, unaligned", "descriptor, no realignment (wrong)"};
  std::vector<double> t[3];
  for (int round = 0; round < 7; ++round) for (int m = 0; m < 3; ++m) t[m].push_back(run(m, nullptr));
  for (int m = 0; m < 3; ++m) { auto v = t[m]; std::sort(v.begin(), v.end()); printf("%-40s min %.1f median %.1f ms\n", names[m], v[0], v[v.size() / 2]); }
  return 0;
}
