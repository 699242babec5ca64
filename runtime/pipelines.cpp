#include "pipelines.hpp"

#include <bit>
#include <chrono>
#include <cstddef>
#include <span>
#include <string_view>

#include "command_list.hpp"
#include "per_head_bindings.hpp"
#include "pipeline_cache.hpp"
#include "shader_abi.hpp"
#include "spirv_float_controls.hpp"
#include "vk_check.hpp"
#include "vkattn/error.hpp"

namespace vkattn::detail {

std::span<const uint32_t> find_spirv(std::string_view name);  // generated: spirv_table.cpp

namespace {

// A layout of `bindings` storage buffers; the shaders only write those in `write_only`, read and write
// those in `read_write`, and only read the others.
// `texels`: uniform texel buffers after the storage buffers, binding `bindings` + i read from
// DescriptorData::texel[i].
KernelLayout make_layout(VkDevice device, uint32_t bindings, uint32_t push_bytes, uint32_t write_only, uint32_t read_write,
                         uint32_t texels = 0) {
  if (texels > kMaxTexelBindings) throw Error("internal: " + std::to_string(texels) + " texel bindings");
  const uint32_t all = bindings + texels;
  std::vector<VkDescriptorSetLayoutBinding> b(all);
  for (uint32_t i = 0; i < bindings; ++i)
    b[i] = {i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
  for (uint32_t i = bindings; i < all; ++i)
    b[i] = {i, VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
  VkDescriptorSetLayoutCreateInfo set_info{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  // Push descriptors: recording into the caller's command buffer needs no descriptor pool whose
  // lifetime would have to outlast the caller's submission.
  set_info.flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR;
  set_info.bindingCount = all;
  set_info.pBindings = b.data();
  KernelLayout layout;
  layout.bindings = bindings;
  layout.writes = write_only | read_write;
  layout.reads = ((1u << bindings) - 1u) & ~write_only;
  VK_TRY(vkCreateDescriptorSetLayout(device, &set_info, nullptr, &layout.set_layout));
  VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes};
  VkPipelineLayoutCreateInfo info{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  info.setLayoutCount = 1;
  info.pSetLayouts = &layout.set_layout;
  info.pushConstantRangeCount = 1;
  info.pPushConstantRanges = &range;
  VkResult r = vkCreatePipelineLayout(device, &info, nullptr, &layout.pipeline_layout);
  if (r != VK_SUCCESS) {
    vkDestroyDescriptorSetLayout(device, layout.set_layout, nullptr);
    throw_vk_error("vkCreatePipelineLayout", r);
  }
  std::vector<VkDescriptorUpdateTemplateEntry> entries(all);
  for (uint32_t i = 0; i < bindings; ++i)
    entries[i] = {i, 0, 1, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, offsetof(DescriptorData, buffers) + i * sizeof(VkDescriptorBufferInfo),
                  sizeof(VkDescriptorBufferInfo)};
  for (uint32_t i = 0; i < texels; ++i)
    entries[bindings + i] = {bindings + i, 0, 1, VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER,
                             offsetof(DescriptorData, texel) + i * sizeof(VkBufferView), sizeof(VkBufferView)};
  VkDescriptorUpdateTemplateCreateInfo template_info{VK_STRUCTURE_TYPE_DESCRIPTOR_UPDATE_TEMPLATE_CREATE_INFO};
  template_info.descriptorUpdateEntryCount = all;
  template_info.pDescriptorUpdateEntries = entries.data();
  template_info.templateType = VK_DESCRIPTOR_UPDATE_TEMPLATE_TYPE_PUSH_DESCRIPTORS_KHR;
  template_info.descriptorSetLayout = layout.set_layout;
  template_info.pipelineBindPoint = VK_PIPELINE_BIND_POINT_COMPUTE;
  template_info.pipelineLayout = layout.pipeline_layout;
  template_info.set = 0;
  r = vkCreateDescriptorUpdateTemplate(device, &template_info, nullptr, &layout.push_template);
  if (r != VK_SUCCESS) {
    vkDestroyPipelineLayout(device, layout.pipeline_layout, nullptr);
    vkDestroyDescriptorSetLayout(device, layout.set_layout, nullptr);
    throw_vk_error("vkCreateDescriptorUpdateTemplate", r);
  }
  return layout;
}

// The modifiers' block (shader_abi.h, MOD_SPEC_BLOCK) at the kernel's `base` id, the same for every
// kernel that forms scores.
void write_modifier_constants(PipelineKey& key, uint32_t base, const ModifierConstants& m) {
  for (uint32_t i = 0; i < MOD_SPEC_BLOCK; ++i) key.spec[base + i] = m.block[i];
}
static_assert(SPEC_ATTENTION_MODIFIERS + MOD_SPEC_BLOCK == SPEC_ATTENTION_PAGE_SIZE &&
                  SPEC_SOFTMAX_MODIFIERS + MOD_SPEC_BLOCK == SPEC_SOFTMAX_QUADS,
              "the modifiers' block of constants must not overlap the next ids");

}  // namespace

PipelineKey attention_pipeline(DType dtype, Shader shader, const AttentionConstants& c) {
  PipelineKey key;
  key.shader = shader;
  key.types[0] = dtype;
  key.spec_count = SPEC_ATTENTION_COUNT;
  key.spec[SPEC_ATTENTION_BR] = c.rows;
  key.spec[SPEC_ATTENTION_TPR] = c.threads_per_row;
  key.spec[SPEC_ATTENTION_BC] = c.keys_per_tile;
  key.spec[SPEC_ATTENTION_DQK] = c.dim_qk;
  key.spec[SPEC_ATTENTION_DV] = c.dim_v;
  key.spec[SPEC_ATTENTION_WORKGROUP] = c.workgroup;
  key.spec[SPEC_ATTENTION_MASK_KIND] = c.mask_kind;
  key.spec[SPEC_ATTENTION_PACK_GROUP] = c.pack_group;
  key.spec[SPEC_ATTENTION_RPT] = c.rows_per_thread;
  key.spec[SPEC_ATTENTION_HEADS] = c.heads;
  key.spec[SPEC_ATTENTION_VEC] = c.vec_loads;
  write_modifier_constants(key, SPEC_ATTENTION_MODIFIERS, c.modifiers);
  key.spec[SPEC_ATTENTION_PAGE_SIZE] = c.page_size;
  key.spec[SPEC_ATTENTION_VARLEN] = c.varlen;
  key.spec[SPEC_ATTENTION_KV_FORMAT] = c.kv_format;
  key.spec[SPEC_ATTENTION_PAGE_STRIDE] = c.page_stride;
  key.spec[SPEC_ATTENTION_PREFETCH] = c.prefetch_keys;
  key.spec[SPEC_ATTENTION_CAREFUL_PASS] = c.careful_pass;
  key.spec[SPEC_ATTENTION_PARTIAL] = c.partial;
  key.required_subgroup_size = c.required_lanes;
  return key;
}

PipelineKey combine_pipeline(DType dtype, uint32_t dim_v, uint32_t workgroup, const ModifierConstants& modifiers) {
  PipelineKey key;
  key.shader = Shader::attention_combine;
  key.types[0] = dtype;
  key.spec_count = SPEC_COMBINE_COUNT;
  key.spec[SPEC_COMBINE_DV] = dim_v;
  key.spec[SPEC_COMBINE_WORKGROUP] = workgroup;
  key.spec[SPEC_COMBINE_MODIFIERS] = modifiers.bits() & MOD_ENDS_ROW;
  return key;
}

PipelineKey kv_append_pipeline(DType dtype, uint32_t kv_format) {
  PipelineKey key;
  key.shader = Shader::kv_append;
  key.types[0] = dtype;
  key.spec_count = SPEC_KV_APPEND_COUNT;
  key.spec[SPEC_KV_APPEND_FORMAT] = kv_format;
  return key;
}

PipelineKey work_list_pipeline() {
  PipelineKey key;
  key.shader = Shader::attention_work_list;
  return key;
}

PipelineKey softmax_pipeline(uint32_t workgroup, const ModifierConstants& modifiers, bool quads) {
  PipelineKey key;
  key.shader = Shader::attention_softmax;
  key.spec_count = SPEC_SOFTMAX_COUNT;
  key.spec[SPEC_SOFTMAX_WORKGROUP] = workgroup;
  key.spec[SPEC_SOFTMAX_QUADS] = quads ? 1 : 0;
  write_modifier_constants(key, SPEC_SOFTMAX_MODIFIERS, modifiers);
  return key;
}

// A window side as its 32-bit constant (shaders/modifiers.glsl): unbounded for -1 and for any side of
// at least seq_q + seq_k, which bounds nothing (the diagonal i + off of every row lies in (-seq_q,
// seq_k), so such a side reaches past key 0 and key seq_k - 1 alike): the same answer and the same
// pipeline as -1, for sides up to 2^63 - 1. p is the call's checked problem, whose seq_q and seq_k
// bound every sequence's (a paged call's seq_k is its capacity, a packed call's the totals); both are
// below 2^31 (check_attention_layouts), so a bounded side is below 2^32 - 2.
uint32_t window_side_constant(int64_t side, const AttentionProblem& p) {
  constexpr uint32_t kUnbounded = 0xffffffffu;
  if (side < 0 || side >= p.seq_q + p.seq_k) return kUnbounded;
  return static_cast<uint32_t>(side);
}

ModifierConstants modifier_constants(const AttentionProblem& p, const AttentionOptions& options) {
  ModifierConstants m;
  if (options.softcap) {  // checked with the call: finite, normal and > 0
    m.bits() |= MOD_SOFTCAP;
    m.at(MOD_SPEC_SOFTCAP_OFFSET) = std::bit_cast<uint32_t>(*options.softcap);
  }
  for (PerHeadTensor t : kPerHeadTensors)
    if (p.per_head[t]) m.bits() |= per_head_modifier_bit(t);
  if (p.alibi_per_batch) m.bits() |= MOD_ALIBI_PER_BATCH;
  // The window as given (causal stays in the flags, so a causal call keeps its pipelines); the
  // alignment only where a window or ALiBi reads it.
  if (options.window) {
    m.at(MOD_SPEC_WINDOW_LEFT_OFFSET) = window_side_constant(options.window->left, p);
    m.at(MOD_SPEC_WINDOW_RIGHT_OFFSET) = window_side_constant(options.window->right, p);
  }
  if ((options.window || p.per_head.alibi) && p.align == Align::top_left) m.bits() |= MOD_ALIGN_TOP_LEFT;
  return m;
}

ModifierConstants split_part_modifiers(ModifierConstants whole) {
  whole.bits() &= ~MOD_ENDS_ROW;
  return whole;
}

PipelineKey gemm_pipeline(DType a, DType b, DType c, const GemmConstants& g) {
  PipelineKey key;
  key.shader = Shader::gemm;
  key.types = {a, b, c};
  key.spec_count = SPEC_GEMM_COUNT;
  key.spec[SPEC_GEMM_BM] = g.bm;
  key.spec[SPEC_GEMM_BN] = g.bn;
  key.spec[SPEC_GEMM_BK] = g.bk;
  key.spec[SPEC_GEMM_TM] = g.tm;
  key.spec[SPEC_GEMM_TN] = g.tn;
  key.spec[SPEC_GEMM_WORKGROUP] = g.workgroup;
  return key;
}

PipelineKey backward_pipeline(DType dtype, Shader shader, const BackwardConstants& c) {
  PipelineKey key;
  key.shader = shader;
  key.types[0] = dtype;
  key.spec_count = SPEC_BACKWARD_COUNT;
  key.spec[SPEC_BACKWARD_DQK] = c.dim_qk;
  key.spec[SPEC_BACKWARD_DV] = c.dim_v;
  key.spec[SPEC_BACKWARD_WORKGROUP] = c.workgroup;
  write_modifier_constants(key, SPEC_BACKWARD_MODIFIERS, c.modifiers);
  key.spec[SPEC_BACKWARD_VARLEN] = c.varlen;
  key.spec[SPEC_BACKWARD_PARTIAL] = c.partial;
  key.spec[SPEC_BACKWARD_DROPOUT] = c.dropout_threshold;
  key.spec[SPEC_BACKWARD_SINKS_PASS] = c.sinks_pass;
  key.spec[SPEC_BACKWARD_ROWS] = c.rows;
  key.spec[SPEC_BACKWARD_TILE_ROWS] = c.tile_rows;
  key.spec[SPEC_BACKWARD_TILE_KEYS] = c.tile_keys;
  key.required_subgroup_size = c.required_lanes;
  return key;
}

PipelineKey backward_reduce_pipeline(DType dtype, uint32_t workgroup) {
  PipelineKey key;
  key.shader = Shader::attention_backward_reduce;
  key.types[0] = dtype;
  key.spec_count = SPEC_REDUCE_COUNT;
  key.spec[SPEC_REDUCE_WORKGROUP] = workgroup;
  return key;
}

PipelineKey merge_gather_pipeline(DType dtype, uint32_t workgroup) {
  PipelineKey key;
  key.shader = Shader::merge_states_gather;
  key.types[0] = dtype;
  key.spec_count = SPEC_MERGE_COUNT;
  key.spec[SPEC_MERGE_WORKGROUP] = workgroup;
  return key;
}

PipelineKey cascade_lengths_pipeline() {
  PipelineKey key;
  key.shader = Shader::cascade_lengths;
  return key;
}

PipelineKey cascade_merge_pipeline(DType dtype) {
  PipelineKey key;
  key.shader = Shader::cascade_merge;
  key.types[0] = dtype;
  return key;
}

PipelineKey gemm_subgroup_pipeline(DType a, DType b, DType c, const GemmSubgroupConstants& g) {
  PipelineKey key;
  key.shader = g.texel != 0 ? Shader::gemm_subgroup_texel : Shader::gemm_subgroup;
  key.types = {a, b, c};
  key.spec_count = SPEC_GEMM_SG_COUNT;
  key.spec[SPEC_GEMM_SG_ROWS] = g.rows;
  key.spec[SPEC_GEMM_SG_COLS] = g.cols;
  key.spec[SPEC_GEMM_SG_FLAGS] = g.flags;
  key.spec[SPEC_GEMM_SG_WORKGROUP] = g.lanes;
  key.spec[SPEC_GEMM_SG_VEC] = g.vec;
  key.spec[SPEC_GEMM_SG_TEXEL] = g.texel;
  return key;
}

std::string module_name(const PipelineKey& key) {
  const auto index = static_cast<std::size_t>(key.shader);
  if (index >= std::size(kShaderRows)) throw Error("internal: unknown shader " + std::to_string(index));
  const ShaderRow& row = kShaderRows[index];
  std::string name = row.name;
  // The tiled kernel with one lane per row group is the build without subgroup operations.
  if (key.shader == Shader::attention_tiled && key.spec[SPEC_ATTENTION_TPR] == 1) name += "_noshuffle";
  // The softmax by quads is its own build (SOFTMAX_QUADS: 64-bit words, which need shaderInt64).
  if (key.shader == Shader::attention_softmax && key.spec[SPEC_SOFTMAX_QUADS] == 1) name += "_quads";
  for (int t = 0; t < row.types_named; ++t) name += std::string("_") + to_string(key.types[static_cast<std::size_t>(t)]);
  return name;
}

std::string pipeline_label(const PipelineKey& key) {
  std::string label = module_name(key);
  if (key.shader == Shader::attention_subgroup)
    label += key.spec[SPEC_ATTENTION_CAREFUL_PASS] ? " (careful pass)" : " (fast pass)";
  if (key.shader == Shader::gemm_subgroup_texel) {
    const uint32_t texel = key.spec[SPEC_GEMM_SG_TEXEL];
    label += texel == (GEMM_SG_TEXEL_A | GEMM_SG_TEXEL_B) ? " (A and B by texels)" : texel == GEMM_SG_TEXEL_A ? " (A by texels)" : " (B by texels)";
  }
  return label;
}

KernelKind kernel_kind(Shader shader) {
  const auto index = static_cast<std::size_t>(shader);
  if (index >= std::size(kShaderRows)) throw Error("internal: unknown shader " + std::to_string(index));
  return kShaderRows[index].kind;
}

PipelineRegistry::PipelineRegistry(VkPhysicalDevice physical_device, VkDevice device, const std::string& cache_file,
                                   bool preserve_nan)
    : device_(device), preserve_nan_(preserve_nan) {
  std::vector<uint8_t> initial;
  if (!cache_file.empty()) {
    VkPhysicalDeviceProperties properties;
    vkGetPhysicalDeviceProperties(physical_device, &properties);
    initial = read_pipeline_cache_file(cache_file, properties, cache_note_);
  }
  VkPipelineCacheCreateInfo cache_info{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  cache_info.initialDataSize = initial.size();
  cache_info.pInitialData = initial.empty() ? nullptr : initial.data();
  VkResult r = vkCreatePipelineCache(device_, &cache_info, nullptr, &cache_);
  if (r != VK_SUCCESS && !initial.empty() && r != VK_ERROR_OUT_OF_HOST_MEMORY && r != VK_ERROR_OUT_OF_DEVICE_MEMORY) {
    // The driver refused data that passed every check of ours: start empty rather than fail.
    cache_note_ += "; the driver refused it (" + std::string(vk_result_name(r)) + "): starting empty";
    initial.clear();
    cache_info.initialDataSize = 0;
    cache_info.pInitialData = nullptr;
    r = vkCreatePipelineCache(device_, &cache_info, nullptr, &cache_);
  }
  if (r != VK_SUCCESS) throw_vk_error("vkCreatePipelineCache", r);
  cache_loaded_ = !initial.empty();
  try {
    // Which bindings each kind's shaders only write and which they read and write (the others they
    // only read), as shaders/*.comp declare them: O, LSE and the partials writeonly, the careful
    // pass's ballots read and written (attention_common.glsl, attention_subgroup.comp); the combine's
    // O and LSE; the GEMM's C; the softmax's LSE, and its P read and written; the append's caches (as
    // words, read and written, for q8_0); the work list (read and written).
    const auto bits = [](std::initializer_list<uint32_t> list) {
      uint32_t m = 0;
      for (const uint32_t b : list) m |= 1u << b;
      return m;
    };
    static_assert(ATTENTION_BINDINGS <= kMaxBindings && COMBINE_BINDINGS <= kMaxBindings && SOFTMAX_BINDINGS <= kMaxBindings &&
                  GEMM_BINDINGS <= kMaxBindings && KV_APPEND_BINDINGS <= kMaxBindings && WORK_LIST_BINDINGS <= kMaxBindings &&
                  BACKWARD_BINDINGS <= kMaxBindings && REDUCE_BINDINGS <= kMaxBindings && MERGE_BINDINGS <= kMaxBindings &&
                  CASCADE_LENGTHS_BINDINGS <= kMaxBindings && CASCADE_MERGE_BINDINGS <= kMaxBindings);
    layouts_[static_cast<int>(KernelKind::attention)] = make_layout(
        device_, ATTENTION_BINDINGS, sizeof(AttentionPush),
        bits({ATTENTION_O_BINDING, ATTENTION_LSE_BINDING, ATTENTION_PARTIAL_O_BINDING, ATTENTION_PARTIAL_LSE_BINDING}),
        bits({ATTENTION_REDO_BINDING}));
    layouts_[static_cast<int>(KernelKind::combine)] =
        make_layout(device_, COMBINE_BINDINGS, sizeof(CombinePush), bits({COMBINE_O_BINDING, COMBINE_LSE_BINDING}), 0);
    layouts_[static_cast<int>(KernelKind::gemm)] = make_layout(device_, GEMM_BINDINGS, sizeof(GemmPush), bits({GEMM_C_BINDING}), 0);
    static_assert(GEMM_A_TEXEL_BINDING == GEMM_BINDINGS && GEMM_B_TEXEL_BINDING == GEMM_BINDINGS + 1 && GEMM_TEXEL_BINDINGS == 2,
                  "make_layout puts the texel buffers after the storage buffers, in order");
    layouts_[static_cast<int>(KernelKind::gemm_texel)] =
        make_layout(device_, GEMM_BINDINGS, sizeof(GemmPush), bits({GEMM_C_BINDING}), 0, GEMM_TEXEL_BINDINGS);
    layouts_[static_cast<int>(KernelKind::softmax)] = make_layout(
        device_, SOFTMAX_BINDINGS, sizeof(SoftmaxPush), bits({SOFTMAX_LSE_BINDING}), bits({SOFTMAX_SCORES_BINDING}));
    layouts_[static_cast<int>(KernelKind::kv_append)] = make_layout(
        device_, KV_APPEND_BINDINGS, sizeof(KvAppendPush), 0, bits({KV_APPEND_K_CACHE_BINDING, KV_APPEND_V_CACHE_BINDING}));
    layouts_[static_cast<int>(KernelKind::work_list)] =
        make_layout(device_, WORK_LIST_BINDINGS, sizeof(WorkListPush), 0, bits({WORK_LIST_WORDS_BINDING}));
    // The backward kernels: the gradients written; the rows workspace (D) written by the rows kernel
    // and read by the others, hence read and written for the kind.
    layouts_[static_cast<int>(KernelKind::backward)] =
        make_layout(device_, BACKWARD_BINDINGS, sizeof(BackwardPush),
                    bits({BACKWARD_GRAD_A_BINDING, BACKWARD_GRAD_B_BINDING}), bits({BACKWARD_ROWS_BINDING}));
    layouts_[static_cast<int>(KernelKind::backward_reduce)] =
        make_layout(device_, REDUCE_BINDINGS, sizeof(ReducePush), bits({REDUCE_OUT_BINDING}), 0);
    layouts_[static_cast<int>(KernelKind::merge_gather)] = make_layout(
        device_, MERGE_BINDINGS, sizeof(MergePush), bits({MERGE_PARTIAL_O_BINDING, MERGE_PARTIAL_LSE_BINDING}), 0);
    layouts_[static_cast<int>(KernelKind::cascade_lengths)] = make_layout(
        device_, CASCADE_LENGTHS_BINDINGS, sizeof(CascadeLengthsPush), bits({CASCADE_LENGTHS_OUT_BINDING}), 0);
    layouts_[static_cast<int>(KernelKind::cascade_merge)] = make_layout(
        device_, CASCADE_MERGE_BINDINGS, sizeof(CascadeMergePush), bits({CASCADE_MERGE_O_BINDING, CASCADE_MERGE_LSE_BINDING}), 0);
  } catch (...) {
    release();
    throw;
  }
}

PipelineRegistry::~PipelineRegistry() { release(); }

void PipelineRegistry::release() {
  for (auto& [key, pipeline] : pipelines_) vkDestroyPipeline(device_, pipeline, nullptr);
  builds_.clear();
  build_number_.clear();
  pipelines_.clear();
  for (auto& [name, module] : modules_) vkDestroyShaderModule(device_, module, nullptr);
  modules_.clear();
  for (KernelLayout& l : layouts_) {
    if (l.push_template) vkDestroyDescriptorUpdateTemplate(device_, l.push_template, nullptr);
    if (l.pipeline_layout) vkDestroyPipelineLayout(device_, l.pipeline_layout, nullptr);
    if (l.set_layout) vkDestroyDescriptorSetLayout(device_, l.set_layout, nullptr);
    l = {};
  }
  if (cache_) vkDestroyPipelineCache(device_, cache_, nullptr);
  cache_ = VK_NULL_HANDLE;
}

VkShaderModule PipelineRegistry::shader_module(const std::string& name) {
  auto it = modules_.find(name);
  if (it != modules_.end()) return it->second;
  const std::span<const uint32_t> code = find_spirv(name);
  if (code.empty()) throw Error("internal: no embedded shader named '" + name + "'");
  std::vector<uint32_t> patched;  // the module with the NaN-preserving mode, where the device takes it
  std::span<const uint32_t> words = code;
  if (preserve_nan_) words = patched = with_nan_preserved(code);
  VkShaderModuleCreateInfo info{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  info.codeSize = words.size_bytes();
  info.pCode = words.data();
  VkShaderModule module;
  VK_TRY(vkCreateShaderModule(device_, &info, nullptr, &module));
  modules_.emplace(name, module);
  return module;
}

VkPipeline PipelineRegistry::get(const PipelineKey& key) {
  std::lock_guard lock(mutex_);
  auto it = pipelines_.find(key);
  if (it != pipelines_.end()) return it->second;

  // Constant i (its id in shaders/shader_abi.h) is the i-th 32-bit word of key.spec.
  std::array<VkSpecializationMapEntry, kMaxSpecConstants> entries;
  for (uint32_t i = 0; i < key.spec_count; ++i) entries[i] = {i, i * 4u, 4u};
  const VkSpecializationInfo spec_info{key.spec_count, entries.data(), key.spec_count * 4u, key.spec.data()};
  VkComputePipelineCreateInfo info{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  info.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  info.stage.module = shader_module(module_name(key));
  info.stage.pName = "main";
  info.stage.pSpecializationInfo = &spec_info;
  VkPipelineShaderStageRequiredSubgroupSizeCreateInfo required_size{
      VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO};
  if (key.required_subgroup_size) {
    required_size.requiredSubgroupSize = key.required_subgroup_size;
    info.stage.pNext = &required_size;
    info.stage.flags = VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT;
  }
  info.layout = layout(kernel_kind(key.shader)).pipeline_layout;
  VkPipeline pipeline;
  const auto start = std::chrono::steady_clock::now();
  VK_TRY(vkCreateComputePipelines(device_, cache_, 1, &info, nullptr, &pipeline));
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  build_number_.emplace(pipeline, static_cast<uint32_t>(builds_.size()));
  builds_.push_back({pipelines_.emplace(key, pipeline).first, ms});
  return pipeline;
}

std::vector<uint8_t> PipelineRegistry::cache_data() {
  std::lock_guard lock(mutex_);
  // The size can grow between the two calls only if another thread builds a pipeline, which the
  // mutex excludes; VK_INCOMPLETE is handled anyway by asking again.
  for (;;) {
    std::size_t size = 0;
    VK_TRY(vkGetPipelineCacheData(device_, cache_, &size, nullptr));
    std::vector<uint8_t> data(size);
    const VkResult r = vkGetPipelineCacheData(device_, cache_, &size, data.data());
    if (r == VK_INCOMPLETE) continue;
    if (r != VK_SUCCESS) throw_vk_error("vkGetPipelineCacheData", r);
    data.resize(size);
    return data;
  }
}

std::pair<std::string, uint32_t> PipelineRegistry::label(VkPipeline pipeline) {
  std::lock_guard lock(mutex_);
  const auto it = build_number_.find(pipeline);
  if (it == build_number_.end()) return {"unknown pipeline", UINT32_MAX};
  return {pipeline_label(builds_[it->second].entry->first), it->second};
}

std::vector<PipelineBuild> PipelineRegistry::builds_since(std::size_t first) {
  std::lock_guard lock(mutex_);
  std::vector<PipelineBuild> out;
  for (std::size_t i = first; i < builds_.size(); ++i)
    out.push_back({pipeline_label(builds_[i].entry->first), static_cast<uint32_t>(i), builds_[i].ms});
  return out;
}

std::size_t PipelineRegistry::pipeline_count() {
  std::lock_guard lock(mutex_);
  return pipelines_.size();
}

}  // namespace vkattn::detail
