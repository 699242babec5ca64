// The backward pass of attention (the contract: docs/semantics.md, "Backward"): from a forward call's
// inputs, its output O and log-sum-exp, and the gradient of its output dO, the gradients dQ, dK, dV
// and, when the call has sinks, dsinks. Deterministic: no float atomics; every gradient is summed in
// a fixed order, so the same inputs give the same bits on every run. Its memory is linear in the
// sequence lengths: one f32 per query row (D = rowsum(dO∘O)) plus, where lavapipe's loop limit cuts
// the work into splits, their f32 partial sums. The backward of a call that asked for the weights
// (or the unfused path) runs as its forward did, in three stages: GEMMs and a softmax-backward
// kernel, with one chunk's (rows x seq_k) scores and dP in the workspace.
#pragma once

#include <vulkan/vulkan.h>

#include <memory>

#include "vkattn/attention.hpp"
#include "vkattn/attention_spec.hpp"

namespace vkattn {

// The buffers of one backward run. `forward` holds the forward call's buffers as its spec says, out
// (O) and lse included (the spec must have lse): they are read here, not written. Each gradient has
// the layout of its tensor (dQ q's, dK k's, dV v's; dO out's) in the call's dtype; dsinks is f32
// (heads), given exactly when the spec has sinks. The gradients are written whole (0 where no query
// sees a key, e.g. keys past a batch element's key length, and for a fully masked row's dQ).
struct BackwardBuffers {
  AttentionBuffers forward;
  const Buffer* grad_out = nullptr;
  const Buffer* grad_q = nullptr;
  const Buffer* grad_k = nullptr;
  const Buffer* grad_v = nullptr;
  BufferSlice grad_sinks;
};

// How the backward runs (reported by tools).
struct BackwardPlan {
  // The dK/dV and dQ kernels: "portable" (any device), "subgroup" (CPU devices) or "tiled" (GPUs:
  // blocks of tile_rows query rows and tile_keys keys in shared memory); or "three-stage", the
  // backward of a call that asked for the weights or the unfused path: GEMMs and a softmax-backward
  // kernel over `chunks` chunks of query rows, S and dP of one chunk in the workspace
  const char* kernel = "portable";
  uint32_t workgroup = 0;        // invocations per workgroup of its dK/dV and dQ kernels
  uint32_t tile_rows = 0, tile_keys = 0;  // the tiled form's blocks; 0 for the others
  uint32_t chunks = 0;           // the three-stage form's chunks; 0 for the others
  uint32_t query_splits = 1;     // the dK/dV kernel's splits of the query rows (> 1: partials summed after)
  uint32_t key_splits = 1;       // the dQ kernel's splits of the keys
  uint64_t workspace_bytes = 0;  // D per query row, and the splits' partials
  uint32_t dispatches = 0;
};

// A backward call planned once and run many times (a training step's attention layer). The spec is
// the forward call's (vkattn/attention_spec.hpp): dense or packed K and V (a paged cache and q8_0 K/V
// are inference layouts: refused), with lse; its weights and path are the forward's business and are
// not read here. Construction checks the spec against the device (Error, naming the argument), plans
// and builds the pipelines; record() and run() check the buffers and record the dispatches, as
// PreparedAttention's do.
class PreparedAttentionBackward {
 public:
  PreparedAttentionBackward(Context& context, const AttentionSpec& spec);
  // The backward planned as vkattn would for the device `plan_for` describes (conform/device_profiles.hpp:
  // an H100's, an Adreno's), run on this context's device — as PreparedAttention's profile
  // constructor: `vkattn conform --profile` proves other devices' plans here. Throws PlanDoesNotFit
  // "X would refuse this call: ..." when planning for `plan_for` throws Error, and "the plan for X
  // does not fit <this device>: ..." when the plan cannot run correctly here (its workgroups, the
  // subgroup form's lanes, shared memory, grid, binding ranges; on lavapipe, walks longer than its
  // loop limit that a GPU's plan does not split).
  PreparedAttentionBackward(Context& context, const AttentionSpec& spec, const DeviceInfo& plan_for);
  PreparedAttentionBackward(PreparedAttentionBackward&&) noexcept;
  PreparedAttentionBackward& operator=(PreparedAttentionBackward&&) noexcept;
  PreparedAttentionBackward(const PreparedAttentionBackward&) = delete;
  PreparedAttentionBackward& operator=(const PreparedAttentionBackward&) = delete;
  ~PreparedAttentionBackward();

  const AttentionSpec& spec() const;
  const BackwardPlan& plan() const;
  uint64_t workspace_bytes() const;

  // Records the backward into the caller's command buffer with no submit (the caller orders the
  // forward's writes before it and the gradients' reads after it); `workspace` must hold
  // workspace_bytes() bytes when that is non-zero. Throws Error (records nothing) when a buffer does
  // not fit the plan.
  void record(VkCommandBuffer command_buffer, const BackwardBuffers& buffers, BufferSlice workspace = {}) const;
  // Runs it and waits, with the Context's own scratch as the workspace.
  void run(const BackwardBuffers& buffers) const;

 private:
  friend void attention_backward(Context&, const AttentionSpec&, const BackwardBuffers&);
  struct Impl;
  const Impl& impl() const;
  std::unique_ptr<Impl> impl_;
};

// Runs the backward of a call of `spec` once and waits: PreparedAttentionBackward(context,
// spec).run(buffers), with the buffers checked before any pipeline is built.
void attention_backward(Context& context, const AttentionSpec& spec, const BackwardBuffers& buffers);

}  // namespace vkattn
