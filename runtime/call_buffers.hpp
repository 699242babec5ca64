// The buffers of one attention call, checked against its plan: each is given as the spec says, is a
// valid Buffer of the Context the call is made with, holds what its layout reaches, and no output
// shares a byte with another argument. Cheap (a few comparisons per buffer, no allocation unless an
// Error is thrown): it runs on every record of a prepared call.
#pragma once

#include <array>
#include <optional>
#include <span>

#include "context_impl.hpp"
#include "vkattn/attention.hpp"
#include "vkattn/problem.hpp"

namespace vkattn::detail {

// `elements` elements of `element_size` bytes (1, 2 or 4) from byte `byte_offset` of `buffer`: throws
// Error naming `name` unless the buffer is valid, holds them, starts them element-aligned, and they
// are indexable with 32 bits.
void check_binding(const char* name, const Buffer* buffer, uint64_t byte_offset, uint64_t element_size,
                   uint64_t elements);

// Bytes [begin, end) of `buffer`'s VkBuffer that an argument may touch (absolute offsets). No
// default member values: the checks fill arrays of these on every record, and zeroing an array
// first cost more than the checks themselves (measured).
struct BufferExtent {
  const char* name;
  const Buffer* buffer;
  uint64_t begin, end;
  bool output;
};

// Throws Error naming the argument whose Buffer belongs to another Context than `context`, or the
// output that shares a byte with another argument (inputs may share bytes), with both byte ranges.
void check_extents(const ContextImpl& context, std::span<const BufferExtent> extents);

// The buffer checks of a paged or packed call, one argument at a time (a dense call's are worked
// out when it is planned: CallNeeds below). Each argument's binding is checked as it is added
// (check_binding) and its bytes noted; finish() checks them together (check_extents). Throws Error
// naming the argument. No allocation unless an Error is thrown: it runs on every record.
class BufferChecks {
 public:
  // `element_size`: the call's dtype's, for its tensors.
  BufferChecks(const ContextImpl& context, uint64_t element_size) : context_(context), element_size_(element_size) {}

  // `elements` elements of `element_size` bytes from byte `byte_offset` of `buffer`, the argument
  // touching them from element `first_element` on; an output may share no byte with another.
  void add(const char* name, const Buffer* buffer, uint64_t byte_offset, uint64_t element_size, uint64_t first_element,
           uint64_t elements, bool output);
  // A tensor in the call's dtype, at its layout.
  void tensor(const char* name, const Buffer* buffer, const TensorLayout& layout, bool output);
  // Per-head f32 values (vkattn/per_head.hpp), each given exactly when its layout is.
  void head_values(const PerHead<const Buffer*>& buffers, const PerHeadLayouts& layouts);
  // The caller's workspace (null: vkattn's scratch, not checked), `bytes` of it for the call's `use`.
  void workspace(const BufferSlice* workspace, uint64_t bytes, const char* use);
  // Throws unless an optional argument is given exactly when the call was prepared with it; returns
  // whether it was.
  static bool optional(const char* name, bool given, bool planned);
  // The arguments together: of this Context, no output sharing a byte with another argument.
  void finish() const;

 private:
  const ContextImpl& context_;
  uint64_t element_size_;
  std::array<BufferExtent, 12> extents_{};
  std::size_t count_ = 0;
};

// What the buffers of one planned call must hold, worked out once from its checked problem and
// spec, so that checking a call's buffers is a few comparisons per argument.
struct CallNeeds {
  // The arguments in the order they are checked.
  // per_head + t: per-head tensor t (PerHeadTensor).
  enum Argument { q, k, v, out, lse, kv_lengths, mask, per_head, weights = per_head + kPerHeadTensors.size(), workspace, count };
  static Argument per_head_argument(PerHeadTensor t) { return Argument(per_head + int(t)); }
  struct Need {
    bool planned = false;       // the spec has this argument (the workspace: the plan needs one)
    bool output = false;        // written by the call: may share no byte with another argument
    uint64_t element_size = 4;  // 1, 2 or 4
    uint64_t elements = 0;      // from the argument's start: the Buffer's offset, plus a slice's
    uint64_t first_byte = 0;    // the first byte it may touch, from the same start
  };
  std::array<Need, count> need{};
  int64_t batch = 0, heads = 0, seq_q = 0, seq_k = 0;  // for the weights' message
  const char* workspace_use = "";                      // what the workspace holds, for its message
  uint64_t workspace_bytes() const { return need[workspace].elements; }

  // For the quick pass over a call's buffers (all_fit): the planned arguments, and the pairs of
  // arguments (an output and another) that must not overlap, listed once at plan time.
  bool quick = true;  // false: an argument is past the 32-bit index limit; the full check names it
  uint32_t planned_count = 0;
  std::array<uint8_t, count> planned{};
  uint32_t pair_count = 0;
  std::array<std::array<uint8_t, 2>, count * (count - 1) / 2> pairs{};
};
// What a dense call of `layouts` (with the weights P when `weights`) needs: `workspace_bytes`, needed
// for `workspace_use` (named in the error), 0 for none.
CallNeeds call_needs(const AttentionProblem& p, const AttentionLayouts& layouts, bool weights, uint64_t workspace_bytes,
                     const char* workspace_use);

// Throws Error naming the argument: missing or unexpected, too small, misaligned, of another
// Context, or overlapping another (with both byte ranges). `workspace` (null: vkattn's own scratch,
// which no argument can share) must hold needs.workspace_bytes().
void check_call_buffers(const ContextImpl& context, const CallNeeds& needs, const AttentionBuffers& buffers,
                        const BufferSlice* workspace);

}  // namespace vkattn::detail
