#include "command_list.hpp"

#include <algorithm>
#include <bit>
#include <string>

#include "context_impl.hpp"
#include "dispatch_probe.hpp"
#include "pipelines.hpp"
#include "vkattn/buffer.hpp"
#include "vkattn/context.hpp"
#include "vkattn/error.hpp"

namespace vkattn::detail {

void Dispatch::use(const KernelLayout& kernel_layout) {
  layout = kernel_layout.pipeline_layout;
  descriptors = kernel_layout.push_template;
  binding_count = kernel_layout.bindings;
  reads = kernel_layout.reads;
  writes = kernel_layout.writes;
  bindings.fill(kPlaceholder);
  offset_word.fill(kNoWord);
}

void Dispatch::bind(uint32_t index, const Binding& binding, std::size_t push_offset) {
  if (index >= binding_count) throw Error("internal: binding " + std::to_string(index) + " past the layout's " + std::to_string(binding_count));
  bindings[index] = binding;
  if (push_offset != SIZE_MAX && (push_offset % 2 != 0 || push_offset + 2 > kMaxPushWords * 4))
    throw Error("internal: push offset " + std::to_string(push_offset) + " is not a half-word of the push block");
  offset_word[index] = push_offset == SIZE_MAX ? kNoWord : static_cast<uint8_t>(push_offset / 2);
}

void Dispatch::use_texel(const KernelLayout& texel_layout, std::span<const uint32_t> texel_bindings) {
  if (texel_layout.bindings != binding_count || texel_bindings.size() > kMaxTexelBindings)
    throw Error("internal: a texel layout of " + std::to_string(texel_layout.bindings) + " storage bindings for one of " +
                std::to_string(binding_count) + ", with " + std::to_string(texel_bindings.size()) + " texel bindings");
  this->texel_layout = texel_layout.pipeline_layout;
  texel_descriptors = texel_layout.push_template;
  texel_count = static_cast<uint32_t>(texel_bindings.size());
  for (uint32_t i = 0; i < texel_count; ++i) {
    if (texel_bindings[i] >= binding_count) throw Error("internal: texel binding " + std::to_string(texel_bindings[i]));
    texel_binding[i] = texel_bindings[i];
  }
}

uint32_t Dispatch::texel_bits() const {
  uint32_t bits = 0;
  for (uint32_t m = 1; m < texel_pipelines.size(); ++m)
    if (texel_pipelines[m] != VK_NULL_HANDLE) bits |= m;
  return bits;
}

SlotBase slot_of(const Buffer& buffer, uint64_t offset) {
  return SlotBase{buffer.handle(), buffer.offset() + offset, texel_view_of(buffer)};
}

namespace {

// The 16 bits of push half-word `half` (little-endian, as the device reads the block's words).
static_assert(std::endian::native == std::endian::little, "push-constant half-words assume a little-endian host");
void set_half(std::array<uint32_t, kMaxPushWords>& push, uint8_t half, uint64_t value) {
  const uint16_t v = static_cast<uint16_t>(value);
  std::memcpy(reinterpret_cast<unsigned char*>(push.data()) + 2u * half, &v, 2);
}

}  // namespace

CommandList::CommandList(uint64_t alignment) : alignment_(alignment) {
  if (!std::has_single_bit(alignment)) throw Error("internal: storage-buffer alignment " + std::to_string(alignment) + " is not a power of two");
  // Room for a typical call (a split dispatch, a combine and their barriers; a few query ranges) at
  // once: growing step by step would copy the steps over and over when a call is planned per record.
  steps_.reserve(24);
}

// Steps are built in place: a Step is several hundred bytes, and the one-call conveniences
// (record_attention) make a list per call.
void CommandList::dispatch(const Dispatch& dispatch) {
  Step& step = steps_.emplace_back();
  step.dispatch = dispatch;
  for (uint32_t i = 0; i < dispatch.binding_count; ++i) {
    const Binding& b = dispatch.bindings[i];
    const uint8_t word = dispatch.offset_word[i];
    if (b.slot == kPlaceholderSlot) {
      // The placeholder is bound whole, from its first byte: element offset 0, whatever the binding says.
      if (b.offset != 0) throw Error("internal: a placeholder binding with an offset");
      if (word != Dispatch::kNoWord) set_half(step.dispatch.push, word, 0);
      continue;
    }
    if (b.element_size != 1 && b.element_size != 2 && b.element_size != 4)
      throw Error("internal: element size " + std::to_string(b.element_size));
    if (dispatch.chunk_mask[i] != 0 &&
        (!std::has_single_bit(dispatch.chunk_mask[i] + 1u) || dispatch.unchunked_pipeline == VK_NULL_HANDLE))
      throw Error("internal: a chunked binding whose chunk is not a power of two, or without an element-wise pipeline");
    for (uint32_t t = 0; t < dispatch.texel_count; ++t)
      if (i == dispatch.texel_binding[t] && (dispatch.texel_bits() >> t & 1u) &&
          (dispatch.chunk_mask[i] == 0 || word == Dispatch::kNoWord || word % 2 != 0))
        throw Error("internal: a texel binding without a chunk grid or a whole push word");
    step.slot_bindings[step.slot_binding_count++] = {i,
                                                     b.slot,
                                                     b.offset,
                                                     b.elements * b.element_size + 3,
                                                     word,
                                                     static_cast<uint8_t>(b.element_size / 2),  // log2 of 1, 2, 4
                                                     (dispatch.reads >> i & 1u) != 0,
                                                     (dispatch.writes >> i & 1u) != 0};
  }
}

void CommandList::compute_barrier(VkAccessFlags before, VkAccessFlags after) {
  Step& step = steps_.emplace_back();
  step.barrier = true;
  step.before = before;
  step.after = after;
  step.src_stages = step.dst_stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT;
}

void CommandList::indirect_barrier(VkAccessFlags before, VkAccessFlags after) {
  const VkPipelineStageFlags compute = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT;
  const VkPipelineStageFlags both = compute | VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT;
  compute_barrier(before, after);
  steps_.back().src_stages = (before & VK_ACCESS_INDIRECT_COMMAND_READ_BIT) ? both : compute;
  steps_.back().dst_stages = (after & VK_ACCESS_INDIRECT_COMMAND_READ_BIT) ? both : compute;
}

void CommandList::barrier_between_dispatches() {
  constexpr VkAccessFlags read_write = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
  compute_barrier(read_write, read_write);
}

void CommandList::append(const CommandList& other) { steps_.insert(steps_.end(), other.steps_.begin(), other.steps_.end()); }

std::size_t CommandList::dispatch_count() const {
  std::size_t n = 0;
  for (const Step& s : steps_) n += s.barrier ? 0 : 1;
  return n;
}

void CommandList::check_fits(const DeviceInfo& device) const {
  for (const Step& step : steps_) {
    if (step.barrier) continue;
    const Dispatch& d = step.dispatch;
    for (int axis = 0; axis < 3; ++axis)
      if (d.groups[axis] > device.max_workgroup_count[axis])
        throw Error("a grid of " + std::to_string(d.groups[axis]) + " workgroups exceeds maxComputeWorkGroupCount[" +
                    std::to_string(axis) + "] (" + std::to_string(device.max_workgroup_count[axis]) + ") of " + device.name);
    for (uint32_t i = 0; i < d.binding_count; ++i) {
      const uint64_t bytes = d.bindings[i].elements * d.bindings[i].element_size + alignment_;  // the worst slack
      if (d.bindings[i].slot != kPlaceholderSlot && bytes > device.max_storage_buffer_range)
        throw Error("a binding of " + std::to_string(bytes) + " bytes exceeds maxStorageBufferRange (" +
                    std::to_string(device.max_storage_buffer_range) + ") of " + device.name);
    }
  }
}

void CommandList::own_slot(uint32_t slot) {
  if (slot >= 32) throw Error("internal: own slot " + std::to_string(slot) + " past 31");
  own_slots_ |= 1u << slot;
}

// Slots past 31 (a merge's parts) are never own ones; shifting by them would be undefined.
bool CommandList::owns(uint32_t slot) const { return slot < 32 && (own_slots_ >> slot & 1u) != 0; }

std::vector<std::string> CommandList::hazards() const {
  // Bytes [begin, end) of a slot that step `step`'s binding `binding` touches (binding kIndirect:
  // the 12 bytes of an indirect dispatch's grid).
  constexpr uint32_t kIndirect = UINT32_MAX;
  struct Access {
    std::size_t step;
    uint32_t binding, slot;
    uint64_t begin, end;
    bool next_call;  // the second walk: the list replayed again right after (own slots only)
  };
  // Per slot, the accesses no barrier has yet ordered before a later access of some kind, one list
  // per kind of later access, each emptied by the barrier that settles it: so a list of any length
  // costs time in proportion to its steps times the unordered accesses of the same slot (a long list
  // of barrier-separated steps is linear; comparing every access with every earlier one was not).
  struct Pending {
    std::vector<Access> reads;              // shader reads since the last barrier
    std::vector<Access> grid_reads;         // indirect grids since the last barrier with the indirect stage
    std::vector<Access> writes_for_writes;  // writes in no barrier's first scope yet
    std::vector<Access> writes_for_reads;   // writes not yet made visible to shader reads
    std::vector<Access> writes_for_grids;   // writes not yet made visible to indirect-command reads
  };
  uint32_t slots = 1;
  for (const Step& step : steps_) {
    for (uint32_t s = 0; s < step.slot_binding_count; ++s) slots = std::max(slots, step.slot_bindings[s].slot + 1);
    if (!step.barrier && step.dispatch.indirect_slot != kPlaceholderSlot)
      slots = std::max(slots, step.dispatch.indirect_slot + 1);
  }
  std::vector<Pending> pending(slots);
  std::vector<std::string> found;
  const auto name = [](const Access& a) {
    return std::string(a.next_call ? "the next call's " : "") + "step " + std::to_string(a.step) +
           (a.binding == kIndirect ? std::string(" (its indirect grid)") : " binding " + std::to_string(a.binding));
  };
  // (A binding's bytes: its elements', without the 3 that SlotBinding::bytes adds for rounding to
  // whole words at replay.)
  const auto binding_access = [](std::size_t i, const SlotBinding& b, bool next_call) {
    return Access{i, b.index, b.slot, b.offset, b.offset + b.bytes - 3, next_call};
  };
  const auto grid_access = [](std::size_t i, const Dispatch& d, bool next_call) {
    return Access{i, kIndirect, d.indirect_slot, d.indirect_offset, d.indirect_offset + 12, next_call};
  };
  const auto check = [&](const char* kind, const Access& later, const std::vector<Access>& earlier) {
    for (const Access& e : earlier)
      if (later.begin < e.end && e.begin < later.end)
        found.push_back(std::string(kind) + ": " + name(later) + " and " + name(e) + " touch bytes [" +
                        std::to_string(std::max(later.begin, e.begin)) + ", " + std::to_string(std::min(later.end, e.end)) +
                        ") of slot " + std::to_string(later.slot) + " with no barrier that orders them");
  };
  // Two walks: the list, then the list again as the next call recorded right after it with no
  // barrier of the caller's between, which checks only the slots that are vkattn's own (the caller
  // orders its own buffers between calls) against the first walk's accesses, and adds none.
  for (const bool next_call : {false, true}) {
    if (next_call && own_slots_ == 0) break;
    for (std::size_t i = 0; i < steps_.size(); ++i) {
      const Step& step = steps_[i];
      if (step.barrier) {
        // Every barrier here is an execution dependency from the compute stage (and the indirect one
        // where indirect_barrier adds it) to the compute stage: it orders earlier shader reads (and
        // grid reads, where its first scope has the indirect stage) before later writes; its access
        // masks say which earlier writes it makes available and to what.
        const bool orders_grid_reads = (step.src_stages & VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT) != 0;
        const bool writes_first = (step.before & VK_ACCESS_SHADER_WRITE_BIT) != 0;
        for (Pending& p : pending) {
          p.reads.clear();
          if (orders_grid_reads) p.grid_reads.clear();
          if (!writes_first) continue;
          p.writes_for_writes.clear();
          if (step.after & VK_ACCESS_SHADER_READ_BIT) p.writes_for_reads.clear();
          if (step.after & VK_ACCESS_INDIRECT_COMMAND_READ_BIT) p.writes_for_grids.clear();
        }
        continue;
      }
      const Dispatch& d = step.dispatch;
      if (d.indirect_slot != kPlaceholderSlot && (!next_call || owns(d.indirect_slot))) {
        check("read after write", grid_access(i, d, next_call), pending[d.indirect_slot].writes_for_grids);
      }
      for (uint32_t s = 0; s < step.slot_binding_count; ++s) {
        const SlotBinding& b = step.slot_bindings[s];
        if (next_call && !owns(b.slot)) continue;
        const Access a = binding_access(i, b, next_call);
        Pending& p = pending[b.slot];
        if (b.read) check("read after write", a, p.writes_for_reads);
        if (b.written) {
          check("write after write", a, p.writes_for_writes);
          check("write after read", a, p.reads);
          check("write after read", a, p.grid_reads);
        }
      }
      if (next_call) continue;
      // This step's accesses join the pending ones after all of them were checked (a dispatch may
      // read and write one binding, and two of its bindings may overlap).
      for (uint32_t s = 0; s < step.slot_binding_count; ++s) {
        const SlotBinding& b = step.slot_bindings[s];
        const Access a = binding_access(i, b, false);
        Pending& p = pending[b.slot];
        if (b.read) p.reads.push_back(a);
        if (b.written) {
          p.writes_for_writes.push_back(a);
          p.writes_for_reads.push_back(a);
          p.writes_for_grids.push_back(a);
        }
      }
      if (d.indirect_slot != kPlaceholderSlot)
        pending[d.indirect_slot].grid_reads.push_back(grid_access(i, d, false));
    }
  }
  return found;
}

void CommandList::replay(const ContextImpl& c, VkCommandBuffer cmd, std::span<const SlotBase> slots) const {
  const SlotBase placeholder{c.dummy().buffer, 0};
  constexpr uint64_t kPlaceholderBytes = kPlaceholder.elements * kPlaceholder.element_size;
  VkPipeline bound = VK_NULL_HANDLE;
  if (c.check_barriers) {  // ContextOptions::check_barriers (conformance runs, tests)
    const std::vector<std::string> found = hazards();
    if (!found.empty())
      throw Error("internal: a missing barrier in a recorded call (" + std::to_string(found.size()) + " hazards), first: " + found.front());
  }
  DispatchProbe* probe = c.dispatch_probe;  // a DispatchProfile's timestamps, when one is active
  uint32_t query = probe ? probe->begin_call(cmd, static_cast<uint32_t>(dispatch_count())) : DispatchProbe::kUnprofiled;
  for (const Step& step : steps_) {
    if (step.barrier) {
      VkMemoryBarrier barrier{};
      barrier.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
      barrier.srcAccessMask = step.before;
      barrier.dstAccessMask = step.after;
      vkCmdPipelineBarrier(cmd, step.src_stages, step.dst_stages, 0, 1, &barrier, 0, nullptr, 0, nullptr);
      continue;
    }
    const Dispatch& d = step.dispatch;
    std::array<uint32_t, kMaxPushWords> push = d.push;
    // Binding i at index i, as the layout's push template reads them: the placeholder's, then the
    // caller's slots over them.
    DescriptorData data;
    std::array<VkDescriptorBufferInfo, kMaxBindings>& infos = data.buffers;
    for (uint32_t i = 0; i < d.binding_count; ++i) infos[i] = {placeholder.buffer, 0, kPlaceholderBytes};
    uint64_t unchunked = 0;  // non-zero: a chunked binding starts off its chunk grid
    // The texel bindings whose slots have views and start on their grids (bit t: texel_binding[t]),
    // with their element offsets from their VkBuffers' first bytes and push words.
    uint32_t texels = 0;
    const uint32_t texel_bits = d.texel_count ? d.texel_bits() : 0;
    std::array<uint64_t, kMaxTexelBindings> texel_element{};
    std::array<uint8_t, kMaxTexelBindings> texel_word{};
    for (uint32_t s = 0; s < step.slot_binding_count; ++s) {
      const SlotBinding& b = step.slot_bindings[s];
      const SlotBase& slot = slots[b.slot];
      // Powers of two (the alignment by Vulkan's rule, element sizes 1, 2 or 4): masks and shifts,
      // not divisions, on this path.
      const uint64_t byte = slot.base + b.offset, aligned = byte & ~(alignment_ - 1);
      infos[b.index] = {slot.buffer, aligned, (byte - aligned + b.bytes) & ~uint64_t(3)};
      if (b.word != Dispatch::kNoWord) set_half(push, b.word, (byte - aligned) >> b.shift);
      unchunked |= (byte - aligned) & d.chunk_mask[b.index];
      for (uint32_t t = 0; t < d.texel_count; ++t)
        if (b.index == d.texel_binding[t] && (texel_bits >> t & 1u) && slot.texel != VK_NULL_HANDLE &&
            (byte & d.chunk_mask[b.index]) == 0) {
          texels |= 1u << t;
          data.texel[t] = slot.texel;
          texel_element[t] = byte >> b.shift;
          texel_word[t] = b.word;
        }
    }
    const VkPipeline texel_pipeline = unchunked ? VK_NULL_HANDLE : d.texel_pipelines[texels];
    const bool texel = texel_pipeline != VK_NULL_HANDLE;
    const VkPipeline pipeline = unchunked ? d.unchunked_pipeline : texel ? texel_pipeline : d.pipeline;
    const VkPipelineLayout layout = texel ? d.texel_layout : d.layout;
    for (uint32_t t = 0; texel && t < d.texel_count; ++t) {
      if (!(texels >> t & 1u)) {
        data.texel[t] = c.dummy().texel_view;  // not read by this build, but bound
        continue;
      }
      // A whole word: a view covers at most maxTexelBufferElements 8-byte texels (< 2^32 elements).
      const uint32_t word = static_cast<uint32_t>(texel_element[t]);
      std::memcpy(&push[texel_word[t] / 2u], &word, 4);
    }
    if (pipeline != bound) {
      vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
      bound = pipeline;
    }
    c.push_descriptors(cmd, texel ? d.texel_descriptors : d.descriptors, layout, 0, &data);
    vkCmdPushConstants(cmd, layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, d.push_bytes, push.data());
    if (d.indirect_slot != kPlaceholderSlot) {
      const SlotBase& args = slots[d.indirect_slot];
      vkCmdDispatchIndirect(cmd, args.buffer, args.base + d.indirect_offset);
    } else {
      vkCmdDispatch(cmd, d.groups[0], d.groups[1], d.groups[2]);
    }
    if (query != DispatchProbe::kUnprofiled) probe->after_dispatch(cmd, query++, pipeline);
  }
}

}  // namespace vkattn::detail
