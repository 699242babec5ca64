// The numbers are VkPhysicalDeviceLimits / VkPhysicalDeviceSubgroupProperties /
// VkPhysicalDeviceSubgroupSizeControlProperties as drivers report them for one representative
// device of each class (vulkan.gpuinfo.org device reports; the Vulkan 1.2 specification's "Required
// Limits" table for the minimums; `vkattn devices` on Mesa 22.3 for llvmpipe). Drivers and driver
// versions differ in some of them (maxStorageBufferRange most of all), so where reports disagree the
// smaller value is used: a plan that fits it fits the larger one. The planners read only type,
// is_llvmpipe, subgroup_size, the shared memory, invocations, grid, binding range and offset
// alignment limits and storage_16bit; memory sizes are filled in for completeness.
#include "conform/device_profiles.hpp"

#include <algorithm>

#include "vkattn/error.hpp"

namespace vkattn::conform {
namespace {

constexpr uint64_t kGiB = uint64_t(1) << 30;

DeviceProfile preset(const char* id, const char* name, DeviceType type, uint32_t vendor, uint32_t subgroup, uint32_t min_subgroup,
                    uint32_t max_subgroup, uint32_t shared, uint32_t invocations, uint32_t gx, uint32_t gy, uint32_t gz,
                    uint64_t range, uint64_t alignment, uint32_t push, bool f16, uint64_t memory) {
  DeviceProfile d;
  d.id = id;
  DeviceInfo& i = d.info;
  i.name = name;
  i.type = type;
  i.vendor_id = vendor;
  i.api_version = (1u << 22) | (3u << 12);  // VK_API_VERSION_1_3 (1.2 for the minimums, below)
  i.subgroup_size = subgroup;
  i.subgroup_shuffle = true;  // every device named here (not the Vulkan minimums, below)
  i.max_shared_memory = shared;
  i.max_workgroup_invocations = invocations;
  i.max_workgroup_count[0] = gx;
  i.max_workgroup_count[1] = gy;
  i.max_workgroup_count[2] = gz;
  i.max_storage_buffer_range = range;
  i.min_storage_buffer_offset_alignment = alignment;
  i.max_push_constants_size = push;
  i.storage_16bit = i.shader_float16 = f16;
  i.push_descriptor = true;
  i.device_memory_bytes = memory;
  i.max_allocation_size = std::min<uint64_t>(memory, 4 * kGiB);
  i.max_buffer_size = memory;
  i.min_subgroup_size = min_subgroup;
  i.max_subgroup_size = max_subgroup;
  i.required_subgroup_size = false;  // set below where the driver offers subgroup size control for compute
  return d;
}

std::vector<DeviceProfile> make_profiles() {
  std::vector<DeviceProfile> p;
  // NVIDIA H100 PCIe/SXM (proprietary driver 5xx): warps of 32, 48 KiB of shared memory without the
  // opt-in carve-out (Vulkan reports only the default), 2^31 - 1 workgroups in x.
  p.push_back(preset("h100", "NVIDIA H100 (profile)", DeviceType::discrete, 0x10DE, 32, 32, 32, 49152, 1024, 0x7FFFFFFF, 65535, 65535,
                     0xFFFFFFFFull, 16, 256, true, 80 * kGiB));
  p.back().info.required_subgroup_size = true;
  // AMD RDNA3, e.g. Radeon RX 7900 XTX (RADV): reports wave64, compiles wave32 or wave64
  // (subgroup size control 32..64, compute included); 64 KiB LDS per workgroup.
  p.push_back(preset("rdna3", "AMD RDNA3 (profile)", DeviceType::discrete, 0x1002, 64, 32, 64, 65536, 1024, 0xFFFFFFFF, 65535, 65535,
                     0xFFFFFFFFull, 4, 256, true, 24 * kGiB));
  p.back().info.required_subgroup_size = true;
  // Intel Arc A770 (Mesa ANV): SIMD8/16/32 (reports 32), 64 KiB shared local memory, 65535 workgroups
  // per dimension; ANV has reported maxStorageBufferRange 2^30 (newer releases more).
  p.push_back(preset("arc", "Intel Arc A770 (profile)", DeviceType::discrete, 0x8086, 32, 8, 32, 65536, 1024, 65535, 65535, 65535,
                     kGiB, 4, 128, true, 16 * kGiB));
  p.back().info.required_subgroup_size = true;  // (ANV: subgroup size control, compute included)
  // Apple M-series through MoltenVK: SIMD groups of 32, 32 KiB threadgroup memory, 1024 threads;
  // MoltenVK reports 2^30 for limits Metal leaves open (workgroup count, binding range).
  p.push_back(preset("apple", "Apple M2 via MoltenVK (profile)", DeviceType::integrated, 0x106B, 32, 4, 32, 32768, 1024, kGiB, kGiB, kGiB,
                     kGiB, 16, 4096, true, 16 * kGiB));
  // ARM Mali Valhall, e.g. Mali-G710 (Arm driver): warps of 16, 32 KiB shared memory, 512
  // invocations, maxStorageBufferRange at the required 2^27.
  p.push_back(preset("mali", "ARM Mali-G710 (profile)", DeviceType::integrated, 0x13B5, 16, 16, 16, 32768, 512, 65535, 65535, 65535,
                     uint64_t(1) << 27, 16, 128, true, 8 * kGiB));
  // Qualcomm Adreno 7xx, e.g. Adreno 740 (Qualcomm driver): waves of 64 (128 with size control),
  // 32 KiB shared memory, 1024 invocations; 2^27 binding range (Turnip reports the same).
  p.push_back(preset("adreno", "Qualcomm Adreno 740 (profile)", DeviceType::integrated, 0x5143, 64, 64, 128, 32768, 1024, 65535, 65535, 65535,
                     uint64_t(1) << 27, 64, 128, true, 8 * kGiB));
  // The least a Vulkan 1.2 device may report (specification, "Required Limits"; subgroupSize >= 1,
  // storageBuffer16BitAccess optional): a plan that fits this fits every conformant device.
  {
    DeviceProfile d = preset("vulkan12-min", "Vulkan 1.2 required minimums (profile)", DeviceType::other, 0, 1, 1, 1, 16384, 128, 65535, 65535, 65535,
                            uint64_t(1) << 27, 256, 128, false, kGiB);
    d.info.api_version = (1u << 22) | (2u << 12);
    d.info.subgroup_shuffle = false;  // only VK_SUBGROUP_FEATURE_BASIC_BIT is required
    p.push_back(d);
  }
  // llvmpipe (lavapipe, Mesa 22.3 with LLVM 15 on AVX2): 8 lanes of 32 bits per 256-bit vector,
  // 32 KiB shared memory, 2^27 binding range, loop-bounded kernels (is_llvmpipe).
  {
    DeviceProfile d = preset("llvmpipe", "llvmpipe (profile)", DeviceType::cpu, 0x10005, 8, 8, 8, 32768, 1024, 65535, 65535, 65535,
                            uint64_t(1) << 27, 16, 128, true, 8 * kGiB);
    d.info.is_llvmpipe = true;
    d.info.shader_int64 = true;
    d.info.required_subgroup_size = true;  // (lavapipe offers VK_EXT_subgroup_size_control: 8..8)
    p.push_back(d);
  }
  return p;
}

}  // namespace

const std::vector<DeviceProfile>& device_profiles() {
  static const std::vector<DeviceProfile> profiles = make_profiles();
  return profiles;
}

const DeviceProfile& find_device_profile(const std::string& id) {
  std::string ids;
  for (const DeviceProfile& p : device_profiles()) {
    if (p.id == id) return p;
    ids += (ids.empty() ? "" : ", ") + p.id;
  }
  throw Error("--profile: no device profile '" + id + "' (profiles: " + ids + ")");
}

}  // namespace vkattn::conform
