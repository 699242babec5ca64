// Planning, checking and binding a call of any KvSource: the dense path (plan_path), a paged cache
// (plan_paged) or packed sequences (plan_varlen), behind one PlannedCall.
#include "planned_call.hpp"

#include <string>

#include "int_math.hpp"
#include "vkattn/error.hpp"

namespace vkattn::detail {
namespace {

using Source = PlannedCall::Source;

// Refuses a buffer given for an argument that the call's source does not take (a block table for a
// dense call, a mask for a paged one, ...). Its own optional arguments are checked by its check.
void refuse_foreign(Source source, const AttentionBuffers& b) {
  struct Argument {
    const char* name;
    bool given;
    Source owner;
  };
  const Argument foreign[] = {
      {"block_table", b.block_table.buffer != nullptr, Source::paged},
      {"cache_lens", b.cache_lens.buffer != nullptr, Source::paged},
      {"k_new", b.k_new != nullptr, Source::paged},
      {"v_new", b.v_new != nullptr, Source::paged},
      {"cu_seqlens_q", b.cu_seqlens_q.buffer != nullptr, Source::packed},
      {"cu_seqlens_k", b.cu_seqlens_k.buffer != nullptr, Source::packed},
      {"mask", b.mask != nullptr, Source::dense},
      {"kv_lengths", b.kv_lengths.buffer != nullptr, Source::dense},
  };
  static constexpr const char* kSourceName[] = {"dense", "paged", "packed"};
  for (const Argument& a : foreign)
    if (a.given && a.owner != source)
      throw Error(std::string(a.name) + ": given, but a " + kSourceName[int(source)] + " call takes none");
  if (source == Source::paged && b.weights.buffer)
    throw Error("weights: given, but a paged call takes none (it does not return the weights P)");
}

}  // namespace

void refuse_forward_dropout(const AttentionOptions& options) {
  if (options.dropout && options.dropout->p > 0.0f)
    throw Error(ErrorCode::unsupported, "dropout: p = " + std::to_string(options.dropout->p) +
                                            "; the multi-head layer does not apply dropout yet (attention calls do)");
}

AttentionLayouts planning_layouts(const PlannedCall& call) {
  return call.source == Source::packed ? varlen_planning_layouts(call.dense) : call.dense;
}

PlannedCall plan_call(const DeviceInfo& device, KernelVariant variant, const AttentionSpec& spec) {
  PlannedCall call;
  switch (spec.kv.index()) {
    case 0: {
      call.dense = spec.dense_layouts();
      call.planned = plan_path(device, variant, call.dense, spec.weights, spec.path);
      call.needs = needs_of(call.planned, call.dense, spec.weights);
      break;
    }
    case 1: {
      call.source = Source::paged;
      call.paged_layouts = spec.paged_layouts();
      PagedCall paged = plan_paged(device, variant, *call.paged_layouts);
      call.paged = paged.problem;
      call.dense = paged.dense;
      call.planned = std::move(paged.planned);
      break;
    }
    default: {
      call.source = Source::packed;
      call.packed_layouts = spec.packed_layouts();
      VarlenCall packed = plan_varlen(device, variant, *call.packed_layouts);
      call.packed = packed.problem;
      call.dense = packed.dense;
      call.planned = std::move(packed.planned);
      break;
    }
  }
  return call;
}

void emit_call(ContextImpl& context, CommandList& list, const PlannedCall& call) {
  if (call.source == Source::paged)
    emit_paged_attention(context, list, call.planned, call.dense, call.paged_layouts->k_new, call.paged_layouts->v_new);
  else
    emit_attention(context, list, call.planned, call.dense);
}

void check_call(const ContextImpl& context, const PlannedCall& call, const AttentionBuffers& buffers,
                const BufferSlice* workspace) {
  refuse_foreign(call.source, buffers);
  switch (call.source) {
    case Source::dense: check_call_buffers(context, call.needs, buffers, workspace); break;
    case Source::paged: check_paged_buffers(context, call, buffers, workspace); break;
    case Source::packed: check_packed_buffers(context, call, buffers, workspace); break;
  }
}

std::array<SlotBase, kPagedSlotCount> slots_of(const PlannedCall& call, const AttentionBuffers& b, const SlotBase& workspace) {
  const auto tensor = [](const Buffer* buffer) {
    return buffer ? slot_of(*buffer) : SlotBase{};
  };
  const auto slice = [](const BufferSlice& x) {
    return x.buffer ? slot_of(*x.buffer, x.offset) : SlotBase{};
  };
  // A paged call's cache lengths and a packed call's key offsets take the key lengths' slot; its
  // block table or query offsets the block table's (the emits bind them there).
  const BufferSlice& lengths =
      call.source == Source::paged ? b.cache_lens : call.source == Source::packed ? b.cu_seqlens_k : b.kv_lengths;
  const BufferSlice& table = call.source == Source::packed ? b.cu_seqlens_q : b.block_table;
  // Every element written once, in slot order (no zeroing of the whole array first: it runs on
  // every record).
  constexpr AttentionSlots s;
  static_assert(kPagedSlotCount == 15 && s.q == 1 && s.k == 2 && s.v == 3 && s.out == 4 && s.lse == 5 &&
                s.mask == 6 && s.kv_lengths == 7 && s.weights == 8 && s.workspace == 9 &&
                s.per_head[kPerHeadTensors[0]] == 10 && s.per_head[kPerHeadTensors[1]] == 11 && s.block_table == 12 && s.k_new == 13 && s.v_new == 14);
  return {SlotBase{},       tensor(b.q),       tensor(b.k),    tensor(b.v),
          tensor(b.out),    slice(b.lse),      tensor(b.mask), slice(lengths),
          slice(b.weights), SlotBase{workspace.buffer, align_up(workspace.base, call.planned.alignment()), workspace.texel},
          tensor(b[kPerHeadTensors[0]]), tensor(b[kPerHeadTensors[1]]), slice(table),   tensor(b.k_new),
          tensor(b.v_new)};
}

}  // namespace vkattn::detail
