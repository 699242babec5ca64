// What vkattn records for a call, made once when the call is planned and replayed into any command
// buffer: dispatches (pipeline, bindings, push constants, grid) and the barriers between them, with
// buffers named by slot rather than by VkBuffer. Replaying resolves the slots to the call's buffers
// and records; it builds no string, takes no lock and allocates nothing.
#pragma once

#include <vulkan/vulkan.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

namespace vkattn {
struct DeviceInfo;
class Buffer;
}

namespace vkattn::detail {

class ContextImpl;
struct KernelLayout;

// Where slot s's bytes start when a list is replayed: binding offsets count from byte `base` of `buffer`.
struct SlotBase {
  VkBuffer buffer = VK_NULL_HANDLE;
  uint64_t base = 0;
  // A uniform texel buffer view of R32G32_UINT over the whole of `buffer`, from its byte 0, where
  // the buffer has one (Buffer::allocate's on CPU devices, memory.hpp); else none. Read by the
  // dispatches that have a texel build (Dispatch::texel_pipelines).
  VkBufferView texel = VK_NULL_HANDLE;
};
// Where `buffer`'s byte `offset` is, with its texel view.
SlotBase slot_of(const Buffer& buffer, uint64_t offset = 0);

// Slot 0 of every list is the Context's small placeholder buffer, bound where a dispatch reads or
// writes nothing (no mask, no LSE); replay supplies it, the caller's slots start at 1.
inline constexpr uint32_t kPlaceholderSlot = 0;

// A storage-buffer binding: `elements` elements of `element_size` bytes from byte `offset` of a slot.
// At replay the descriptor starts at the aligned-down byte and the shader adds the remainder, in
// elements, from a push-constant half-word (Dispatch::bind), so tensors may start at any
// element-aligned byte. The remainder is below the alignment (Vulkan allows at most 256 bytes), so 16
// bits hold it, and two bindings may share a word (the score modifiers' tensors do: shader_abi.h). The range covers whole 32-bit words: masks and 16-bit tensors are read a word at a time.
struct Binding {
  uint32_t slot = kPlaceholderSlot;
  uint64_t offset = 0;
  uint64_t element_size = 4;
  uint64_t elements = 0;
};

// The placeholder: the whole 256-byte buffer (ContextImpl::dummy).
inline constexpr Binding kPlaceholder{kPlaceholderSlot, 0, 4, 64};

inline constexpr uint32_t kMaxBindings = 14;  // the most any kernel has (BACKWARD_BINDINGS, shader_abi.h)
inline constexpr uint32_t kMaxPushWords = 32;  // 128 bytes, the least maxPushConstantsSize Vulkan allows

inline constexpr uint32_t kMaxTexelBindings = 2;  // the most any texel layout has (GEMM_TEXEL_BINDINGS)

// What a kernel layout's push template reads at replay (KernelLayout::push_template).
struct DescriptorData {
  std::array<VkDescriptorBufferInfo, kMaxBindings> buffers;  // binding i at i
  std::array<VkBufferView, kMaxTexelBindings> texel{};       // a texel layout's texel buffers, after them
};

struct Dispatch {
  VkPipeline pipeline = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkDescriptorUpdateTemplate descriptors = VK_NULL_HANDLE;  // the layout's push template
  uint32_t binding_count = 0;
  uint32_t reads = 0, writes = 0;  // the layout's (KernelLayout::reads, writes): bit i for binding i
  std::array<Binding, kMaxBindings> bindings{};
  // The push-constant half-word (16 bits, counted from the block's start) that receives binding i's
  // element offset at replay; kNoWord for none.
  static constexpr uint8_t kNoWord = 0xff;
  std::array<uint8_t, kMaxBindings> offset_word{};
  uint32_t push_bytes = 0;
  std::array<uint32_t, kMaxPushWords> push{};
  std::array<uint32_t, 3> groups{1, 1, 1};
  // An indirect dispatch (vkCmdDispatchIndirect) when indirect_slot is not the placeholder's: its grid
  // is read from byte indirect_offset of that slot at execution, and `groups` is only its bound (the
  // limit checks, check_fits).
  uint32_t indirect_slot = kPlaceholderSlot;
  uint64_t indirect_offset = 0;
  // Some pipelines read or write a binding in wide chunks (16-byte vectors), which needs it to start
  // at a multiple of the chunk within its descriptor: known only at replay (the slots' bases).
  // chunk_mask[i] is binding i's chunk size in bytes less one (a power of two; 0: read element-wise).
  // Where a chunked binding starts off its grid, replay binds `unchunked_pipeline` (same layout and
  // push constants, element-wise access) instead.
  std::array<uint32_t, kMaxBindings> chunk_mask{};
  VkPipeline unchunked_pipeline = VK_NULL_HANDLE;
  // Builds that read some bindings through their slots' texel views (SlotBase::texel), with their
  // own layout (a texel layout, KernelLayout: the same storage bindings and push constants, then
  // texel buffer i for binding texel_binding[i]). texel_pipelines[m] reads the bindings of the bits
  // of m. Replay takes the build of the bindings whose slots have a view and that start on their
  // chunk grids (their chunk_mask, which must be set), where there is one and no chunked binding is
  // off its grid; each such binding's push word (offset_word: a whole 32-bit word, the half-word
  // even) then receives its element offset from the VkBuffer's first byte, not from its
  // descriptor's, and a texel buffer the build does not read is bound to the placeholder's view.
  // Elsewhere the pipelines above run.
  std::array<VkPipeline, 1u << kMaxTexelBindings> texel_pipelines{};
  VkPipelineLayout texel_layout = VK_NULL_HANDLE;
  VkDescriptorUpdateTemplate texel_descriptors = VK_NULL_HANDLE;
  std::array<uint32_t, kMaxTexelBindings> texel_binding{};
  uint32_t texel_count = 0;

  // The kernel's pipeline layout and descriptor template; every binding of the layout starts as the
  // placeholder, so the template (which reads them all) never sees an unset one.
  void use(const KernelLayout& kernel_layout);
  // Binding `index` (== descriptor binding); the shader reads its element offset from the 16 bits at
  // byte `push_offset` of the push block (offsetof of the block's `*_off` member, + 2 for the high
  // half of that member), when given.
  void bind(uint32_t index, const Binding& binding, std::size_t push_offset = SIZE_MAX);
  // The texel layout, texel buffer i read for binding bindings[i] (see texel_pipelines).
  void use_texel(const KernelLayout& texel_layout, std::span<const uint32_t> bindings);
  // The texel bindings some texel build reads (bit t: texel_binding[t]).
  uint32_t texel_bits() const;
  // The push block, its element-offset members left for replay.
  template <typename Push>
  void set_push(const Push& block) {
    static_assert(sizeof(Push) <= kMaxPushWords * 4 && sizeof(Push) % 4 == 0);
    push_bytes = sizeof(Push);
    std::memcpy(push.data(), &block, sizeof(Push));
  }
};

class CommandList {
 public:
  // `alignment`: the storage-buffer offset alignment every binding's descriptor is aligned down to
  // (a power of two, as Vulkan requires of minStorageBufferOffsetAlignment).
  explicit CommandList(uint64_t alignment = 16);

  void dispatch(const Dispatch& dispatch);
  // A global memory barrier between compute dispatches: `before` accesses made visible to `after`.
  void compute_barrier(VkAccessFlags before, VkAccessFlags after);
  // A global memory barrier whose first or second scope also takes in reading an indirect
  // dispatch's grid (VK_ACCESS_INDIRECT_COMMAND_READ_BIT at the draw-indirect stage): before a
  // buffer that holds one is written again, and between writing one and dispatching from it.
  void indirect_barrier(VkAccessFlags before, VkAccessFlags after);
  // Every shader read and write before, every one after (a dispatch may read what the last wrote, or
  // overwrite what it read).
  void barrier_between_dispatches();
  // Appends `other`'s steps (recorded with the same alignment and slots).
  void append(const CommandList& other);

  // Marks `slot` (below 32) as vkattn's own, the workspace: no caller orders accesses to it between
  // two calls recorded back to back, so the list's own barriers must (hazards() checks).
  void own_slot(uint32_t slot);
  bool owns(uint32_t slot) const;
  std::size_t dispatch_count() const;
  // Every pair of dispatches of the list that touch overlapping bytes of one slot (the placeholder's
  // aside), one writing, without a barrier between them that orders the two as Vulkan requires: a
  // read after a write needs the write made visible to shader reads (an indirect grid's read, to
  // indirect-command reads), a write after a write the first write in a barrier's first scope, a
  // write after a read any barrier. One line per hazard, naming the steps, bindings, slot and bytes;
  // empty when there is none. Also between two replays back to back, for the own slots (own_slot).
  // The kernels' reads and writes per binding are their layouts'
  // (KernelLayout::reads, writes). For conformance runs and tests (ContextOptions::check_barriers): synchronization validation
  // sees bindings, this sees the list's own byte ranges, and runs on every call the tests record.
  std::vector<std::string> hazards() const;
  // Throws Error when a dispatch's grid or a binding's range (with the worst alignment slack)
  // exceeds `device`'s limits: for lists planned for another device (plan_fit.hpp).
  void check_fits(const DeviceInfo& device) const;
  bool empty() const { return steps_.empty(); }

  // Records every step into `cmd` (in the recording state). `slots[s]` says where slot s's bytes
  // are for s >= 1; slot 0 is `context`'s placeholder.
  // While a DispatchProfile is active on `context`, also the call's
  // timestamps (dispatch_probe.hpp).
  void replay(const ContextImpl& context, VkCommandBuffer cmd, std::span<const SlotBase> slots) const;

 private:
  // A binding that names one of the caller's slots, with what replay needs of it worked out when
  // the dispatch is added (the placeholder's bindings are fixed: their push words are already 0).
  struct SlotBinding {
    uint32_t index = 0;      // descriptor binding
    uint32_t slot = 0;
    uint64_t offset = 0;     // bytes from the slot's base
    uint64_t bytes = 0;      // elements * element_size, plus 3 (rounded to whole words at replay)
    uint8_t word = Dispatch::kNoWord;  // the push half-word (Dispatch::offset_word)
    uint8_t shift = 0;       // log2(element_size)
    bool read = false, written = false;  // by the kernel (Dispatch::reads, writes)
  };
  struct Step {
    bool barrier = false;
    VkAccessFlags before = 0, after = 0;  // barrier
    VkPipelineStageFlags src_stages = 0, dst_stages = 0;
    Dispatch dispatch;                    // otherwise
    uint32_t slot_binding_count = 0;
    std::array<SlotBinding, kMaxBindings> slot_bindings{};
  };
  uint64_t alignment_;
  uint32_t own_slots_ = 0;  // bit s: slot s is vkattn's own (own_slot)
  std::vector<Step> steps_;
};

}  // namespace vkattn::detail
