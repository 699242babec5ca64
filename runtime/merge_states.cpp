// Merging attention states (vkattn/merge_states.hpp): per range of query rows, each part's rows
// gathered into the split-KV combine's partials (merge_states_gather.comp), then the combine
// (attention_combine.comp) merges them as it merges a split call's splits. Ranges only where every
// part's f32 rows would not fit one binding.
#include "vkattn/merge_states.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <string>
#include <vector>

#include "attention_record.hpp"
#include "call_buffers.hpp"
#include "command_list.hpp"
#include "context_impl.hpp"
#include "int_math.hpp"
#include "pipelines.hpp"
#include "shader_abi.hpp"
#include "vkattn/error.hpp"

namespace vkattn {
namespace detail {
namespace {

constexpr uint32_t u32(int64_t v) { return static_cast<uint32_t>(v); }
std::string str(uint64_t v) { return std::to_string(v); }

// The list's slots: vkattn's workspace (slot 1, below 32: own_slot), the outputs, then each part's O
// and LSE.
struct MergeSlots {
  static constexpr uint32_t workspace = 1, out = 2, lse = 3;
  static constexpr uint32_t part_o(int64_t i) { return u32(4 + 2 * i); }
  static constexpr uint32_t part_lse(int64_t i) { return u32(5 + 2 * i); }
  static constexpr std::size_t count = 4 + 2 * kMaxMergeParts;
};

struct MergePlan {
  MergeStatesSpec spec;
  int64_t rows = 0;  // batch * heads * seq
  int64_t range_rows = 0;  // query rows per (batch, head) of one range
  uint32_t ranges = 0;
  uint64_t alignment = 16;
  uint64_t partial_o_bytes = 0, partial_lse_offset = 0, workspace_bytes = 0;
  uint32_t gather_workgroup = 64, combine_workgroup = 64;
  std::vector<std::string> o_names, lse_names;  // "part_o[i]", "part_lse[i]": the checks' names
};

MergePlan plan_merge(const DeviceInfo& device, const MergeStatesSpec& spec) {
  check_merge_states(spec);
  const TensorLayout& a = spec.part;
  if (a.dtype != DType::f32 && !device.storage_16bit)
    throw unsupported(std::string("dtype: ") + to_string(a.dtype) + " needs storageBuffer16BitAccess, which " + device.name +
                      " does not offer (or it was not enabled on the adopted device)");
  MergePlan plan;
  plan.spec = spec;
  plan.alignment = std::max<uint64_t>(device.min_storage_buffer_offset_alignment, 16);
  plan.rows = a.batch * a.heads * a.seq;
  // Ranges: as many query rows of every (batch, head) as keep every part's f32 rows (and their LSE
  // pairs) within one binding, and the combine's rows within its grid.
  const uint64_t range = device.max_storage_buffer_range - plan.alignment;
  const uint64_t per_row = uint64_t(spec.parts) * uint64_t(a.batch * a.heads) * uint64_t(a.dim) * 4;
  const uint64_t grid_rows = uint64_t(device.max_workgroup_count[0]) * device.max_workgroup_count[1];
  plan.range_rows = int64_t(std::min<uint64_t>(
      {uint64_t(a.seq), range / per_row, grid_rows / uint64_t(a.batch * a.heads)}));
  if (plan.range_rows < 1)
    throw unsupported("merge: one query row of every part's " + str(uint64_t(a.batch * a.heads)) + " (batch, head) rows of " +
                      str(uint64_t(a.dim)) + " f32 values spans more than one binding (" +
                      str(device.max_storage_buffer_range) + " bytes) of " + device.name + "; merge fewer parts at a time");
  plan.ranges = u32(int64_t(ceil_div(uint64_t(a.seq), uint64_t(plan.range_rows))));
  const uint64_t range_rows_all = uint64_t(spec.parts) * uint64_t(a.batch * a.heads * plan.range_rows);
  plan.partial_o_bytes = range_rows_all * uint64_t(a.dim) * 4;
  plan.partial_lse_offset = align_up(plan.partial_o_bytes, plan.alignment);
  plan.workspace_bytes = plan.partial_lse_offset + range_rows_all * 8;
  plan.combine_workgroup = device.is_cpu() ? 64u : std::bit_floor(std::min<uint32_t>(256u, device.max_workgroup_invocations));
  plan.gather_workgroup = std::min<uint32_t>(64, device.max_workgroup_invocations);
  for (int64_t i = 0; i < spec.parts; ++i) {
    plan.o_names.push_back("part_o[" + std::to_string(i) + "]");
    plan.lse_names.push_back("part_lse[" + std::to_string(i) + "]");
  }
  return plan;
}

Binding tensor_binding(uint32_t slot, const TensorLayout& t) {
  const uint64_t esize = dtype_size(t.dtype);
  return Binding{slot, uint64_t(t.offset) * esize, esize, uint64_t(t.required_elements() - t.offset)};
}

void emit_merge(ContextImpl& c, CommandList& list, const MergePlan& plan) {
  const MergeStatesSpec& spec = plan.spec;
  const TensorLayout &a = spec.part, &o = spec.out;
  const uint64_t lse_values = uint64_t(plan.rows);
  list.own_slot(MergeSlots::workspace);
  for (int64_t row_base = 0; row_base < a.seq; row_base += plan.range_rows) {
    const int64_t range_rows = std::min(plan.range_rows, a.seq - row_base);
    const uint64_t rows = uint64_t(a.batch * a.heads * range_rows);
    // The workspace's partials may still be read by the last range's combine (or the last run's).
    list.barrier_between_dispatches();
    for (int64_t part = 0; part < spec.parts; ++part) {
      MergePush push{};
      push.batch = u32(a.batch), push.heads = u32(a.heads), push.seq = u32(a.seq), push.dim = u32(a.dim);
      push.row_base = u32(row_base), push.range_rows = u32(range_rows);
      push.o_sb = u32(a.stride_batch), push.o_sh = u32(a.stride_head), push.o_ss = u32(a.stride_seq);
      Dispatch d;
      d.use(c.pipelines->layout(KernelKind::merge_gather));
      d.pipeline = c.pipelines->get(merge_gather_pipeline(a.dtype, plan.gather_workgroup));
      d.bind(MERGE_PART_O_BINDING, tensor_binding(MergeSlots::part_o(part), a), offsetof(MergePush, o_off));
      d.bind(MERGE_PART_LSE_BINDING, Binding{MergeSlots::part_lse(part), 0, 4, lse_values}, offsetof(MergePush, lse_off));
      const uint64_t first = uint64_t(part) * rows;
      d.bind(MERGE_PARTIAL_O_BINDING, Binding{MergeSlots::workspace, first * uint64_t(a.dim) * 4, 4, rows * uint64_t(a.dim)},
             offsetof(MergePush, partial_off));
      d.bind(MERGE_PARTIAL_LSE_BINDING, Binding{MergeSlots::workspace, plan.partial_lse_offset + first * 8, 4, rows * 2},
             offsetof(MergePush, partial_off) + 2);
      d.set_push(push);
      const uint64_t groups = ceil_div(rows * uint64_t(a.dim), plan.gather_workgroup);
      d.groups = {u32(int64_t(std::min<uint64_t>(groups, c.info.max_workgroup_count[0]))), 1, 1};
      list.dispatch(d);
    }
    list.barrier_between_dispatches();

    CombinePush push{};
    push.splits = u32(spec.parts);
    push.rows = u32(int64_t(rows));
    push.heads = u32(a.heads);
    push.seq_q = u32(a.seq);
    push.o_sb = u32(o.stride_batch), push.o_sh = u32(o.stride_head), push.o_ss = u32(o.stride_seq);
    push.write_lse = spec.lse ? 1u : 0u;
    push.row_base = u32(row_base);
    push.range_rows = u32(range_rows);
    push.max_rows = 0xffffffffu;
    Dispatch d;
    d.use(c.pipelines->layout(KernelKind::combine));
    d.pipeline = c.pipelines->get(combine_pipeline(a.dtype, u32(a.dim), plan.combine_workgroup, ModifierConstants{}));
    const uint64_t all = uint64_t(spec.parts) * rows;
    d.bind(COMBINE_PARTIAL_O_BINDING, Binding{MergeSlots::workspace, 0, 4, all * uint64_t(a.dim)});
    d.bind(COMBINE_PARTIAL_LSE_BINDING, Binding{MergeSlots::workspace, plan.partial_lse_offset, 4, all * 2});
    d.bind(COMBINE_O_BINDING, tensor_binding(MergeSlots::out, o), offsetof(CombinePush, o_off));
    d.bind(COMBINE_LSE_BINDING, spec.lse ? Binding{MergeSlots::lse, 0, 4, lse_values} : kPlaceholder,
           offsetof(CombinePush, lse_off));
    d.set_push(push);
    const uint64_t gx = std::min<uint64_t>(rows, c.info.max_workgroup_count[0]);
    d.groups = {u32(int64_t(gx)), u32(int64_t(ceil_div(rows, gx))), 1};
    list.dispatch(d);
  }
}

}  // namespace
}  // namespace detail

struct PreparedMergeStates::Impl {
  std::shared_ptr<detail::ContextImpl> context;
  detail::MergePlan plan;
  detail::CommandList list;

  // Every buffer as the spec says (Error naming it, nothing recorded): one O and one LSE per part,
  // each holding what its layout reaches; the outputs sharing no byte with anything else.
  void check(const MergeStatesBuffers& b, const BufferSlice* workspace) const {
    using detail::BufferExtent;
    const MergeStatesSpec& spec = plan.spec;
    const std::size_t parts = std::size_t(spec.parts);
    if (b.part_o.size() != parts || b.part_lse.size() != parts)
      throw Error("part_o, part_lse: " + std::to_string(b.part_o.size()) + " and " + std::to_string(b.part_lse.size()) +
                  " buffers given; the merge was prepared for " + std::to_string(parts) + " parts (one of each per part)");
    std::array<BufferExtent, 2 * kMaxMergeParts + 3> extents;
    std::size_t n = 0;
    const auto tensor = [&](const char* name, const Buffer* buffer, const TensorLayout& t, bool output) {
      const uint64_t esize = dtype_size(t.dtype);
      detail::check_binding(name, buffer, 0, esize, uint64_t(t.required_elements()));
      extents[n++] = {name, buffer, buffer->offset() + uint64_t(t.offset) * esize,
                      buffer->offset() + uint64_t(t.required_elements()) * esize, output};
    };
    const auto lse = [&](const char* name, const BufferSlice& s, bool output) {
      detail::check_binding(name, s.buffer, s.offset, 4, uint64_t(plan.rows));
      const uint64_t start = s.buffer->offset() + s.offset;
      extents[n++] = {name, s.buffer, start, start + uint64_t(plan.rows) * 4, output};
    };
    for (std::size_t i = 0; i < parts; ++i) {
      tensor(plan.o_names[i].c_str(), b.part_o[i], spec.part, false);
      lse(plan.lse_names[i].c_str(), b.part_lse[i], false);
    }
    tensor("out", b.out, spec.out, true);
    if (detail::BufferChecks::optional("lse", b.lse.buffer != nullptr, spec.lse)) lse("lse", b.lse, true);
    if (workspace) {
      if (!workspace->buffer) throw Error("workspace: the merge needs " + std::to_string(plan.workspace_bytes) + " bytes; none given");
      detail::check_binding("workspace", workspace->buffer, workspace->offset, 1, plan.workspace_bytes + plan.alignment);
      const uint64_t start = workspace->buffer->offset() + workspace->offset;
      extents[n++] = {"workspace", workspace->buffer, start, start + plan.workspace_bytes + plan.alignment, true};
    }
    detail::check_extents(*context, std::span(extents.data(), n));
  }

  // Plans `spec` on `context`; emit() then builds the pipelines and the list.
  static std::unique_ptr<Impl> make(Context& context, const MergeStatesSpec& spec) {
    detail::ContextImpl& c = detail::impl_of(context);
    c.check_usable();
    auto impl = std::make_unique<Impl>();
    impl->context = detail::shared_impl_of(context);
    impl->plan = detail::plan_merge(c.info, spec);
    impl->list = detail::CommandList(impl->plan.alignment);
    return impl;
  }
  void emit() { detail::emit_merge(*context, list, plan); }
  void run(const MergeStatesBuffers& buffers) const {
    context->submit_with_scratch(plan.workspace_bytes + plan.alignment, [&](VkCommandBuffer cmd, VkBuffer scratch) {
      detail::barrier_before_attention(cmd);
      replay(cmd, buffers, scratch, 0);
      detail::barrier_after_attention(cmd);
    });
  }

  void replay(VkCommandBuffer cmd, const MergeStatesBuffers& b, VkBuffer workspace, uint64_t workspace_offset) const {
    using Slots = detail::MergeSlots;
    std::array<detail::SlotBase, Slots::count> slots{};
    slots[Slots::workspace] = {workspace, detail::align_up(workspace_offset, plan.alignment)};
    slots[Slots::out] = detail::slot_of(*b.out);
    if (b.lse.buffer) slots[Slots::lse] = detail::slot_of(*b.lse.buffer, b.lse.offset);
    for (std::size_t i = 0; i < b.part_o.size(); ++i) {
      slots[Slots::part_o(int64_t(i))] = detail::slot_of(*b.part_o[i]);
      slots[Slots::part_lse(int64_t(i))] = detail::slot_of(*b.part_lse[i].buffer, b.part_lse[i].offset);
    }
    list.replay(*context, cmd, std::span(slots.data(), Slots::part_o(plan.spec.parts)));
  }
};

PreparedMergeStates::PreparedMergeStates(Context& context, const MergeStatesSpec& spec) : impl_(Impl::make(context, spec)) {
  impl_->emit();
}
PreparedMergeStates::PreparedMergeStates(PreparedMergeStates&&) noexcept = default;
PreparedMergeStates& PreparedMergeStates::operator=(PreparedMergeStates&&) noexcept = default;
PreparedMergeStates::~PreparedMergeStates() = default;

const PreparedMergeStates::Impl& PreparedMergeStates::impl() const {
  if (!impl_) throw Error("PreparedMergeStates: used after being moved from");
  return *impl_;
}
const MergeStatesSpec& PreparedMergeStates::spec() const { return impl().plan.spec; }
uint64_t PreparedMergeStates::workspace_bytes() const { return impl().plan.workspace_bytes + impl().plan.alignment; }
uint32_t PreparedMergeStates::ranges() const { return impl().plan.ranges; }

void PreparedMergeStates::record(VkCommandBuffer cmd, const MergeStatesBuffers& buffers, BufferSlice workspace) const {
  const Impl& p = impl();
  p.context->check_usable();
  if (cmd == VK_NULL_HANDLE) throw Error("record: command_buffer is VK_NULL_HANDLE");
  p.check(buffers, &workspace);
  p.replay(cmd, buffers, workspace.buffer->handle(), workspace.buffer->offset() + workspace.offset);
}

void PreparedMergeStates::run(const MergeStatesBuffers& buffers) const {
  const Impl& p = impl();
  p.check(buffers, nullptr);
  p.run(buffers);
}

void merge_attention_states(Context& context, const MergeStatesSpec& spec, const MergeStatesBuffers& buffers) {
  const std::unique_ptr<PreparedMergeStates::Impl> call = PreparedMergeStates::Impl::make(context, spec);
  call->check(buffers, nullptr);
  call->emit();
  call->run(buffers);
}

}  // namespace vkattn
