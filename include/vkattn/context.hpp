// vkattn::Context — a Vulkan device to run attention on: one vkattn creates (instance, device, queue)
// or one the application already has and lends without giving up ownership.
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "vkattn/types.hpp"

namespace vkattn {

class Context;
namespace detail {
class ContextImpl;
// The state behind a Context, for the runtime (runtime/); not an API. Throw Error on a moved-from Context.
ContextImpl& impl_of(const Context& context);
const std::shared_ptr<ContextImpl>& shared_impl_of(const Context& context);
}  // namespace detail

// The kind of a physical device (VkPhysicalDeviceType).
enum class DeviceType { discrete, integrated, virtual_gpu, cpu, other };
// "discrete" | "integrated" | "virtual" | "cpu" | "other" (as `vkattn devices` prints it).
const char* to_string(DeviceType type);

// What vkattn knows about a physical device (`vkattn devices` prints these).
struct DeviceInfo {
  uint32_t index = 0;
  std::string name;
  DeviceType type = DeviceType::other;
  std::string driver_name, driver_info;
  uint32_t api_version = 0, driver_version = 0;
  uint32_t vendor_id = 0;
  bool is_llvmpipe = false;  // Mesa's lavapipe: needs bounded per-invocation loop counts
  uint32_t subgroup_size = 0;
  // The sizes a pipeline may run with (minSubgroupSize, maxSubgroupSize of Vulkan 1.3's subgroup
  // size control; both equal subgroup_size on a device with one size). A pipeline that requests none
  // may run with any of them. 0: not reported (a Vulkan 1.2 device).
  uint32_t min_subgroup_size = 0, max_subgroup_size = 0;
  // A compute pipeline may require a subgroup size in [min, max] (VK_EXT_subgroup_size_control:
  // subgroupSizeControl and computeFullSubgroups, compute in requiredSubgroupSizeStages). From
  // list_devices: offered; from Context::device_info(): also enabled on its device. The subgroup
  // kernels then run on devices of several subgroup sizes (AMD, Intel) with the size they were planned for.
  bool required_subgroup_size = false;
  bool subgroup_shuffle = false;  // subgroupShuffle in compute shaders (VK_SUBGROUP_FEATURE_SHUFFLE_BIT)
  uint32_t max_shared_memory = 0;
  uint32_t max_workgroup_invocations = 0;
  uint32_t max_workgroup_count[3] = {0, 0, 0};
  uint64_t max_storage_buffer_range = 0;
  uint64_t min_storage_buffer_offset_alignment = 0;
  uint64_t device_memory_bytes = 0;  // size of the largest device-local memory heap
  uint64_t max_allocation_size = 0;  // maxMemoryAllocationSize: the largest single allocation
  uint64_t max_buffer_size = 0;      // maxBufferSize (Vulkan 1.3; UINT64_MAX when not reported)
  uint32_t max_push_constants_size = 0;
  bool storage_16bit = false;   // storageBuffer16BitAccess: needed for f16 and bf16 tensors
  bool shader_float16 = false;  // shaderFloat16 (reported; not required)
  // shaderInt64: CPU devices' three-stage GEMM reads its operands as 64-bit words with it (without
  // it such a device runs the GPUs' tiled GEMM, slower there).
  bool shader_int64 = false;
  // shaderSignedZeroInfNanPreserveFloat32: the shaders then declare IEEE NaN/Inf handling, which the
  // contract's NaN propagation needs on drivers that otherwise assume no NaN (NVIDIA does).
  bool preserves_nan = false;
  bool push_descriptor = false;  // VK_KHR_push_descriptor: required
  bool cooperative_matrix = false;  // VK_NV_cooperative_matrix or VK_KHR_cooperative_matrix
  bool timestamps = false;
  double timestamp_period_ns = 0.0;

  // A CPU implementation (lavapipe/llvmpipe, SwiftShader): the planner targets fewer workgroups and
  // picks the subgroup kernel (or rowwise for prefill, tiled for decode, where it does not fit).
  bool is_cpu() const { return type == DeviceType::cpu; }
  bool supports_f16() const { return storage_16bit; }
  bool supports_bf16() const { return storage_16bit; }  // bf16 is converted in the shader
  std::string api_version_string() const;
};

// Enumerates every Vulkan physical device (does not create a logical device).
std::vector<DeviceInfo> list_devices();

// Which fused-kernel variant runs attention. automatic: on CPU devices (llvmpipe) subgroup where the
// device has subgroup shuffles and a single subgroup size (min_subgroup_size == max_subgroup_size ==
// subgroup_size: its workgroup is one subgroup) and the head dims are at most 128 (padded to the
// subgroup; below 16 query rows it packs a GQA group's query heads into one workgroup), else rowwise
// when seq_q >= 16 and tiled below. On GPUs: the subgroup kernel's decode form for decode (a GQA
// group's query rows up to 16) where its workgroup can be one subgroup (one size, or a pipeline
// that requires 32 lanes: required_subgroup_size), else tiled. Forcing one is for testing and
// benchmarking; all compute the same thing.
enum class KernelVariant {
  automatic,
  tiled,    // TPR invocations share a query row; K/V tiles in shared memory (GPUs)
  rowwise,  // one query row per invocation; uniform shared-memory reads (SIMD CPUs such as llvmpipe)
  subgroup,  // one subgroup per workgroup, several query rows per invocation, K/V shared by
             // subgroupShuffle (CPU devices: lavapipe); needs subgroup shuffles in compute shaders,
             // and one subgroup size or subgroup size control
};
const char* to_string(KernelVariant variant);
// Parses "auto" | "tiled" | "rowwise" | "subgroup"; throws Error otherwise.
KernelVariant parse_kernel_variant(const std::string& name);

// Called with each message of the Khronos validation layer (when enabled).
using ValidationCallback = std::function<void(const std::string& message)>;

// How a Context is set up: the same struct for a device vkattn creates (Context(options)) and for an
// application's device (Context::adopt(device, options)). `device`, `validation`,
// `synchronization_validation` and `on_validation_message` choose and set up the device and instance
// vkattn creates; they do not apply to an adopted device (the application chose the device and set
// up its own instance), and Context::adopt throws Error naming the field when one is set. `kernel`
// and `pipeline_cache_file` apply to both.
struct ContextOptions {
  // Index ("0") or case-insensitive name substring ("llvmpipe"). Empty: the VKATTN_DEVICE
  // environment variable, else the first discrete GPU, then integrated, then any, then CPU.
  // Not for an adopted device.
  std::string device;
  // Enable VK_LAYER_KHRONOS_validation and route its messages to `on_validation_message` (or stderr).
  // Not for an adopted device (enable the layer on the application's instance instead).
  bool validation = false;
  bool synchronization_validation = false;  // adds synchronization validation (implies validation)
  ValidationCallback on_validation_message;
  KernelVariant kernel = KernelVariant::automatic;
  // A pipeline cache file the application names (Context::save_pipeline_cache writes one). Read at
  // creation when it exists: a missing file means an empty cache; a file that is truncated, corrupt,
  // not written by save_pipeline_cache, or written for another device, driver or driver version (its
  // VkPipelineCacheHeaderVersionOne: vendorID, deviceID, pipelineCacheUUID) is ignored — never an
  // error, and never handed to the driver. Context::pipeline_cache_loaded() tells which happened.
  std::string pipeline_cache_file;
  // Every call recorded through this Context first checks its own barriers: two of its dispatches
  // that touch overlapping bytes of one buffer, one writing, with no barrier between them that
  // orders the two as Vulkan requires, throw Error("internal: a missing barrier ...") and record
  // nothing. Synchronization validation sees whole bindings, not the byte ranges vkattn's dispatches
  // use, and devices such as lavapipe give right answers without a barrier, so conformance runs
  // (`vkattn conform`) and vkattn's tests turn it on. Costs time on every record; off by default.
  // Applies to an adopted device too.
  bool check_barriers = false;
};

// Device memory vkattn allocated through one Context: Buffer::allocate, the scratch (workspace) of the
// synchronous calls (attention, time_attention, the multi-head layer) and the Context's own small
// buffers, counted in bytes of VkDeviceMemory (the driver's size, which may round a request up). Not
// counted: an application's buffers (Buffer::wrap), and the host-visible staging buffers that
// upload/download use for a moment when device memory is not mappable.
struct MemoryStats {
  uint64_t current_bytes = 0;  // allocated now
  uint64_t peak_bytes = 0;     // the most at any moment since creation or reset_peak_memory()
  uint64_t scratch_bytes = 0;  // of current_bytes: the scratch buffer kept for reuse between calls
  uint64_t allocations = 0;    // live allocations
};

// A device the application owns, lent to vkattn. vkattn never destroys these handles. The device
// must have been created with required_device_extensions() enabled and, for f16/bf16 tensors,
// VkPhysicalDeviceVulkan11Features::storageBuffer16BitAccess. `queue` must support compute and be
// used by vkattn's synchronous calls only from one thread at a time together with the application
// (vkattn serialises its own submissions per Context).
struct AdoptedDevice {
  VkInstance instance = VK_NULL_HANDLE;
  VkPhysicalDevice physical_device = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  uint32_t queue_family_index = 0;
  // Set to the features the application enabled; vkattn only uses what is marked here.
  bool storage_16bit_enabled = false;
  // subgroupSizeControl and computeFullSubgroups (Vulkan 1.3, or VK_EXT_subgroup_size_control)
  bool subgroup_size_control_enabled = false;
  // VkPhysicalDeviceFeatures::shaderInt64 (see DeviceInfo::shader_int64)
  bool shader_int64_enabled = false;
};

// A device and what vkattn keeps for it (queue, pipelines, scratch). Thread-safe: calls from several
// threads at once are serialised where they submit (see docs/embedding.md, "Threads"). After
// VK_ERROR_DEVICE_LOST every later call throws Error("... device was lost ..."). A moved-from Context
// holds no device: any use of it throws Error("... moved-from Context").
// A pipeline a Context built: host milliseconds in vkCreateComputePipelines (a GPU driver compiles
// the shader there; lavapipe translates it there and JIT-compiles it at its first dispatch).
struct PipelineBuild {
  // Its shader module and, where one kernel has several roles, the role, e.g.
  // "attention_subgroup_f16 (careful pass)", "attention_combine_f16".
  std::string pipeline;
  // Its number on the Context (0, 1, ... in build order): tells apart pipelines of the same label
  // (the same shader specialised differently); DispatchTime::pipeline_id.
  uint32_t pipeline_id = 0;
  double ms = 0;
};

class Context {
 public:
  explicit Context(const ContextOptions& options = {});
  // Uses the application's device without owning it, with `options.kernel` and
  // `options.pipeline_cache_file`; throws Error naming the field when `options` sets one that does
  // not apply to an adopted device (device, validation, synchronization_validation,
  // on_validation_message: see ContextOptions).
  static Context adopt(const AdoptedDevice& device, const ContextOptions& options = {});

  // Device extensions vkattn needs on an adopted device.
  static std::vector<const char*> required_device_extensions();
  // Minimum Vulkan API version vkattn needs.
  static constexpr uint32_t required_api_version = VK_API_VERSION_1_2;

  Context(Context&&) noexcept;
  Context& operator=(Context&&) noexcept;
  ~Context();

  const DeviceInfo& device_info() const;
  KernelVariant kernel_variant() const;
  VkDevice vk_device() const;
  VkPhysicalDevice vk_physical_device() const;
  VkQueue vk_queue() const;
  uint32_t queue_family_index() const;

  // Pipelines. vkattn builds each compute pipeline on first use, through one VkPipelineCache; on
  // some drivers that costs seconds per pipeline (lavapipe JIT-compiles at the first dispatch).
  //
  // Builds, and runs once on a tiny problem, the pipelines the default (fused) path uses for `dtype`
  // and each head dim in `head_dims` (dim_qk == dim_v): decode shapes (one query; one KV head for 1,
  // 2, 4 and 8 query heads: the decode kernels pack a GQA group into a workgroup) and a prefill shape
  // (64 queries), each once split (split-KV and its combine pass) and once in one piece, which
  // run different pipelines. Other sizes may still build a pipeline on first use. Waits for
  // completion; throws Error as attention() does (e.g. f16 without 16-bit storage).
  void prepare_pipelines(DType dtype, const std::vector<int64_t>& head_dims = {64, 128});
  // Writes the pipeline cache to `path` (a temporary file in the same directory, then renamed over
  // `path`, keeping an existing file's permission bits; a symlink is followed, so the link stays a
  // link); load it with ContextOptions::pipeline_cache_file. Throws Error naming the path, leaving
  // whatever is there unchanged, when `path` names something other than a regular file (a device, a
  // FIFO, a directory) or an existing file this process may not write or that has no write bit.
  void save_pipeline_cache(const std::string& path) const;
  // Whether this Context's pipeline cache started from the file named at creation.
  bool pipeline_cache_loaded() const;
  // What became of that file, e.g. "pipeline cache file 'x' is truncated or corrupt: ignored"; "" when
  // none was named.
  const std::string& pipeline_cache_note() const;
  // How many pipelines this Context has built so far.
  std::size_t pipeline_count() const;
  // The pipelines this Context has built, in build order, from the `first`-th on (pipeline_count()
  // taken before some work: the ones that work built), each with its host build time.
  std::vector<PipelineBuild> pipeline_builds(std::size_t first = 0) const;

  // Memory accounting (see MemoryStats). Benchmarks measure one call's peak with
  // release_scratch(); reset_peak_memory(); ...; memory_stats().peak_bytes.
  MemoryStats memory_stats() const;
  // Sets the peak to what is allocated now.
  void reset_peak_memory();
  // Frees the scratch buffer kept between calls (the next call that needs one allocates it again),
  // so a later peak includes that call's whole workspace. Waits for this Context's calls in flight.
  void release_scratch();

 private:
  friend detail::ContextImpl& detail::impl_of(const Context& context);
  friend const std::shared_ptr<detail::ContextImpl>& detail::shared_impl_of(const Context& context);
  // Throw Error on a moved-from Context, as every member function and every function taking a
  // Context does.
  detail::ContextImpl& impl() const;
  const std::shared_ptr<detail::ContextImpl>& shared_impl() const;
  explicit Context(std::shared_ptr<detail::ContextImpl> impl);
  std::shared_ptr<detail::ContextImpl> impl_;
};

}  // namespace vkattn
