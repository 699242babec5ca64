// Scaled dot-product attention on the GPU (the contract: docs/semantics.md):
//   O[b,h,i,:] = sum_j softmax_j(scale * Q[b,h,i,:].K[b,g(h),j,:] + bias[b,h,i,j]) V[b,g(h),j,:]
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "vkattn/buffer.hpp"
#include "vkattn/context.hpp"
#include "vkattn/error.hpp"
#include "vkattn/attention_spec.hpp"
#include "vkattn/per_head.hpp"
#include "vkattn/problem.hpp"
#include "vkattn/types.hpp"

namespace vkattn {

// A tensor living in a Buffer: the layout's offset and strides are in elements from buffer->offset().
struct TensorRef {
  const Buffer* buffer = nullptr;
  TensorLayout layout;
};

// An optional range of a buffer; `buffer == nullptr` means absent.
struct BufferSlice {
  const Buffer* buffer = nullptr;
  uint64_t offset = 0;  // bytes from buffer->offset()
};

struct MaskRef {
  const Buffer* buffer = nullptr;  // nullptr: no explicit mask
  MaskLayout layout;
};

// The per-head tensors (base PerHead, vkattn/per_head.hpp: `args.alibi`, ...) are optional score
// modifiers given in Buffers (docs/semantics.md, "Score modifiers").
struct AttentionArgs : PerHead<HeadValuesRef> {
  TensorRef q, k, v;  // (B,H,Sq,Dqk), (B,G,Sk,Dqk), (B,G,Sk,Dv); one dtype
  // K and V stored as q.dtype or as q8_0 blocks (AttentionLayouts::kv_quant; the fused path only).
  KvQuant kv_quant = KvQuant::none;
  TensorRef out;      // (B,H,Sq,Dv), same dtype
  BufferSlice lse;    // optional f32 (B,H,Sq) dense: log-sum-exp of the scaled, biased scores
  MaskRef mask;       // optional explicit mask, broadcast over batch and heads
  // Optional int32 (B) key lengths: keys j >= kv_lengths[b] are masked. Values are read on the device:
  // negative values count as 0 and values above seq_k as seq_k.
  BufferSlice kv_lengths;
  // Optional f32 (B,H,Sq,Sk), dense: the attention weights P, exactly 0 for masked keys and for every
  // key of a fully masked row. Requesting them needs the unfused path (chosen by `automatic`).
  BufferSlice weights;
  AttentionOptions options;
  AttentionPath path = AttentionPath::automatic;
};

// The most workspace the fused path asks for. Its split-KV partials (an O row and an LSE per query
// row and key split) would grow as seq_q x seq_k, since the splits grow with seq_k (on lavapipe one
// every ~1000 keys, to stay under its loop limit); instead the query tiles are processed in ranges
// whose partials fit this budget, the workspace being reused by each range in turn. 32 MiB keeps
// the fused path's memory linear in the sequence lengths and small next to its tensors at long
// contexts, is a quarter of the smallest maxStorageBufferRange Vulkan allows (2^27), and still
// leaves each range about a thousand workgroups or more (budget / (rows per tile x (dim_v + 2) x 4)),
// enough to fill a GPU between the barriers that separate ranges. Below it, a range's partials are
// also kept within a quarter of the call's output size in f32 (but never so few that a range holds
// less than 4x the workgroups the device wants in flight), so the fused path's device memory grows
// linearly with the sequence at every size, not only past this budget.
inline constexpr uint64_t fused_workspace_budget = uint64_t(32) << 20;

// How a call will run (chosen from the problem and the device; reported by the bench tool).
struct AttentionPlan {
  uint32_t rows_per_workgroup = 0, threads_per_row = 0, keys_per_tile = 0;
  uint32_t splits = 1;          // key-range splits; > 1 adds a combine dispatch
  int64_t keys_per_split = 0;
  // Scratch needed by record_attention. Fused: the split-KV partials of one range of query tiles, at
  // most min(fused_workspace_budget, maxStorageBufferRange) whatever seq_q and seq_k, except when
  // the partials of a single query tile of a single GQA group exceed it (thousands of splits): then
  // exactly that one tile's. The subgroup kernel (CPU devices) adds 16 bytes per workgroup of a
  // dispatch, split or not: which rows its careful pass (NaN/Inf, overflow) redoes. Unfused: the f32
  // scores of one chunk (see scores_bytes).
  uint64_t workspace_bytes = 0;
  const char* path = "fused";    // "fused" or "unfused" (the three-stage path)
  const char* kernel = "tiled";  // fused: the kernel variant, tiled or rowwise; unfused: "gemm"
  // Unfused: bytes of f32 scores the call materialises at once (the weights P when requested, else
  // the workspace's share), and the number of pieces the (batch, head, query-row) space is cut into
  // so that each piece's scores fit one storage-buffer binding. Fused: scores_bytes is 0 and chunks
  // counts the attention dispatches (not the combine dispatches): more than 1 when a tensor exceeds
  // one binding (chunks of batch, GQA group or key range), when the grid exceeds
  // maxComputeWorkGroupCount, or when split-KV partials of all query tiles would exceed
  // fused_workspace_budget (ranges of query tiles, each split and combined in turn).
  uint64_t scores_bytes = 0;
  uint32_t chunks = 1;
  // A paged call with shared_prefix_pages: its shared prefix read once for the batch (a prefix pass,
  // the other fields' suffix pass, a merge; workspace_bytes holds both passes' results).
  bool cascade = false;
};

// The buffers of one run of a prepared call (AttentionSpec, vkattn/attention_spec.hpp). Each tensor
// is at its spec's layout (offset and strides in elements from buffer->offset()); the optional ones
// are given exactly when the spec has them (the per-head ones, base PerHead, with the spec's), and a
// source's own ones exactly for that source.
struct AttentionBuffers : PerHead<const Buffer*> {
  const Buffer* q = nullptr;
  const Buffer* k = nullptr;  // paged: the K cache (named k_cache in messages)
  const Buffer* v = nullptr;  // paged: the V cache (v_cache)
  const Buffer* out = nullptr;
  const Buffer* mask = nullptr;   // with spec.mask
  BufferSlice lse;                // with spec.lse
  BufferSlice kv_lengths;         // with spec.kv_lengths
  BufferSlice weights;            // with spec.weights
  // Paged: int32 block_table (batch, max_pages) and cache_lens (batch), and the tokens to append
  // (with PagedKv::k_new and v_new).
  BufferSlice block_table;
  BufferSlice cache_lens;
  const Buffer* k_new = nullptr;
  const Buffer* v_new = nullptr;
  // Packed: int32 (batch + 1) offsets of each sequence's queries and keys.
  BufferSlice cu_seqlens_q;
  BufferSlice cu_seqlens_k;

  static AttentionBuffers of(const AttentionArgs& args);
};

class PreparedAttention;
namespace detail {
// Records a prepared call with vkattn's scratch buffer (and its texel view, if any) as its workspace
// (time_attention, the layer).
void record_with_scratch(const PreparedAttention& prepared, VkCommandBuffer command_buffer,
                         const AttentionBuffers& buffers, VkBuffer scratch, VkBufferView scratch_texel);
}  // namespace detail

// Thrown by PreparedAttention(context, spec, plan_for) when the plan made for another device does not
// run here, or that device would refuse the call: ErrorCode::unsupported, with what does not fit.
class PlanDoesNotFit : public Error {
 public:
  explicit PlanDoesNotFit(const std::string& message) : Error(ErrorCode::unsupported, message) {}
};

// An attention call planned once and run many times: an inference runtime's decode step in every
// layer, thousands of times a second, with the same shapes. One class for every KvSource: dense,
// paged (a decode step with its append is one record()) and packed. Construction checks the spec against
// the device (throws Error as attention() would), chooses the path and the tiles, builds the
// pipelines and precomputes every dispatch: pipeline, bindings, push constants, grid. record() and
// run() then only check the buffers against the plan (given as the spec says, of this Context, large
// enough, no output sharing a byte with another argument) and record the dispatches: no planning,
// no string, no lock, no allocation. Keeps the Context's device alive while it lives. record() may
// be called from several threads at once (into different command buffers).
class PreparedAttention {
 public:
  PreparedAttention(Context& context, const AttentionSpec& spec);
  // Prepares `spec` with the plan vkattn would make on the device `plan_for` describes (its kind,
  // limits, features and subgroup sizes: a device class that is not here, e.g. a GPU's tiles), to run
  // on `context`'s device, so that another device's plan is proven on this one (what `vkattn conform
  // --profile` does). Throws PlanDoesNotFit, saying what, when `plan_for`'s device would refuse the
  // call (e.g. f16 without 16-bit storage) or when its plan needs more than this device has (16-bit
  // storage, workgroup size, shared memory, grid, binding range, alignment, lavapipe's loop limit);
  // Error as the constructor above otherwise.
  PreparedAttention(Context& context, const AttentionSpec& spec, const DeviceInfo& plan_for);
  PreparedAttention(PreparedAttention&&) noexcept;
  PreparedAttention& operator=(PreparedAttention&&) noexcept;
  PreparedAttention(const PreparedAttention&) = delete;
  PreparedAttention& operator=(const PreparedAttention&) = delete;
  ~PreparedAttention();

  const AttentionSpec& spec() const;
  const AttentionPlan& plan() const;  // how it runs (as plan_attention reports)
  uint64_t workspace_bytes() const;   // plan().workspace_bytes: what record() needs in `workspace`

  // Records the call into the caller's command buffer (in the recording state), with no submit, as
  // record_attention() does: the caller orders the writes of the inputs before it and the reads of
  // the outputs after it with its own barriers (shader-write / shader-read, compute stage).
  // `workspace` must hold workspace_bytes() bytes when that is non-zero, and must not be used by
  // other work until the command buffer has completed. A call with key lengths whose keys are split
  // keeps there the list of each sequence's parts and the split dispatch's grid, read by
  // vkCmdDispatchIndirect: an application's buffer given as the workspace (Buffer::wrap) needs
  // VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT as well as STORAGE_BUFFER. Throws Error (records nothing)
  // when a buffer does not fit the plan.
  void record(VkCommandBuffer command_buffer, const AttentionBuffers& buffers, BufferSlice workspace = {}) const;

  // Runs the call and waits for it, with the Context's own scratch as the workspace.
  void run(const AttentionBuffers& buffers) const;

 private:
  friend void detail::record_with_scratch(const PreparedAttention&, VkCommandBuffer, const AttentionBuffers&, VkBuffer, VkBufferView);
  friend void attention(Context&, const AttentionSpec&, const AttentionBuffers&);
  friend void record_attention(Context&, VkCommandBuffer, const AttentionArgs&, BufferSlice);
  struct Impl;
  const Impl& impl() const;  // throws on a moved-from PreparedAttention
  std::unique_ptr<Impl> impl_;
};

// Checks the arguments and the device limits; throws Error. Dispatches nothing.
AttentionPlan plan_attention(const Context& context, const AttentionArgs& args);

// Runs a call of any KvSource and waits for it: PreparedAttention(context, spec).run(buffers), with
// the buffers checked before any pipeline is built.
void attention(Context& context, const AttentionSpec& spec, const AttentionBuffers& buffers);

// Runs a dense call given as its arguments and waits for it. Allocates (and frees) the scratch
// itself. The same as attention(context, AttentionSpec::of(args), AttentionBuffers::of(args)).
void attention(Context& context, const AttentionArgs& args);

// Records attention into the caller's command buffer (in the recording state), with no submit.
// The caller orders the writes of q/k/v/mask/kv_lengths before it and the reads of out/lse after it
// with its own barriers (shader-write / shader-read, compute stage). `workspace` must hold
// plan_attention(...).workspace_bytes bytes when that is non-zero, and must not be used by other
// work until the command buffer has completed; an application's buffer needs the indirect usage
// too (PreparedAttention::record). Plans on every call: a caller recording the same
// shapes again and again keeps a PreparedAttention instead.
void record_attention(Context& context, VkCommandBuffer command_buffer, const AttentionArgs& args,
                      BufferSlice workspace = {});

}  // namespace vkattn
