#version 450
// Cascade attention, step 4 (runtime/paged_cascade.cpp): each query row's result over the shared
// prefix (the prefix pass, whose rows are a KV head's group of every sequence) and over its own pages
// (the suffix pass, the call's rows) merged by their log-sum-exps, as the split-KV combine merges
// splits: O = (w_p O_p + w_s O_s) / (w_p + w_s), w = exp(LSE - max), LSE = max + log(w_p + w_s). A part
// of no visible key (LSE -inf: an empty suffix) weighs 0; both: O = 0, LSE = -inf. O_p and O_s are
// used as read, so a NaN in either (a NaN in V) reaches O, as it would without the cascade. The grid
// covers the rows x dim_v elements, each invocation striding by the grid's width.
#include "storage_types.glsl"
#include "shader_abi.h"

layout(local_size_x = 64) in;
layout(push_constant) uniform CascadeMergePush { CASCADE_MERGE_PUSH_MEMBERS } pc;
layout(binding = CASCADE_MERGE_PREFIX_O_BINDING) readonly buffer PrefixO { STORAGE_T prefix_o[]; };
layout(binding = CASCADE_MERGE_PREFIX_LSE_BINDING) readonly buffer PrefixLse { float prefix_lse[]; };
layout(binding = CASCADE_MERGE_SUFFIX_O_BINDING) readonly buffer SuffixO { STORAGE_T suffix_o[]; };
layout(binding = CASCADE_MERGE_SUFFIX_LSE_BINDING) readonly buffer SuffixLse { float suffix_lse[]; };
layout(binding = CASCADE_MERGE_O_BINDING) writeonly buffer OBuf { STORAGE_T o[]; };
layout(binding = CASCADE_MERGE_LSE_BINDING) writeonly buffer LseBuf { float lse[]; };

#define NEG_INF uintBitsToFloat(0xff800000u)

void main() {
  const uint elements = pc.batch * pc.heads * pc.seq_q * pc.dim_v;
  for (uint e = gl_GlobalInvocationID.x; e < elements; e += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint row = e / pc.dim_v, d = e % pc.dim_v;
    const uint i = row % pc.seq_q, bh = row / pc.seq_q, h = bh % pc.heads, b = bh / pc.heads;
    const uint g = h / pc.group, j = h % pc.group;
    const uint prefix_row = ((g * pc.batch + b) * pc.group + j) * pc.seq_q + i;
    const float lp = prefix_lse[pc.plse_off + prefix_row], ls = suffix_lse[pc.slse_off + row];
    const float m = max(lp, ls);
    const float wp = m == NEG_INF ? 0.0 : exp(lp - m), ws = m == NEG_INF ? 0.0 : exp(ls - m);
    const float sum = wp + ws;
    const float op = to_f32(prefix_o[pc.po_off + prefix_row * pc.dim_v + d]);
    const float os = to_f32(suffix_o[pc.so_off + row * pc.dim_v + d]);
    const float value = sum > 0.0 ? (wp * op + ws * os) / sum : 0.0;
    o[pc.o_off + b * pc.o_sb + h * pc.o_sh + i * pc.o_ss + d] = from_f32(value);
    if (d == 0u && pc.write_lse != 0u) lse[pc.lse_off + row] = sum > 0.0 ? m + log(sum) : NEG_INF;
  }
}
