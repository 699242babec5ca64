// Packed variable-length attention (vkattn/varlen_attention.hpp): the fused kernels on the packed
// tensors, each workgroup confined to one sequence by cu_seqlens, or the three-stage path with each
// row's softmax confined so (plan_varlen). A prepared call keeps its command list; record() checks
// the buffers and replays it.
#include "vkattn/varlen_attention.hpp"

#include <array>
#include <string>
#include <tuple>

#include "attention_record.hpp"
#include "call_buffers.hpp"
#include "command_list.hpp"
#include "context_impl.hpp"
#include "prepared_call.hpp"
#include "int_math.hpp"
#include "kv_storage.hpp"
#include "varlen_plan.hpp"
#include "vkattn/error.hpp"

namespace vkattn {
namespace {

std::string str(uint64_t v) { return std::to_string(v); }

// The command-list slots of a varlen call: the dense call's, cu_seqlens_q where a paged call's block
// table is and cu_seqlens_k where the key lengths are (the fused and three-stage emits bind them there).
constexpr uint32_t kVarlenSlotCount = 13;

}  // namespace

struct PreparedVarlenAttention::Impl {
  std::shared_ptr<detail::ContextImpl> context;
  VarlenAttentionLayouts layouts;
  detail::VarlenCall call;
  AttentionPlan report;
  detail::CommandList list;

  uint64_t workspace_bytes() const { return call.planned.workspace_bytes(); }

  // Throws Error naming the argument unless every buffer is given as the layouts say, valid, of this
  // Context and large enough, and no output (O, LSE, the workspace) shares a byte with another
  // argument. `workspace` null: the Context's scratch.
  void check(const VarlenAttentionBuffers& b, const BufferSlice* workspace) const {
    const AttentionProblem& p = call.planned.problem();
    const uint64_t esize = dtype_size(p.dtype);
    std::array<detail::BufferExtent, 11> extents{};
    std::size_t n = 0;
    const auto add = [&](const char* name, const Buffer* buffer, uint64_t byte_offset, uint64_t element_size,
                         uint64_t first_element, uint64_t elements, bool output) {
      detail::check_binding(name, buffer, byte_offset, element_size, elements);
      const uint64_t base = buffer->offset() + byte_offset;
      extents[n++] = {name, buffer, base + first_element * element_size, base + elements * element_size, output};
    };
    const auto tensor = [&](const char* name, const Buffer* buffer, const TensorLayout& t, bool output) {
      add(name, buffer, 0, esize, uint64_t(t.offset), uint64_t(t.required_elements()), output);
    };
    const auto optional = [&](const char* name, bool given, bool expected) {
      if (given && !expected) throw Error(std::string(name) + ": given, but the call was prepared without it");
      if (!given && expected) throw Error(std::string(name) + ": the call was prepared with it, but none was given");
      return expected;
    };
    const uint64_t offsets = uint64_t(call.problem.batch) + 1;
    tensor("q", b.q, layouts.q, false);
    // (K and V as bound: q8_0 in 16-bit units.)
    for (const auto& [name, buffer, t] : {std::tuple{"k", b.k, &layouts.k}, std::tuple{"v", b.v, &layouts.v}}) {
      const detail::Binding bound = detail::kv_binding(0, p.dtype, p.kv_quant, 0, t->required_elements());
      add(name, buffer, 0, bound.element_size, detail::kv_bytes(p.dtype, p.kv_quant, t->offset) / bound.element_size,
          bound.elements, false);
    }
    tensor("out", b.out, layouts.out, true);
    add("cu_seqlens_q", b.cu_seqlens_q.buffer, b.cu_seqlens_q.offset, 4, 0, offsets, false);
    add("cu_seqlens_k", b.cu_seqlens_k.buffer, b.cu_seqlens_k.offset, 4, 0, offsets, false);
    if (optional("lse", b.lse.buffer != nullptr, layouts.has_lse))
      add("lse", b.lse.buffer, b.lse.offset, 4, 0, uint64_t(p.heads * p.seq_q), true);
    if (optional("weights", b.weights.buffer != nullptr, layouts.weights))
      add("weights", b.weights.buffer, b.weights.offset, 4, 0, uint64_t(p.heads * p.seq_q) * uint64_t(p.seq_k), true);
    const auto head_values = [&](const char* name, const Buffer* buffer, const std::optional<HeadValuesLayout>& l) {
      if (optional(name, buffer != nullptr, l.has_value()))
        add(name, buffer, 0, 4, uint64_t(l->offset), uint64_t(l->required_elements()), false);
    };
    head_values("alibi", b.alibi, layouts.alibi);
    head_values("sinks", b.sinks, layouts.sinks);
    if (workspace && workspace_bytes() > 0) {
      if (!workspace->buffer)
        throw Error("workspace: the call needs " + str(workspace_bytes()) + " bytes for its " +
                    (call.planned.fused ? "split-KV partials" : "scores") + " (workspace_bytes()), but none was given");
      add("workspace", workspace->buffer, workspace->offset, 1, 0, workspace_bytes(), true);
    }
    detail::check_extents(*context, std::span(extents.data(), n));
  }

  void replay(VkCommandBuffer cmd, const VarlenAttentionBuffers& b, VkBuffer workspace, uint64_t workspace_offset) const {
    const auto tensor = [](const Buffer* buffer) {
      return buffer ? detail::SlotBase{buffer->handle(), buffer->offset()} : detail::SlotBase{};
    };
    const auto slice = [](const BufferSlice& x) {
      return x.buffer ? detail::SlotBase{x.buffer->handle(), x.buffer->offset() + x.offset} : detail::SlotBase{};
    };
    constexpr detail::AttentionSlots s;
    static_assert(kVarlenSlotCount == 13 && s.q == 1 && s.k == 2 && s.v == 3 && s.out == 4 && s.lse == 5 &&
                  s.kv_lengths == 7 && s.weights == 8 && s.workspace == 9 && s.alibi == 10 && s.sinks == 11 &&
                  s.block_table == 12);
    const std::array<detail::SlotBase, kVarlenSlotCount> slots = {
        detail::SlotBase{}, tensor(b.q),         tensor(b.k),     tensor(b.v),
        tensor(b.out),      slice(b.lse),        detail::SlotBase{}, slice(b.cu_seqlens_k),
        slice(b.weights),   detail::SlotBase{workspace, detail::align_up(workspace_offset, call.planned.alignment())},
        tensor(b.alibi),    tensor(b.sinks),     slice(b.cu_seqlens_q)};
    list.replay(*context, cmd, slots);
  }
};

PreparedVarlenAttention::PreparedVarlenAttention(Context& context, const VarlenAttentionLayouts& layouts)
    : impl_(std::make_unique<Impl>()) {
  detail::ContextImpl& c = detail::impl_of(context);
  c.check_usable();
  Impl& p = *impl_;
  p.context = detail::shared_impl_of(context);
  p.layouts = layouts;
  p.call = detail::plan_varlen(c.info, c.kernel, layouts);
  p.report = detail::report_of(p.call.planned);
  p.list = detail::CommandList(p.call.planned.alignment());
  detail::emit_attention(c, p.list, p.call.planned, p.call.dense);
}

PreparedVarlenAttention::PreparedVarlenAttention(PreparedVarlenAttention&&) noexcept = default;
PreparedVarlenAttention& PreparedVarlenAttention::operator=(PreparedVarlenAttention&&) noexcept = default;
PreparedVarlenAttention::~PreparedVarlenAttention() = default;

const PreparedVarlenAttention::Impl& PreparedVarlenAttention::impl() const {
  if (!impl_)
    throw Error("PreparedVarlenAttention: used after being moved from (a moved-from PreparedVarlenAttention holds no call)");
  return *impl_;
}

const VarlenAttentionLayouts& PreparedVarlenAttention::layouts() const { return impl().layouts; }
const AttentionPlan& PreparedVarlenAttention::plan() const { return impl().report; }
uint64_t PreparedVarlenAttention::workspace_bytes() const { return impl().workspace_bytes(); }

void PreparedVarlenAttention::record(VkCommandBuffer command_buffer, const VarlenAttentionBuffers& buffers, BufferSlice workspace) const {
  detail::record_prepared(impl(), command_buffer, buffers, workspace);
}

void PreparedVarlenAttention::run(const VarlenAttentionBuffers& buffers) const { detail::run_prepared(impl(), buffers); }

void varlen_attention(Context& context, const VarlenAttentionLayouts& layouts, const VarlenAttentionBuffers& buffers) {
  PreparedVarlenAttention(context, layouts).run(buffers);
}

}  // namespace vkattn
