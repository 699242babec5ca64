#version 450
// Batched, strided GEMM with bias: C[z] = alpha * A[z]·B[z]ᵀ (+ bias), A (m, k), B (n, k), C (m, n),
// f32 accumulation whatever the storage types (element_types.glsl; one module per combination);
// products of finite values that overflow saturate to +-FLT_MAX (score.glsl).
// It is every matrix product of the library:
//   - the scores of the three-stage path, S = scale·Q·Kᵀ (A = Q, B = K, C = S in f32);
//   - its weighted sum, O = P·V (A = P in f32, B = V read transposed through its strides, skipping
//     P = 0 so that a masked key's NaN/Inf in V never reaches O);
//   - the projections of the multi-head layer, y = x·Wᵀ + b, whose C store splits heads (BHSD) and
//     whose A load for the output projection merges them (gemm_push.glsl: column blocks).
// The scores and P·V may read a paged KV cache through its block table (GEMM_FLAG_B_PAGED_*).
//
// A workgroup computes a BM x BN tile of C; each invocation a TM x TN register tile whose rows and
// columns are strided by BM/TM and BN/TN. K is walked in BK steps through shared memory. The BK-step
// body is unrolled, so on lavapipe (docs/devices.md) an invocation's loop count is about k / BK: the
// host checks that against the limit. Sums are kept per BK step, per 16 steps and overall, so a long
// k (P·V over 64k keys) does not lose f32 accuracy in one long chain of additions.

#extension GL_EXT_control_flow_attributes : enable

#include "element_types.glsl"
#include "gemm_push.glsl"
#include "score.glsl"
#include "cache_length.glsl"

layout(constant_id = SPEC_GEMM_BM) const uint BM = 32;
layout(constant_id = SPEC_GEMM_BN) const uint BN = 32;
layout(constant_id = SPEC_GEMM_BK) const uint BK = 8;
layout(constant_id = SPEC_GEMM_TM) const uint TM = 4;
layout(constant_id = SPEC_GEMM_TN) const uint TN = 4;
layout(local_size_x_id = SPEC_GEMM_WORKGROUP) in;  // (BM / TM) * (BN / TN)

layout(binding = GEMM_A_BINDING) readonly buffer ABuf { A_T a[]; };
layout(binding = GEMM_B_BINDING) readonly buffer BBuf { B_T b[]; };
layout(binding = GEMM_C_BINDING) writeonly buffer CBuf { C_T c[]; };
layout(binding = GEMM_BIAS_BINDING) readonly buffer BiasBuf { B_T bias[]; };
// B a paged cache (GEMM_FLAG_B_PAGED_*): its block table, bound where the bias goes.
layout(binding = GEMM_BIAS_BINDING) readonly buffer TableBuf { int block_table[]; };
layout(binding = GEMM_LENGTHS_BINDING) readonly buffer LengthsBuf { int cache_lengths[]; };

const uint LANES_N = BN / TN;
const uint LANES_M = BM / TM;
const uint WG = LANES_M * LANES_N;
const uint STEPS_PER_BLOCK = 16u;

shared float sA[BK * BM];  // [kk][mm]
shared float sB[BK * BN];  // [kk][nn]

// Offset of column `col` within a row (see gemm_push.glsl).
uint column(uint col, uint cblk, uint sblk, uint sc) { return (col / cblk) * sblk + (col % cblk) * sc; }

// Offset of B's key `key` in a paged cache (shader_abi.h, GEMM_FLAG_B_PAGED_*): its page's, through
// the batch's table row, clamped into [0, pages), plus its row in the page (stride `sk`).
uint paged_key(uint table_row, uint key, uint sk) {
  const int entry = block_table[table_row + key / pc.b_cblk];
  return uint(clamp(entry, 0, int(pc.pages) - 1)) * pc.b_sblk + (key % pc.b_cblk) * sk;
}

// Offset of B(row, col) from the matrix's base: strided, or a paged cache's key through the table.
uint b_element(uint table_row, uint row, uint col) {
  if ((pc.flags & GEMM_FLAG_B_PAGED_ROWS) != 0u) return paged_key(table_row, row, pc.b_sr) + col * pc.b_sc;
  if ((pc.flags & GEMM_FLAG_B_PAGED_COLS) != 0u) return row * pc.b_sr + paged_key(table_row, col, pc.b_sc);
  return row * pc.b_sr + column(col, pc.b_cblk, pc.b_sblk, pc.b_sc);
}

// A[row]·B[col] again with every operand scaled by DOWN (score.glsl), for a sum that came out NaN
// or Inf: an overflow of finite values then gives the exact product, saturated, instead of Inf or
// NaN. Eight k per iteration: on lavapipe the 16 elements of a register tile may all take this
// path, 2k iterations, which the caller keeps within the loop limit (see its condition).
float rescaled_dot(uint a_row, uint b_base, uint table_row, uint b_row) {
  float sum = 0.0;
  for (uint k0 = 0u; k0 < pc.k; k0 += 8u) {
    [[unroll]] for (uint kk = 0u; kk < 8u; ++kk) {
      const uint col = k0 + kk;
      if (col < pc.k) {
        const float av = A_to_f32(a[a_row + column(col, pc.a_cblk, pc.a_sblk, pc.a_sc)]);
        const float bv = B_to_f32(b[b_base + b_element(table_row, b_row, col)]);
        sum = fma(av * DOWN, bv * DOWN, sum);
      }
    }
  }
  return sum;
}

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uint tx = tid % LANES_N, ty = tid / LANES_N;
  const uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
  const uint z = gl_WorkGroupID.z;
  const uint bz = z / pc.heads, h = z % pc.heads;
  const uint a_base = pc.a_off + bz * pc.a_sb + h * pc.a_sh;
  const bool paged_rows = (pc.flags & GEMM_FLAG_B_PAGED_ROWS) != 0u, paged_cols = (pc.flags & GEMM_FLAG_B_PAGED_COLS) != 0u;
  const uint b_base = pc.b_off + (paged_rows || paged_cols ? 0u : bz * pc.b_sb) + ((pc.head_base + h) / pc.group) * pc.b_sh;
  const uint c_base = pc.c_off + bz * pc.c_sb + h * pc.c_sh;
  const bool skip_zero = (pc.flags & GEMM_FLAG_SKIP_ZERO_A) != 0u;
  const uint table_row = pc.bias_off + bz * pc.b_sb;  // a paged B's table row for this batch
  // A paged B's keys for this batch (shader_abi.h): the scores' column tiles past them are not
  // computed, and P·V's sum stops there (the weights past them are 0). Uniform in the workgroup,
  // before any barrier.
  uint keys = paged_rows ? pc.n : pc.k;
  if (paged_rows || paged_cols) {
    const uint appended = pc.flags >> GEMM_FLAGS_APPENDED_SHIFT;
    keys = clamped_cache_length(cache_lengths[pc.lens_off + bz], keys, appended) + appended;
  }
  if (paged_rows && n0 >= keys) return;
  const uint k_end = paged_cols ? keys : pc.k;

  float acc[TM][TN], block[TM][TN];
  [[unroll]] for (uint tm = 0u; tm < TM; ++tm)
    [[unroll]] for (uint tn = 0u; tn < TN; ++tn) acc[tm][tn] = block[tm][tn] = 0.0;

  uint step = 0u;
  for (uint k0 = 0u; k0 < k_end; k0 += BK) {
    barrier();
    // Consecutive invocations load consecutive k: the contiguous dimension of Q, K, P and weights.
    [[unroll]] for (uint t = 0u; t < (BM * BK + WG - 1u) / WG; ++t) {
      const uint e = t * WG + tid;
      if (e < BM * BK) {
        const uint mm = e / BK, kk = e % BK, row = m0 + mm, col = k0 + kk;
        float value = 0.0;
        if (row < pc.m && col < k_end) value = A_to_f32(a[a_base + row * pc.a_sr + column(col, pc.a_cblk, pc.a_sblk, pc.a_sc)]);
        sA[kk * BM + mm] = value;
      }
    }
    [[unroll]] for (uint t = 0u; t < (BN * BK + WG - 1u) / WG; ++t) {
      const uint e = t * WG + tid;
      if (e < BN * BK) {
        const uint nn = e / BK, kk = e % BK, row = n0 + nn, col = k0 + kk;
        float value = 0.0;
        if (row < pc.n && col < k_end) value = B_to_f32(b[b_base + b_element(table_row, row, col)]);
        sB[kk * BN + nn] = value;
      }
    }
    barrier();

    float sum[TM][TN];
    [[unroll]] for (uint tm = 0u; tm < TM; ++tm)
      [[unroll]] for (uint tn = 0u; tn < TN; ++tn) sum[tm][tn] = 0.0;
    [[unroll]] for (uint kk = 0u; kk < BK; ++kk) {
      float av[TM], bv[TN];
      [[unroll]] for (uint tm = 0u; tm < TM; ++tm) av[tm] = sA[kk * BM + ty + tm * LANES_M];
      [[unroll]] for (uint tn = 0u; tn < TN; ++tn) bv[tn] = sB[kk * BN + tx + tn * LANES_N];
      [[unroll]] for (uint tm = 0u; tm < TM; ++tm) {
        // A select, not a branch and not a multiply by 0: 0 * NaN would be NaN.
        const bool use = !skip_zero || av[tm] != 0.0;
        [[unroll]] for (uint tn = 0u; tn < TN; ++tn) sum[tm][tn] = use ? fma(av[tm], bv[tn], sum[tm][tn]) : sum[tm][tn];
      }
    }
    [[unroll]] for (uint tm = 0u; tm < TM; ++tm)
      [[unroll]] for (uint tn = 0u; tn < TN; ++tn) block[tm][tn] += sum[tm][tn];
    if (++step == STEPS_PER_BLOCK) {
      step = 0u;
      [[unroll]] for (uint tm = 0u; tm < TM; ++tm)
        [[unroll]] for (uint tn = 0u; tn < TN; ++tn) {
          acc[tm][tn] += block[tm][tn];
          block[tm][tn] = 0.0;
        }
    }
  }

  const bool with_bias = (pc.flags & GEMM_FLAG_BIAS) != 0u;
  [[unroll]] for (uint tm = 0u; tm < TM; ++tm) {
    const uint row = m0 + ty + tm * LANES_M;
    if (row >= pc.m) continue;
    [[unroll]] for (uint tn = 0u; tn < TN; ++tn) {
      const uint col = n0 + tx + tn * LANES_N;
      if (col >= pc.n) continue;
      const float dot_ab = acc[tm][tn] + block[tm][tn];
      float value = scale_dot(dot_ab, pc.alpha);
      // Recomputed where it may be an overflow. Not for P·V (skip_zero): there |O| <= max|V| cannot
      // overflow, and a NaN / Inf in V, which propagates anyway, would cost seq_k more iterations.
      // Not past k = 16384 (2k + k / BK iterations stay within lavapipe's limit); scores have
      // k = dim_qk, far below.
      if ((isinf(dot_ab) || isnan(dot_ab)) && !skip_zero && pc.k <= 16384u)
        value = scale_rescaled_dot(rescaled_dot(a_base + row * pc.a_sr, b_base, table_row, col), pc.alpha);
      else if (isinf(dot_ab) || isnan(dot_ab))
        value = dot_ab * pc.alpha;  // as before: non-finite propagates
      if (with_bias) value = add_bias(value, B_to_f32(bias[pc.bias_off + col]));
      c[c_base + row * pc.c_sr + column(col, pc.c_cblk, pc.c_sblk, pc.c_sc)] = C_from_f32(value);
    }
  }
}
