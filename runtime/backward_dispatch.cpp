// The pieces every backward-layout dispatch is built from (backward_dispatch.hpp).
#include "backward_dispatch.hpp"

#include "attention_push.hpp"
#include "per_head_bindings.hpp"

namespace vkattn::detail {
namespace {



// Where each backward kernel reads the per-head tensors: the high halves of kv_len_off (ALiBi) and
// lse_off (sinks), as the forward kernels.
PerHead<PerHeadBinding> backward_per_head_bindings() {
  PerHead<PerHeadBinding> b;
  b.alibi = {true, BACKWARD_ALIBI_BINDING, offsetof(BackwardPush, kv_len_off) + 2};
  b.sinks = {true, BACKWARD_SINKS_BINDING, offsetof(BackwardPush, lse_off) + 2};
  return b;
}


}  // namespace

// The push constants every backward dispatch shares (split: per kernel).
BackwardPush backward_push(const BackwardCallPlan& plan) {
  const AttentionProblem& p = plan.p;
  const AttentionLayouts& l = plan.forward.dense;
  BackwardPush push{};
  push.seq_q = u32(p.seq_q);
  push.seq_k = u32(p.seq_k);
  push.heads = u32(p.heads);
  push.group = u32(p.group_size());
  push.flags = mask_flags(p.causal, l.mask);
  if (l.has_kv_lengths) push.flags |= kFlagKvLengths;
  push.scale = p.scale;
  push.q_sb = u32(l.q.stride_batch), push.q_sh = u32(l.q.stride_head), push.q_ss = u32(l.q.stride_seq);
  push.k_sb = u32(l.k.stride_batch), push.k_sh = u32(l.k.stride_head), push.k_ss = u32(l.k.stride_seq);
  push.v_sb = u32(l.v.stride_batch), push.v_sh = u32(l.v.stride_head), push.v_ss = u32(l.v.stride_seq);
  push.o_sb = u32(l.out.stride_batch), push.o_sh = u32(l.out.stride_head), push.o_ss = u32(l.out.stride_seq);
  if (l.mask) mask_strides(*l.mask, push.m_sb, push.m_sh, push.m_ss);
  if (plan.varlen) {  // the kernels' batch index is the sequence; the bounds in the mask's strides
    push.q_sb = push.k_sb = push.v_sb = push.o_sb = 0;
    push.m_sb = plan.rows_total;
    push.m_sh = plan.keys_total;
  }
  push.seed_lo = u32(int64_t(plan.seed & 0xffffffffu));
  push.seed_hi = u32(int64_t(plan.seed >> 32));
  push.dropout_offset = plan.dropout_offset;
  return push;
}

// A tensor of the call's dtype in `slot` at `t`, from its first element.
Binding tensor_binding(uint32_t slot, const TensorLayout& t) {
  const uint64_t esize = dtype_size(t.dtype);
  return Binding{slot, uint64_t(t.offset) * esize, esize, uint64_t(t.required_elements() - t.offset)};
}

// The bindings every backward kernel reads: Q, K, V, O, dO, LSE, mask, key lengths (or cu_seqlens_k),
// cu_seqlens_q, the per-head tensors and D.
void bind_inputs(Dispatch& d, const BackwardCallPlan& plan, const BackwardSlots& S) {
  const AttentionProblem& p = plan.p;
  const AttentionLayouts& l = plan.forward.dense;
  d.bind(BACKWARD_Q_BINDING, tensor_binding(S.q, l.q), low(offsetof(BackwardPush, q_off)));
  d.bind(BACKWARD_K_BINDING, tensor_binding(S.k, l.k), low(offsetof(BackwardPush, k_off)));
  d.bind(BACKWARD_V_BINDING, tensor_binding(S.v, l.v), low(offsetof(BackwardPush, v_off)));
  d.bind(BACKWARD_O_BINDING, tensor_binding(S.out, l.out), low(offsetof(BackwardPush, o_off)));
  d.bind(BACKWARD_DO_BINDING, tensor_binding(S.grad_out, l.out), high(offsetof(BackwardPush, o_off)));
  const uint64_t rows = uint64_t(p.batch) * uint64_t(p.heads) * uint64_t(p.seq_q);
  d.bind(BACKWARD_LSE_BINDING, Binding{S.lse, 0, 4, rows}, low(offsetof(BackwardPush, lse_off)));
  if (l.mask) {
    const uint64_t msize = mask_type_size(l.mask->type);
    d.bind(BACKWARD_MASK_BINDING,
           Binding{S.mask, uint64_t(l.mask->offset) * msize, msize, uint64_t(l.mask->required_elements() - l.mask->offset)},
           offsetof(BackwardPush, m_off));
  }
  if (plan.varlen) {
    d.bind(BACKWARD_KV_LENGTHS_BINDING, Binding{S.kv_lengths, 0, 4, uint64_t(plan.batches) + 1},
           low(offsetof(BackwardPush, kv_len_off)));
    d.bind(BACKWARD_CU_SEQLENS_Q_BINDING, Binding{S.cu_seqlens_q, 0, 4, uint64_t(plan.batches) + 1},
           offsetof(BackwardPush, m_off));
  } else if (l.has_kv_lengths) {
    d.bind(BACKWARD_KV_LENGTHS_BINDING, Binding{S.kv_lengths, 0, 4, uint64_t(p.batch)}, low(offsetof(BackwardPush, kv_len_off)));
  }
  const PerHead<Binding> heads = per_head_slot_bindings(S.per_head, l.per_head());
  const PerHead<PerHeadBinding> where = backward_per_head_bindings();
  for (PerHeadTensor t : kPerHeadTensors) d.bind(where[t].binding, heads[t], where[t].push_offset);
  d.bind(BACKWARD_ROWS_BINDING, Binding{S.workspace, plan.rows_offset, 4, rows});
}

// The constants of the rows kernel and, with `walk` (the dK/dV and dQ kernels), of those kernels' form.
BackwardConstants backward_constants(const ContextImpl& c, const BackwardCallPlan& plan, bool partial, bool walk) {
  BackwardConstants k;
  k.dim_qk = u32(plan.p.dim_qk);
  k.dim_v = u32(plan.p.dim_v);
  k.workgroup = plan.workgroup;
  if (walk && plan.subgroup_form) {
    k.workgroup = plan.lanes;
    k.rows = plan.rows_per_lane;
    k.required_lanes = c.info.required_subgroup_size ? plan.lanes : 0u;
  }
  if (walk && plan.tiles) {
    k.workgroup = plan.tiles->workgroup;
    k.tile_rows = plan.tiles->rows;
    k.tile_keys = plan.tiles->keys;
  }
  k.modifiers = modifier_constants(plan.p, plan.forward.dense.options);
  k.varlen = plan.varlen ? 1u : 0u;
  k.partial = partial ? 1u : 0u;
  k.dropout_threshold = plan.dropout_threshold;
  return k;
}

Dispatch backward_dispatch(ContextImpl& c, const BackwardCallPlan& plan, Shader shader, const BackwardConstants& k,
                           const BackwardPush& push, std::array<uint32_t, 3> groups, const BackwardSlots& slots) {
  Dispatch d;
  d.use(c.pipelines->layout(KernelKind::backward));
  d.pipeline = c.pipelines->get(backward_pipeline(plan.p.dtype, shader, k));
  bind_inputs(d, plan, slots);
  // D is written by the rows kernel's first pass and only read by every other dispatch.
  const uint32_t rows_bit = 1u << BACKWARD_ROWS_BINDING;
  if (shader == Shader::attention_backward_rows && k.sinks_pass == 0)
    d.reads &= ~rows_bit;
  else
    d.writes &= ~rows_bit;
  if (shader == Shader::attention_dropout_output) d.reads &= ~rows_bit;  // (it reads no D)
  d.set_push(push);
  d.groups = groups;
  return d;
}

}  // namespace vkattn::detail
