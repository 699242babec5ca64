// Push constants of attention_combine.comp. Mirrored by host/attention_push.hpp (CombinePush).
#ifndef VKATTN_COMBINE_PUSH_GLSL
#define VKATTN_COMBINE_PUSH_GLSL

layout(push_constant) uniform CombinePush {
  uint splits, rows, heads, seq_q;      // rows = batch * heads * range_rows: the range's partial rows
  uint o_sb, o_sh, o_ss, o_off;
  uint lse_off, write_lse;
  uint row_base, range_rows;            // the range's first query row; its query rows per (batch, head)
} pc;

#endif
