#include <cstdlib>
#include <string>
#include <vector>

#include "context_impl.hpp"
#include "pipeline_cache.hpp"
#include "vk_check.hpp"
#include "vkattn/error.hpp"

namespace vkattn {
namespace detail {

ContextImpl::~ContextImpl() {
  if (device != VK_NULL_HANDLE) {
    vkDeviceWaitIdle(device);
    pipelines.reset();
    scratch_.reset();
    dummy_.reset();
    if (fence_) vkDestroyFence(device, fence_, nullptr);
    if (pool_) vkDestroyCommandPool(device, pool_, nullptr);
    if (owns_device) vkDestroyDevice(device, nullptr);
  }
  destroy_instance(instance);  // a no-op for adopted devices (no instance handles are owned)
}

void ContextImpl::initialise(uint32_t device_index) {
  info = query_device_info(physical_device, device_index);
  vkGetPhysicalDeviceMemoryProperties(physical_device, &memory_properties);
  push_descriptors = reinterpret_cast<PFN_vkCmdPushDescriptorSetWithTemplateKHR>(
      vkGetDeviceProcAddr(device, "vkCmdPushDescriptorSetWithTemplateKHR"));
  if (!push_descriptors) {
    if (!info.push_descriptor)  // the device does not offer it at all
      throw unsupported("device: " + info.name + " does not offer VK_KHR_push_descriptor, which vkattn needs");
    throw Error("device: VK_KHR_push_descriptor is not enabled on the device (Context::required_device_extensions())");
  }
  if (!storage_16bit_enabled) info.storage_16bit = false;  // not usable unless enabled on the device
  if (!subgroup_size_control_enabled) info.required_subgroup_size = false;
  if (!shader_int64_enabled) info.shader_int64 = false;
  if (info.is_cpu()) {
    VkFormatProperties format;
    vkGetPhysicalDeviceFormatProperties(physical_device, VK_FORMAT_R32G32_UINT, &format);
    VkPhysicalDeviceProperties properties;
    vkGetPhysicalDeviceProperties(physical_device, &properties);
    if (format.bufferFeatures & VK_FORMAT_FEATURE_UNIFORM_TEXEL_BUFFER_BIT)
      texel_view_bytes = uint64_t(properties.limits.maxTexelBufferElements) * 8;
  }

  VkCommandPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pool_info.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool_info.queueFamilyIndex = queue_family;
  VK_TRY(vkCreateCommandPool(device, &pool_info, nullptr, &pool_));
  VkFenceCreateInfo fence_info{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  VK_TRY(vkCreateFence(device, &fence_info, nullptr, &fence_));
  pipelines = std::make_unique<PipelineRegistry>(physical_device, device, pipeline_cache_file, info.preserves_nan);
  dummy_ = allocate_buffer(*this, 256, MemoryUse::device);
}

const Allocation& ContextImpl::scratch(uint64_t bytes) {
  if (!scratch_ || scratch_->size < bytes) {
    scratch_.reset();
    scratch_ = allocate_buffer(*this, bytes, MemoryUse::device);
  }
  return *scratch_;
}

void ContextImpl::release_scratch() {
  std::lock_guard lock(queue_mutex);  // no call of this context is using it meanwhile
  scratch_.reset();
}

uint64_t ContextImpl::scratch_bytes() {
  std::lock_guard lock(queue_mutex);
  return scratch_ ? scratch_->counted_bytes : 0;
}

}  // namespace detail

namespace {

void check_kernel_variant(KernelVariant kernel) {
  if (kernel != KernelVariant::automatic && kernel != KernelVariant::tiled && kernel != KernelVariant::rowwise &&
      kernel != KernelVariant::subgroup)
    throw Error("kernel: invalid value " + std::to_string(static_cast<int>(kernel)) +
                " (expected automatic, tiled, rowwise or subgroup)");
}

// A compute-capable queue family (the first one: usually the universal queue).
uint32_t find_compute_queue_family(VkPhysicalDevice device) {
  uint32_t count = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(device, &count, nullptr);
  std::vector<VkQueueFamilyProperties> families(count);
  vkGetPhysicalDeviceQueueFamilyProperties(device, &count, families.data());
  for (uint32_t i = 0; i < count; ++i)
    if (families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) return i;
  throw detail::unsupported("device: no queue family supports compute");
}

}  // namespace

Context::Context(const ContextOptions& options) : impl_(std::make_shared<detail::ContextImpl>()) {
  check_kernel_variant(options.kernel);  // before any Vulkan object is created
  detail::ContextImpl& c = *impl_;
  c.validation_callback = options.on_validation_message;
  c.kernel = options.kernel;
  c.check_barriers = options.check_barriers;
  c.pipeline_cache_file = options.pipeline_cache_file;
  c.instance = detail::create_instance(options.validation, options.synchronization_validation,
                                       (options.validation || options.synchronization_validation) ? &c.validation_callback : nullptr);
  const auto physical = detail::enumerate_physical_devices(c.instance.instance);
  const std::vector<DeviceInfo> infos = detail::query_device_infos(physical);
  std::string selector = options.device;
  if (selector.empty())
    if (const char* env = std::getenv("VKATTN_DEVICE")) selector = env;  // the one documented switch
  const uint32_t index = detail::select_device(infos, selector);
  c.physical_device = physical[index];
  c.queue_family = find_compute_queue_family(c.physical_device);

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo queue_info{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  queue_info.queueFamilyIndex = c.queue_family;
  queue_info.queueCount = 1;
  queue_info.pQueuePriorities = &priority;
  VkPhysicalDevice16BitStorageFeatures storage16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  storage16.storageBuffer16BitAccess = infos[index].storage_16bit ? VK_TRUE : VK_FALSE;
  // Subgroup size control where offered: the subgroup kernels then require the size they were
  // planned for (DeviceInfo::required_subgroup_size).
  VkPhysicalDeviceSubgroupSizeControlFeatures size_control{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES};
  size_control.subgroupSizeControl = size_control.computeFullSubgroups = VK_TRUE;
  if (infos[index].required_subgroup_size) storage16.pNext = &size_control;
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  features.pNext = &storage16;
  features.features.shaderInt64 = infos[index].shader_int64 ? VK_TRUE : VK_FALSE;
  auto extensions = required_device_extensions();
  if (infos[index].required_subgroup_size) extensions.push_back(VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
  VkDeviceCreateInfo info{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  info.pNext = &features;
  info.queueCreateInfoCount = 1;
  info.pQueueCreateInfos = &queue_info;
  info.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  info.ppEnabledExtensionNames = extensions.data();
  VK_TRY(vkCreateDevice(c.physical_device, &info, nullptr, &c.device));
  c.owns_device = true;
  c.storage_16bit_enabled = infos[index].storage_16bit;
  c.subgroup_size_control_enabled = infos[index].required_subgroup_size;
  c.shader_int64_enabled = infos[index].shader_int64;
  vkGetDeviceQueue(c.device, c.queue_family, 0, &c.queue);
  c.initialise(index);
}

Context::Context(std::shared_ptr<detail::ContextImpl> impl) : impl_(std::move(impl)) {}

Context Context::adopt(const AdoptedDevice& device, const ContextOptions& options) {
  if (!device.instance || !device.physical_device || !device.device || !device.queue)
    throw Error("adopt: instance, physical_device, device and queue must all be valid handles");
  // What sets up a device and instance of vkattn's own: refused rather than silently ignored.
  const auto not_for_adopted = [](const char* field, const char* instead) {
    throw Error(std::string("adopt: ContextOptions::") + field + " does not apply to an adopted device (" + instead +
                "); leave it unset");
  };
  if (!options.device.empty()) not_for_adopted("device", "the application chose the device");
  if (options.validation) not_for_adopted("validation", "enable the validation layer on the application's instance");
  if (options.synchronization_validation)
    not_for_adopted("synchronization_validation", "enable it on the application's instance");
  if (options.on_validation_message)
    not_for_adopted("on_validation_message", "the application's instance reports to its own messenger");
  check_kernel_variant(options.kernel);
  auto impl = std::make_shared<detail::ContextImpl>();
  impl->physical_device = device.physical_device;
  impl->device = device.device;
  impl->queue = device.queue;
  impl->queue_family = device.queue_family_index;
  impl->owns_device = false;
  impl->kernel = options.kernel;
  impl->check_barriers = options.check_barriers;
  impl->storage_16bit_enabled = device.storage_16bit_enabled;
  impl->subgroup_size_control_enabled = device.subgroup_size_control_enabled;
  impl->shader_int64_enabled = device.shader_int64_enabled;
  impl->pipeline_cache_file = options.pipeline_cache_file;
  uint32_t index = 0;
  const auto physical = detail::enumerate_physical_devices(device.instance);
  for (uint32_t i = 0; i < physical.size(); ++i)
    if (physical[i] == device.physical_device) index = i;
  impl->initialise(index);
  return Context(std::move(impl));
}

std::vector<const char*> Context::required_device_extensions() { return {VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME}; }

detail::ContextImpl& Context::impl() const { return *shared_impl(); }

detail::ContextImpl& detail::impl_of(const Context& context) { return context.impl(); }
const std::shared_ptr<detail::ContextImpl>& detail::shared_impl_of(const Context& context) {
  return context.shared_impl();
}

const std::shared_ptr<detail::ContextImpl>& Context::shared_impl() const {
  if (!impl_) throw Error("context: used after being moved from (a moved-from Context holds no device)");
  return impl_;
}

Context::Context(Context&&) noexcept = default;
Context& Context::operator=(Context&&) noexcept = default;
Context::~Context() = default;

const DeviceInfo& Context::device_info() const { return impl().info; }
KernelVariant Context::kernel_variant() const { return impl().kernel; }

const char* to_string(KernelVariant variant) {
  switch (variant) {
    case KernelVariant::tiled: return "tiled";
    case KernelVariant::rowwise: return "rowwise";
    case KernelVariant::subgroup: return "subgroup";
    case KernelVariant::automatic: return "auto";
    default: return "invalid";
  }
}

KernelVariant parse_kernel_variant(const std::string& name) {
  if (name == "auto") return KernelVariant::automatic;
  if (name == "tiled") return KernelVariant::tiled;
  if (name == "rowwise") return KernelVariant::rowwise;
  if (name == "subgroup") return KernelVariant::subgroup;
  throw Error("kernel: unknown variant '" + name + "' (expected auto, tiled, rowwise or subgroup)");
}
VkDevice Context::vk_device() const { return impl().device; }
VkPhysicalDevice Context::vk_physical_device() const { return impl().physical_device; }
VkQueue Context::vk_queue() const { return impl().queue; }
uint32_t Context::queue_family_index() const { return impl().queue_family; }

void Context::save_pipeline_cache(const std::string& path) const {
  detail::write_pipeline_cache_file(path, impl().pipelines->cache_data());
}
bool Context::pipeline_cache_loaded() const { return impl().pipelines->cache_loaded(); }
const std::string& Context::pipeline_cache_note() const { return impl().pipelines->cache_note(); }
std::size_t Context::pipeline_count() const { return impl().pipelines->pipeline_count(); }
std::vector<PipelineBuild> Context::pipeline_builds(std::size_t first) const { return impl().pipelines->builds_since(first); }

MemoryStats Context::memory_stats() const {
  MemoryStats stats = impl().memory->stats();
  stats.scratch_bytes = impl().scratch_bytes();
  return stats;
}
void Context::reset_peak_memory() { impl().memory->reset_peak(); }
void Context::release_scratch() { impl().release_scratch(); }

}  // namespace vkattn
