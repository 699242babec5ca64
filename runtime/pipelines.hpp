// The pipeline registry: descriptor-set and pipeline layouts per kernel kind, and compute pipelines
// built lazily, keyed by a typed PipelineKey (shader, storage types, specialization constants by
// name), through one VkPipelineCache — which starts from the application's cache file when it names
// one (pipeline_cache.hpp). Shared by every plan of a Context; used when a call is planned, never
// when it is recorded.
#pragma once

#include <vulkan/vulkan.h>

#include <array>
#include <compare>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "shader_abi.h"
#include "vkattn/context.hpp"
#include "vkattn/problem.hpp"
#include "vkattn/types.hpp"

namespace vkattn::detail {

enum class KernelKind {
  attention, combine, gemm, softmax, kv_append, work_list, backward, backward_reduce, merge_gather, cascade_lengths, cascade_merge,
  gemm_texel  // the GEMM's bindings and A's and B's texel buffers (GEMM_A_TEXEL_BINDING, GEMM_B_TEXEL_BINDING)
};

// The shader a pipeline runs (one SPIR-V module per shader and storage types). A new shader is a
// value here and its row in kShaderRows, in the same order.
enum class Shader : uint8_t {
  attention_tiled,
  attention_rowwise,
  attention_combine,
  attention_softmax,
  gemm,
  attention_subgroup,
  attention_subgroup_decode,
  gemm_subgroup,
  kv_append,
  attention_work_list,
  attention_backward_rows,
  attention_backward_kv,
  attention_backward_q,
  attention_backward_reduce,
  attention_backward_kv_subgroup,
  attention_backward_q_subgroup,
  attention_dropout_output,
  attention_backward_kv_tiled,
  attention_backward_q_tiled,
  attention_backward_scores,
  merge_states_gather,
  cascade_lengths,
  cascade_merge,
  gemm_subgroup_texel
};

// How a shader's modules are named and laid out: `name` then, for each of its first `types_named`
// storage types (PipelineKey::types), "_" and the type, e.g. "attention_rowwise_f16",
// "gemm_f16_f16_f32" (module_name; the tiled kernel's build without subgroup operations adds
// "_noshuffle"), and its pipeline layout's kind.
struct ShaderRow {
  Shader shader;
  const char* name;
  int types_named;
  KernelKind kind;
};
inline constexpr ShaderRow kShaderRows[] = {
    {Shader::attention_tiled, "attention_tiled", 1, KernelKind::attention},
    {Shader::attention_rowwise, "attention_rowwise", 1, KernelKind::attention},
    {Shader::attention_combine, "attention_combine", 1, KernelKind::combine},
    {Shader::attention_softmax, "attention_softmax", 0, KernelKind::softmax},
    {Shader::gemm, "gemm", 3, KernelKind::gemm},
    {Shader::attention_subgroup, "attention_subgroup", 1, KernelKind::attention},
    {Shader::attention_subgroup_decode, "attention_subgroup_decode", 1, KernelKind::attention},
    {Shader::gemm_subgroup, "gemm_subgroup", 3, KernelKind::gemm},
    {Shader::kv_append, "kv_append", 1, KernelKind::kv_append},
    {Shader::attention_work_list, "attention_work_list", 0, KernelKind::work_list},
    {Shader::attention_backward_rows, "attention_backward_rows", 1, KernelKind::backward},
    {Shader::attention_backward_kv, "attention_backward_kv", 1, KernelKind::backward},
    {Shader::attention_backward_q, "attention_backward_q", 1, KernelKind::backward},
    {Shader::attention_backward_reduce, "attention_backward_reduce", 1, KernelKind::backward_reduce},
    {Shader::attention_backward_kv_subgroup, "attention_backward_kv_subgroup", 1, KernelKind::backward},
    {Shader::attention_backward_q_subgroup, "attention_backward_q_subgroup", 1, KernelKind::backward},
    {Shader::attention_dropout_output, "attention_dropout_output", 1, KernelKind::backward},
    {Shader::attention_backward_kv_tiled, "attention_backward_kv_tiled", 1, KernelKind::backward},
    {Shader::attention_backward_q_tiled, "attention_backward_q_tiled", 1, KernelKind::backward},
    {Shader::attention_backward_scores, "attention_backward_scores", 1, KernelKind::backward},
    {Shader::merge_states_gather, "merge_states_gather", 1, KernelKind::merge_gather},
    {Shader::cascade_lengths, "cascade_lengths", 0, KernelKind::cascade_lengths},
    {Shader::cascade_merge, "cascade_merge", 1, KernelKind::cascade_merge},
    {Shader::gemm_subgroup_texel, "gemm_subgroup_texel", 3, KernelKind::gemm_texel},
};
// The table's rows are in the enum's order, one per value.
inline constexpr bool shader_rows_in_order() {
  for (std::size_t i = 0; i < std::size(kShaderRows); ++i)
    if (static_cast<std::size_t>(kShaderRows[i].shader) != i) return false;
  return static_cast<std::size_t>(Shader::gemm_subgroup_texel) + 1 == std::size(kShaderRows);
}
static_assert(shader_rows_in_order(), "kShaderRows: one row per Shader, in the enum's order");

inline constexpr std::size_t kMaxSpecConstants = 22;

// A compute pipeline: its shader, the storage types its module is compiled for (the attention
// kernels and the combine: types[0]; the GEMM: A, B, C; the softmax: none) and its specialization
// constants, indexed by the ids of shaders/shader_abi.h. Made by the named constructors below.
struct PipelineKey {
  Shader shader = Shader::attention_tiled;
  std::array<DType, 3> types{};
  std::array<uint32_t, kMaxSpecConstants> spec{};
  uint32_t spec_count = 0;
  // The subgroup size the pipeline requires (VK_EXT_subgroup_size_control, with full subgroups);
  // 0: none, the driver picks.
  uint32_t required_subgroup_size = 0;
  auto operator<=>(const PipelineKey&) const = default;
};

// The score modifiers' block of specialization constants (shader_abi.h, MOD_SPEC_BLOCK), the same for
// the fused kernels and the row softmax: the MOD_* bits first, then each modifier's constant at its
// MOD_SPEC_*_OFFSET, as 32 bits (modifier_constants). Written whole at a kernel's SPEC_*_MODIFIERS
// (write_modifier_constants), so a new modifier's constant needs no change here.
struct ModifierConstants {
  std::array<uint32_t, MOD_SPEC_BLOCK> block = unset();
  uint32_t& bits() { return block[0]; }
  uint32_t bits() const { return block[0]; }
  uint32_t& at(uint32_t offset) { return block[offset]; }
  uint32_t at(uint32_t offset) const { return block[offset]; }

 private:
  // No bits; window sides unbounded (0xffffffff, window_side_constant); every other constant 0.
  static constexpr std::array<uint32_t, MOD_SPEC_BLOCK> unset() {
    std::array<uint32_t, MOD_SPEC_BLOCK> b{};
    b[MOD_SPEC_WINDOW_LEFT_OFFSET] = b[MOD_SPEC_WINDOW_RIGHT_OFFSET] = 0xffffffffu;
    return b;
  }
};

// The constants of the fused kernels by name (SPEC_ATTENTION_*).
struct AttentionConstants {
  uint32_t rows = 0, threads_per_row = 0, keys_per_tile = 0, dim_qk = 0, dim_v = 0, workgroup = 0;
  uint32_t mask_kind = 0;  // the subgroup kernel's MASK_* (its code for the other kinds is left out); else 0
  uint32_t pack_group = 0;  // the subgroup kernel: 1 = rows are a GQA group's heads x query rows; else 0
  uint32_t rows_per_thread = 1, heads = 1;  // the tiled kernel's RPT and query heads per workgroup; else 1
  uint32_t vec_loads = 0;  // the subgroup kernels: 1 = rows read (decode form: and written) in 16-byte chunks; else 0
  uint32_t page_size = 0;  // K and V: 0 dense tensors, else a paged cache of pages of this many tokens
  ModifierConstants modifiers;
  uint32_t kv_format = 0;  // KV_FORMAT_* (shader_abi.h): K and V as the call's dtype (0) or q8_0 blocks
  uint32_t varlen = 0;  // 1: a packed variable-length batch (shader_abi.h); else 0
  uint32_t page_stride = 0;  // paged: a page's stride in key rows (SPEC_ATTENTION_PAGE_STRIDE); else 0
  uint32_t required_lanes = 0;  // the subgroup kernels on a device that can require it: their lanes; else 0
  uint32_t prefetch_keys = 0;  // the decode form: keys ahead whose K and V rows it touches (SPEC_ATTENTION_PREFETCH); else 0
  uint32_t careful_pass = 0;  // the subgroup kernel: 0 its fast pass, 1 its careful pass (SPEC_ATTENTION_CAREFUL_PASS); else 0
  uint32_t partial = 0;  // 1: a split call's kernel, writing the partials (SPEC_ATTENTION_PARTIAL); 0: O and LSE
};
// The GEMM's (SPEC_GEMM_*).
struct GemmConstants {
  uint32_t bm = 0, bn = 0, bk = 0, tm = 0, tn = 0, workgroup = 0;
};
// The CPU devices' GEMM's (SPEC_GEMM_SG_*).
struct GemmSubgroupConstants {
  uint32_t rows = 0, cols = 0, flags = 0, lanes = 0;  // flags: the call's GEMM_FLAG_* bits
  uint32_t vec = 0;  // GEMM_SG_VEC_* bits
  uint32_t texel = 0;  // GEMM_SG_TEXEL_* bits: the operands read through texel buffers (non-zero: gemm_subgroup_texel)
};

// `shader`: attention_tiled, attention_rowwise, attention_subgroup or attention_subgroup_decode.
PipelineKey attention_pipeline(DType dtype, Shader shader, const AttentionConstants& constants);
// `modifiers`: the call's modifier constants (combine_modifiers takes what the combine applies).
PipelineKey combine_pipeline(DType dtype, uint32_t dim_v, uint32_t workgroup, const ModifierConstants& modifiers);
// `quads`: the build by quads (attention_softmax_quads; needs shaderInt64).
PipelineKey softmax_pipeline(uint32_t workgroup, const ModifierConstants& modifiers, bool quads);
// The append of new tokens to a paged KV cache (kv_append.comp): new rows of storage type `dtype`,
// caches of KV_FORMAT_* `kv_format` (shader_abi.h).
PipelineKey kv_append_pipeline(DType dtype, uint32_t kv_format);
// A paged call's work list (attention_work_list.comp).
PipelineKey work_list_pipeline();
// The score modifiers of a checked problem as specialization constants (shaders/modifiers.glsl).
ModifierConstants modifier_constants(const AttentionProblem& p, const AttentionOptions& options);
// A split call's parts: the constants without the modifiers that end a row (MOD_ENDS_ROW), which the
// combine applies once.
ModifierConstants split_part_modifiers(ModifierConstants whole);
uint32_t window_side_constant(int64_t side, const AttentionProblem& p);
PipelineKey gemm_pipeline(DType a, DType b, DType c, const GemmConstants& constants);
// The backward pass's kernels (SPEC_BACKWARD_*): `shader` attention_backward_rows, _kv, _q or their subgroup or tiled forms.
struct BackwardConstants {
  uint32_t dim_qk = 0, dim_v = 0, workgroup = 0;
  ModifierConstants modifiers;
  uint32_t varlen = 0, partial = 0;
  uint32_t dropout_threshold = 0;  // 0: no dropout
  uint32_t sinks_pass = 0;         // the rows kernel: 1 = its dsinks pass
  uint32_t rows = 1;               // the subgroup forms: keys or query rows per lane
  uint32_t required_lanes = 0;     // the subgroup forms on a device that can require it: their lanes
  uint32_t tile_rows = 0, tile_keys = 0;  // the tiled forms: BR and BC (backward_tiles.hpp); 0 for the others
};
PipelineKey backward_pipeline(DType dtype, Shader shader, const BackwardConstants& constants);
PipelineKey backward_reduce_pipeline(DType dtype, uint32_t workgroup);
// Merging attention states' gather (merge_states_gather.comp) of parts in storage type `dtype`.
PipelineKey merge_gather_pipeline(DType dtype, uint32_t workgroup);
// Cascade attention's pass lengths (no storage type) and merge (the call's storage type).
PipelineKey cascade_lengths_pipeline();
PipelineKey cascade_merge_pipeline(DType dtype);
PipelineKey gemm_subgroup_pipeline(DType a, DType b, DType c, const GemmSubgroupConstants& constants);

// The embedded SPIR-V module `key` runs, e.g. "attention_tiled_f16", "gemm_f16_f16_f32",
// "gemm_subgroup_f32_f16_f16".
std::string module_name(const PipelineKey& key);
KernelKind kernel_kind(Shader shader);
// module_name and, where one kernel has several roles, the role: "attention_subgroup_f16 (careful pass)",
// "gemm_subgroup_texel_f32_f16_f16 (A and B by texels)".
std::string pipeline_label(const PipelineKey& key);

struct KernelLayout {
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;  // push-descriptor set
  VkPipelineLayout pipeline_layout = VK_NULL_HANDLE;
  // Pushes all `bindings` storage-buffer descriptors of the set from a DescriptorData (command_list.hpp; binding i at
  // buffers[i]; a texel layout's texel buffers, bindings `bindings` + i, from texel[i]) in one call:
  // what replay records per dispatch.
  VkDescriptorUpdateTemplate push_template = VK_NULL_HANDLE;
  uint32_t bindings = 0;  // storage buffers (a texel layout's texel buffers come after them)
  // Bit i: the kernel's shaders read / write binding i (a buffer not declared readonly / one not
  // declared writeonly; some are both): what CommandList::hazards checks the barriers against.
  uint32_t reads = 0, writes = 0;
};

class PipelineRegistry {
 public:
  // `cache_file`: the application's pipeline cache file, "" for none. A missing, damaged or foreign
  // file is ignored (the cache starts empty); see cache_note().
  // `preserve_nan`: every module gets the SignedZeroInfNanPreserve mode (spirv_float_controls.hpp);
  // only for devices that report shaderSignedZeroInfNanPreserveFloat32.
  PipelineRegistry(VkPhysicalDevice physical_device, VkDevice device, const std::string& cache_file = {},
                   bool preserve_nan = false);
  PipelineRegistry(const PipelineRegistry&) = delete;
  PipelineRegistry& operator=(const PipelineRegistry&) = delete;
  ~PipelineRegistry();

  const KernelLayout& layout(KernelKind kind) const { return layouts_[static_cast<int>(kind)]; }
  // The pipeline of `key`, built on first use; thread-safe.
  VkPipeline get(const PipelineKey& key);

  // The VkPipelineCache's contents (vkGetPipelineCacheData), for saving; thread-safe.
  std::vector<uint8_t> cache_data();
  // Whether the cache started from the application's file, and what became of that file.
  bool cache_loaded() const { return cache_loaded_; }
  const std::string& cache_note() const { return cache_note_; }
  // What `pipeline` runs, for reports (DispatchProfile): its module and role (pipeline_label), and
  // its number in build order; "unknown pipeline" and UINT32_MAX for one this registry did not build.
  // Thread-safe.
  std::pair<std::string, uint32_t> label(VkPipeline pipeline);
  // The pipelines built after the first `first`, in build order, with the host milliseconds
  // vkCreateComputePipelines took (Context::pipeline_builds, DispatchProfile::builds). Thread-safe.
  std::vector<PipelineBuild> builds_since(std::size_t first);
  // How many pipelines have been built (for tests and tools).
  std::size_t pipeline_count();

 private:
  void release();
  VkShaderModule shader_module(const std::string& name);

  VkDevice device_;
  bool preserve_nan_;
  VkPipelineCache cache_ = VK_NULL_HANDLE;
  bool cache_loaded_ = false;
  std::string cache_note_;
  KernelLayout layouts_[12];  // one per KernelKind
  std::mutex mutex_;
  std::map<std::string, VkShaderModule> modules_;
  std::map<PipelineKey, VkPipeline> pipelines_;
  // Every pipeline built, in build order: its entry of pipelines_ (a std::map's entries stay where
  // they are) and the host ms; and each pipeline's place in that order, for label().
  struct Built {
    std::map<PipelineKey, VkPipeline>::const_iterator entry;
    double ms;
  };
  std::vector<Built> builds_;
  std::unordered_map<VkPipeline, uint32_t> build_number_;
};

}  // namespace vkattn::detail
