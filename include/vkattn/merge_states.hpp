// Merging attention states (the contract: docs/semantics.md, "Merging attention states"): N partial
// results (O_i, LSE_i) of attention over disjoint key ranges of the same queries give the result over
// all of them,
//   LSE = m + log T,  T = Σ_i e^(LSE_i - m),  O = Σ_i e^(LSE_i - m) / T · O_i,  m = max_i LSE_i,
// exactly as a split-KV call combines its splits (the same kernel). A part whose row saw no key (LSE_i
// = -inf) adds nothing, whatever its O; a row no part saw a key of gives O = 0 and LSE = -inf. This
// splits one long KV across devices or calls (context parallelism: each attends its range of keys with
// lse, one merge joins them) and joins a shared prefix's result with each sequence's own.
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <memory>
#include <span>

#include "vkattn/attention.hpp"
#include "vkattn/buffer.hpp"
#include "vkattn/context.hpp"
#include "vkattn/merge_types.hpp"

namespace vkattn {

// The buffers of one merge: part_o[i] holds part i's O at `part`'s layout and part_lse[i] its LSE
// (batch · heads · rows f32 from the slice's byte offset); one of each per part. out is written at
// `out`'s layout, lse (given exactly when the spec has lse) like a part's LSE. The outputs must not
// share a byte with any input.
struct MergeStatesBuffers {
  std::span<const Buffer* const> part_o;
  std::span<const BufferSlice> part_lse;
  const Buffer* out = nullptr;
  BufferSlice lse;
};

// A merge planned once and run or recorded many times. Construction checks the spec (Error naming the
// argument: a layout, a part count, a dtype the device cannot store) and builds the pipelines; record()
// and run() check the buffers (Error, nothing recorded) as PreparedAttention's do.
class PreparedMergeStates {
 public:
  PreparedMergeStates(Context& context, const MergeStatesSpec& spec);
  PreparedMergeStates(PreparedMergeStates&&) noexcept;
  PreparedMergeStates& operator=(PreparedMergeStates&&) noexcept;
  PreparedMergeStates(const PreparedMergeStates&) = delete;
  PreparedMergeStates& operator=(const PreparedMergeStates&) = delete;
  ~PreparedMergeStates();

  const MergeStatesSpec& spec() const;
  // The workspace record() needs: every part's rows of one range in f32 (the combine's partials).
  uint64_t workspace_bytes() const;
  // Query-row ranges the merge runs in (1 unless the parts' f32 rows exceed one binding).
  uint32_t ranges() const;

  // Records the merge into the caller's command buffer with no submit (the caller orders the parts'
  // writes before it and the outputs' reads after it); `workspace` must hold workspace_bytes() bytes.
  void record(VkCommandBuffer command_buffer, const MergeStatesBuffers& buffers, BufferSlice workspace) const;
  // Runs it and waits, with the Context's own scratch as the workspace.
  void run(const MergeStatesBuffers& buffers) const;

 private:
  friend void merge_attention_states(Context&, const MergeStatesSpec&, const MergeStatesBuffers&);
  struct Impl;
  const Impl& impl() const;
  std::unique_ptr<Impl> impl_;
};

// Runs a merge once and waits: PreparedMergeStates(context, spec).run(buffers), the buffers checked
// first.
void merge_attention_states(Context& context, const MergeStatesSpec& spec, const MergeStatesBuffers& buffers);

}  // namespace vkattn
