#version 450
// The GEMM of gemm.comp for CPU devices (lavapipe/llvmpipe), written to the JIT rules of docs/devices.md:
// C[z] = alpha * A[z]·B[z]ᵀ (+ bias), the same semantics, bindings and push constants as gemm.comp
// (f32 accumulation, saturation of overflowing products, skip-zero for P·V, bias, column blocks,
// GQA heads), only the work is laid out for a CPU's SIMD lanes:
//   - A workgroup is one subgroup of LANES invocations (the device's subgroup size, a specialization
//     constant the host reads from the device). It computes a BM x BN tile of C, BN = CJ x LANES:
//     lane l holds CJ / 4 quads of four consecutive columns (4l .. 4l + 3, then 4 LANES further on)
//     of all BM rows, BM x CJ f32 sums, so the lanes of one store write consecutive columns of a row
//     (one cache line, not eight), and a quad can be read (B) or written (C) as one vec4.
//   - k is walked LANES elements at a time. Lane t loads element k0 + t of each of the BM rows of A
//     and the lanes exchange them with subgroupShuffle at constant lane indices, so one load per lane
//     gives every lane LANES values of A; B's values are the lane's own columns, one load each.
//     llvmpipe runs a load lane by lane whatever its pattern (docs/devices.md), so each load must feed
//     as many multiply-adds as registers allow: per LANES k, BM + LANES x CJ loads for
//     BM x CJ x LANES multiply-adds in every lane (32 per load at 64 x 8).
//   - Where A's rows are contiguous along k (VEC_A_K), the step's BM x LANES block of A is loaded as
//     quads spread over the lanes (BM / 4 per lane at 8 lanes, not BM), and the same shuffles fetch
//     element k0 + t of row i from the lane holding its quad. Few rows (decode's 16 heads) make A's
//     loads a large share: MLA decode's scores and P·V (M = 16, f16) ran 1.45x and 1.25x faster with it.
//   - Every private array is indexed only inside [[unroll]] loops; the k loops and the write-out
//     loop over groups of rows are real loops (the JIT's time grows with unrolled code).
//   - Push constants are read once, before the loops: llvmpipe gathers a push constant read inside a
//     loop lane by lane, each time.
//   - Four elements per load where the layout allows (VEC, chosen by the host from the strides; the
//     element offsets of the bindings, known only when the call is recorded, pick this pipeline or
//     its all-scalar twin). llvmpipe's lane-by-lane load costs by the component, not the byte: four
//     16-bit elements are read as one 64-bit word, four f32 as two (element_types.glsl; 16.2 ms
//     against 12.1 for MLA decode's f16 scores with 32-bit words). A by quads along k (above), B along
//     k (its rows contiguous: the scores' K, the weights) or along n (its columns contiguous: P·V's V,
//     read transposed); C stored by quads.
//   - Sums are kept per LANES k, per 16 such steps and overall, so a long k (P·V over 64k keys) does
//     not lose f32 accuracy in one long chain of additions (as gemm.comp).
//   - The score rule (score.glsl): a sum that comes out NaN or Inf, when k <= 16384 and not for P·V
//     (skip-zero), is recomputed with every operand scaled by DOWN and saturated. Here that is a
//     second pass over k of the whole workgroup, with the same loop body, entered only when some lane
//     met such a sum; it writes only the elements that needed it (their bits in `redo`).
//   - Skip-zero (P·V: a weight of exactly 0 contributes nothing, even against NaN/Inf in V) is a
//     select per multiply-add, a quarter of P·V's time on lavapipe 22.3.6. With SKIP_BY_REDO (the
//     host's choice for short tiles, k <= 16384) the first pass multiplies and adds plainly: a sum
//     that meets 0 x Inf or 0 x NaN comes out NaN, and where none did it is the skip-zero sum. The
//     elements that came out NaN/Inf are redone by the same second pass, with the selects and
//     unscaled operands. The k loop is then compiled twice (accumulate()), which doubles its JIT.
//   - B may be a paged KV cache read through its block table (GEMM_FLAG_B_PAGED_*, shader_abi.h):
//     the scores' rows of B (keys) are looked up once per workgroup, P·V's columns once per LANES k;
//     each batch's work ends at its sequence's keys.
//   - Loops are do-while loops: llvmpipe runs a loop's body once more, masked, after its last lane
//     leaves a loop whose test comes first (a `for`): a whole step of k in every block.
//
// runtime/gemm.cpp counts the loops below against lavapipe's 65535-iteration limit
// (gemm_loop_iterations): keep the two in step.

#extension GL_EXT_control_flow_attributes : enable
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_shuffle : enable
#extension GL_KHR_shader_subgroup_vote : enable
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_EXT_samplerless_texture_functions : require  // texelFetch on a textureBuffer (GEMM_TEXEL)

#define F16_WIDEN_BY_BITS  // a CPU devices' kernel: half_floats.glsl
#include "element_types.glsl"
#include "gemm_push.glsl"
#include "score.glsl"
#include "cache_length.glsl"

layout(constant_id = SPEC_GEMM_SG_ROWS) const uint BM = 64;  // rows of C per workgroup (1, 2, 4, or a multiple of 8)
layout(constant_id = SPEC_GEMM_SG_COLS) const uint CJ = 8;   // columns of C per invocation
// The call's GEMM_FLAG_* bits (skip-zero, bias, a paged B), compiled in: llvmpipe runs both sides
// of every branch, so a flag read from the push constants would cost its code in every call. The
// host sets it equal to the flag bits of the push constants' `flags` (GEMM_FLAG_BITS), of which this
// shader reads only a paged B's appended tokens.
layout(constant_id = SPEC_GEMM_SG_FLAGS) const uint FLAGS = 0;
// GEMM_SG_VEC_* bits: which operands are read or written four elements at a time (see above).
layout(constant_id = SPEC_GEMM_SG_VEC) const uint VEC = 0;
// GEMM_SG_TEXEL_* bits: which operands are read through texel buffers (the gemm_subgroup_texel build).
layout(constant_id = SPEC_GEMM_SG_TEXEL) const uint TEXEL = 0;
layout(local_size_x_id = SPEC_GEMM_SG_WORKGROUP) in;         // LANES: the device's subgroup size

layout(binding = GEMM_A_BINDING) readonly buffer ABuf { A_T a[]; };
layout(binding = GEMM_A_BINDING) readonly buffer ABuf4 { A4_T a4[]; };  // the same binding, four elements at a time
layout(binding = GEMM_B_BINDING) readonly buffer BBuf { B_T b[]; };
layout(binding = GEMM_B_BINDING) readonly buffer BBuf4 { B4_T b4[]; };  // the same binding, four elements at a time
layout(binding = GEMM_C_BINDING) writeonly buffer CBuf { C_T c[]; };
layout(binding = GEMM_C_BINDING) writeonly buffer CBuf4 { C4_T c4[]; };
layout(binding = GEMM_BIAS_BINDING) readonly buffer BiasBuf { B_T bias[]; };
// B a paged cache (GEMM_FLAG_B_PAGED_*): its block table, bound where the bias goes.
layout(binding = GEMM_BIAS_BINDING) readonly buffer TableBuf { int block_table[]; };
layout(binding = GEMM_LENGTHS_BINDING) readonly buffer LengthsBuf { int cache_lengths[]; };

// A's and B's quads: quad q is elements 4q .. 4q + 3 counted from X_off's origin. The
// gemm_subgroup_texel build (GEMM_TEXEL) fetches those of the operands in TEXEL from uniform texel
// buffers of R32G32_UINT over the whole VkBuffer, X_off counting from its first byte. lavapipe 22.3.6
// fetches texels as the sampler's gathers, 9-12x faster than its lane-by-lane, bounds-checked
// storage-buffer loads, and B's loads were more than half of the GEMM's instructions, P·V's A (the
// f32 weights) a quarter of the rest (docs/devices.md). The host takes a texel build only where the
// operands' Buffers have such views and start on their quad grids; else the storage build.
const bool TEXEL_A = (TEXEL & GEMM_SG_TEXEL_A) != 0u;
const bool TEXEL_B = (TEXEL & GEMM_SG_TEXEL_B) != 0u;
#ifdef GEMM_TEXEL
// Vulkan's uniform texel buffers: images of Dim Buffer read without a sampler (a usamplerBuffer would
// make them sampled images, which the SPIR-V validator warns against for Dim Buffer).
layout(binding = GEMM_A_TEXEL_BINDING) uniform utextureBuffer a_texels;
layout(binding = GEMM_B_TEXEL_BINDING) uniform utextureBuffer b_texels;
// Quad q of an operand of storage type `type` (a TYPE_* constant): f32 two texels, 16-bit types one.
vec4 texel_quad(utextureBuffer texels, uint q, uint type) {
  if (type == TYPE_F32)
    return vec4(uintBitsToFloat(texelFetch(texels, int(2u * q)).xy), uintBitsToFloat(texelFetch(texels, int(2u * q + 1u)).xy));
  const uvec2 t = texelFetch(texels, int(q)).xy;
  return type == TYPE_F16 ? vec4(F16_PAIR_TO_VEC2(t.x), F16_PAIR_TO_VEC2(t.y))
                          : vec4(BF16_PAIR_TO_VEC2(t.x), BF16_PAIR_TO_VEC2(t.y));
}
#endif
vec4 load_a_quad(uint q) {
#ifdef GEMM_TEXEL
  if (TEXEL_A) return texel_quad(a_texels, q, A_TYPE);
#endif
  return A4_to_vec4(a4[q]);
}
vec4 load_b_quad(uint q) {
#ifdef GEMM_TEXEL
  if (TEXEL_B) return texel_quad(b_texels, q, B_TYPE);
#endif
  return B4_to_vec4(b4[q]);
}

const uint LANES = gl_WorkGroupSize.x;
const uint BN = CJ * LANES;
const uint RG = BM < 8u ? BM : 8u;    // rows per iteration of the write-out loop
const uint GROUPS = BM / RG;
const uint WORDS = (BM + 31u) / 32u;  // redo bits per column: one per row
const uint STEPS_PER_BLOCK = 16u;
const bool SKIP_ZERO = (FLAGS & GEMM_FLAG_SKIP_ZERO_A) != 0u;
const bool REDO_FLAG = (FLAGS & GEMM_SG_FLAG_SKIP_ZERO_BY_REDO) != 0u;  // (named: glslang's spec-constant `&&` needs named operands)
const bool SKIP_BY_REDO = SKIP_ZERO && REDO_FLAG;
const bool SELECTS_ALWAYS = SKIP_ZERO && !SKIP_BY_REDO;  // skip-zero's selects in every pass
const bool REDOES = !SKIP_ZERO || SKIP_BY_REDO;          // a second pass may redo NaN/Inf sums
const bool BIAS = (FLAGS & GEMM_FLAG_BIAS) != 0u;
const bool B_PAGED_ROWS = (FLAGS & GEMM_FLAG_B_PAGED_ROWS) != 0u;  // the scores over a paged K cache
const bool B_PAGED_COLS = (FLAGS & GEMM_FLAG_B_PAGED_COLS) != 0u;  // P·V over a paged V cache
const bool B_PAGED = B_PAGED_ROWS || B_PAGED_COLS;
const bool VEC_B_K = (VEC & GEMM_SG_VEC_B_K) != 0u;
const bool VEC_B_N = (VEC & GEMM_SG_VEC_B_N) != 0u;
const bool VEC_C = (VEC & GEMM_SG_VEC_C) != 0u;
const bool VEC_A_K = (VEC & GEMM_SG_VEC_A_K) != 0u;
// VEC_A_K: a step's A block, BM rows x LANES k, is BM x A_ROW_QUADS quads, spread over the lanes:
// lane l loads quads l, l + LANES, ... (quad q: row q / A_ROW_QUADS, elements 4 (q % A_ROW_QUADS) + 0..3).
const uint A_ROW_QUADS = LANES / 4u;
const uint A_QUAD_LOADS = VEC_A_K ? (BM * A_ROW_QUADS + LANES - 1u) / LANES : 1u;
const uint QUADS = CJ / 4u;           // quads of columns per invocation
const uint SUMS = BM * CJ;            // an invocation's sums (one named size: accumulate()'s parameter and main's array)
const uint RESCALE_MAX_K = 16384u;    // as gemm.comp: no recomputation past this k

// Offset of column `col` within a row (see gemm_push.glsl).
uint column(uint col, uint cblk, uint sblk, uint sc) { return (col / cblk) * sblk + (col % cblk) * sc; }

// Offset of B's key `key` in a paged cache (shader_abi.h, GEMM_FLAG_B_PAGED_*): its page's, through
// the table row at `table_row`, clamped into [0, pages), plus its row in the page (stride `sk`).
uint paged_key(uint table_row, uint key, uint page_size, uint page_elements, uint pages, uint sk) {
  const int entry = block_table[table_row + key / page_size];
  return uint(clamp(entry, 0, int(pages) - 1)) * page_elements + (key % page_size) * sk;
}

// C's value of a sum d: alpha x d, saturated to ±FLT_MAX where a finite d overflows (scale_dot,
// score.glsl); NaN/Inf propagate.
float scaled_sum(float d, float alpha) {
  float value = d * alpha;
  if (isinf(value) && !(isnan(d) || isinf(d))) value = sign(value) * FLT_MAX;
  return value;
}

// What one pass reads of the call, fixed before the passes (push constants are read once, in main).
struct Walk {
  uint K, k_last, lane, m0, m_read, a_base, a_cblk, a_sblk, a_sc, a_sr, b_cblk, b_sblk, b_sc, pages, table_row;
};

// One pass over k: acc[i * CJ + j] = the sum over k of A(m0 + i, k) x B(this lane's column j, k), every
// operand scaled by s, summed per LANES k, per block of steps and overall. select_zero: an A element
// of exactly 0 contributes nothing (skip-zero); else plain multiply-adds. Called with constants, so
// each call site compiles one form.
void accumulate(const bool select_zero, const float s, const Walk w, const uint a_row4[A_QUAD_LOADS], const uint a_part[A_QUAD_LOADS],
                const uint b_row[CJ], const uint b_quad[QUADS], out float acc[SUMS]) {
  const uint K = w.K, k_last = w.k_last, lane = w.lane, m0 = w.m0, M_READ = w.m_read, a_base = w.a_base;
  const uint A_CBLK = w.a_cblk, A_SBLK = w.a_sblk, A_SC = w.a_sc, A_SR = w.a_sr;
  const uint B_CBLK = w.b_cblk, B_SBLK = w.b_sblk, B_SC = w.b_sc, PAGES = w.pages, table_row = w.table_row;
  [[unroll]] for (uint e = 0u; e < BM * CJ; ++e) acc[e] = 0.0;
  uint kb = 0u;
  do {
    float blk[BM * CJ];
    [[unroll]] for (uint e = 0u; e < BM * CJ; ++e) blk[e] = 0.0;
    const uint kb_end = min(kb + STEPS_PER_BLOCK * LANES, K);
    uint k0 = kb;
    do {
      // Elements past k read element k - 1 and count as 0 (in A and B: 0 * Inf would be NaN).
      const uint kl = min(k0 + lane, k_last);
      const bool k_ok = k0 + lane < K;
      const uint a_col = column(kl, A_CBLK, A_SBLK, A_SC);
      const uint b_col = B_PAGED_ROWS ? kl * B_SC  // the blocks are the keys' pages, not k's
                         : B_PAGED_COLS ? paged_key(table_row, kl, B_CBLK, B_SBLK, PAGES, B_SC)
                                        : column(kl, B_CBLK, B_SBLK, B_SC);

      // A: lane t holds element k0 + t of each of the tile's BM rows (or, VEC_A_K, its quads).
      float al[BM];
      vec4 aq[A_QUAD_LOADS];
      if (VEC_A_K) {
        // A quad past k reads the row's last one, ceil(K / 4) - 1 (K is a multiple of 4 but for a
        // paged P·V, whose keys may end inside a quad of the row); its elements past k count as 0.
        [[unroll]] for (uint g = 0u; g < A_QUAD_LOADS; ++g) {
          const uint part = a_part[g];
          const vec4 x = load_a_quad(a_row4[g] + min(k0 / 4u + part, (max(K, 1u) + 3u) / 4u - 1u));
          [[unroll]] for (uint e = 0u; e < 4u; ++e) aq[g][e] = k0 + 4u * part + e < K ? x[e] * s : 0.0;
        }
      } else {
        [[unroll]] for (uint i = 0u; i < BM; ++i) {
          const float x = A_to_f32(a[a_base + min(m0 + i, M_READ - 1u) * A_SR + a_col]);
          al[i] = k_ok ? x * s : 0.0;
        }
      }
      // B: elements k0 .. k0 + LANES - 1 of this lane's columns.
      float bl[CJ * LANES];
      if (VEC_B_K) {
        // Rows of B contiguous along k, k % 4 == 0, rows starting at multiples of 4: a row's k0 ..
        // k0 + LANES - 1 are LANES / 4 vec4 (past k: the row's last one, counted as 0).
        [[unroll]] for (uint j = 0u; j < CJ; ++j)
          [[unroll]] for (uint q = 0u; q < LANES / 4u; ++q) {
            const vec4 x = load_b_quad(b_row[j] / 4u + min(k0 / 4u + q, K / 4u - 1u));
            [[unroll]] for (uint e = 0u; e < 4u; ++e) bl[j * LANES + q * 4u + e] = (k0 + q * 4u + e < K) ? x[e] * s : 0.0;
          }
      } else if (VEC_B_N) {
        // Columns of B contiguous (B read transposed), the offset of every k a multiple of 4: a quad
        // of columns at one k is one vec4.
        [[unroll]] for (uint t = 0u; t < LANES; ++t) {
          const uint col = subgroupShuffle(b_col, t);
          const bool ok = k0 + t < K;
          [[unroll]] for (uint q = 0u; q < QUADS; ++q) {
            const vec4 x = load_b_quad((b_quad[q] + col) / 4u);
            [[unroll]] for (uint e = 0u; e < 4u; ++e) bl[(q * 4u + e) * LANES + t] = ok ? x[e] * s : 0.0;
          }
        }
      } else {
        [[unroll]] for (uint t = 0u; t < LANES; ++t) {
          const uint col = subgroupShuffle(b_col, t);
          const bool ok = k0 + t < K;
          [[unroll]] for (uint j = 0u; j < CJ; ++j) {
            const float x = B_to_f32(b[b_row[j] + col]);
            bl[j * LANES + t] = ok ? x * s : 0.0;
          }
        }
      }
      // A fresh sum over the LANES k per element, then added to the block's.
      [[unroll]] for (uint i = 0u; i < BM; ++i) {
        float at[LANES];
        [[unroll]] for (uint t = 0u; t < LANES; ++t) {
          const uint quad = i * A_ROW_QUADS + t / 4u;  // VEC_A_K: where element k0 + t of row i is
          at[t] = VEC_A_K ? subgroupShuffle(aq[quad / LANES][t % 4u], quad % LANES) : subgroupShuffle(al[i], t);
        }
        [[unroll]] for (uint j = 0u; j < CJ; ++j) {
          float sum = 0.0;
          [[unroll]] for (uint t = 0u; t < LANES; ++t) {
            // A select, not a branch and not a multiply by 0: 0 * NaN would be NaN.
            if (select_zero) sum = at[t] != 0.0 ? fma(at[t], bl[j * LANES + t], sum) : sum;
            else sum = fma(at[t], bl[j * LANES + t], sum);
          }
          blk[i * CJ + j] += sum;
        }
      }
      k0 += LANES;
    } while (k0 < kb_end);
    [[unroll]] for (uint e = 0u; e < BM * CJ; ++e) acc[e] += blk[e];
    kb += STEPS_PER_BLOCK * LANES;
  } while (kb < K);
}

void main() {
  const uint M = pc.m, N = pc.n;
  const float ALPHA = pc.alpha;
  const uint A_CBLK = pc.a_cblk, A_SBLK = pc.a_sblk, A_SC = pc.a_sc, A_SR = pc.a_sr;
  const uint B_CBLK = pc.b_cblk, B_SBLK = pc.b_sblk, B_SC = pc.b_sc;
  const uint C_SR = pc.c_sr, BIAS_OFF = pc.bias_off, PAGES = pc.pages;

  const uint lane = gl_SubgroupInvocationID;
  const uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
  const uint z = gl_WorkGroupID.z;
  const uint bz = z / pc.heads, h = z % pc.heads;
  const uint a_base = pc.a_off + bz * pc.a_sb + h * pc.a_sh;
  const uint b_base = pc.b_off + (B_PAGED ? 0u : bz * pc.b_sb) + ((pc.head_base + h) / pc.group) * pc.b_sh;
  const uint c_base = pc.c_off + bz * pc.c_sb + h * pc.c_sh;
  const uint table_row = BIAS_OFF + bz * pc.b_sb;  // a paged B's table row for this batch
  // A paged B's keys for this batch (shader_abi.h): the scores' column tiles past them are not
  // computed, and P·V's sum stops there (the weights past them are 0).
  uint keys = B_PAGED_ROWS ? N : pc.k;
  if (B_PAGED) {
    const uint appended = pc.flags >> GEMM_FLAGS_APPENDED_SHIFT;
    keys = clamped_cache_length(cache_lengths[pc.lens_off + bz], keys, appended) + appended;
  }
  if (B_PAGED_ROWS && n0 >= keys) return;  // the whole workgroup: nothing of its tile is read
  const uint K = B_PAGED_COLS ? keys : pc.k;
  // k = 0 (P·V without keys, A and B bound to a placeholder): one step of zeros that reads only
  // element 0 of A and B.
  const uint k_last = max(K, 1u) - 1u;
  const uint M_READ = K == 0u ? 1u : M, N_READ = K == 0u ? 1u : N;
  // A second pass for the sums that came out NaN/Inf: the score rule's rescaling, or skip-zero's redo.
  const bool may_redo = REDOES && K <= RESCALE_MAX_K;

  // This lane's columns: B's rows and C's column offsets. Columns past n read row n - 1 of B, rows
  // past m read row m - 1 of A; neither is written. With whole quads (VEC_B_N, VEC_C: n % 4 == 0) a
  // quad is in or out as a whole, and one past n reads the last quad.
  uint b_row[CJ], c_col[CJ], b_quad[QUADS];
  bool col_ok[CJ];
  [[unroll]] for (uint j = 0u; j < CJ; ++j) {
    const uint col = n0 + (j / 4u) * 4u * LANES + 4u * lane + j % 4u;
    const uint cl = min(col, N - 1u);
    col_ok[j] = col < N;
    const uint key = min(col, N_READ - 1u);
    b_row[j] = b_base + (B_PAGED_ROWS ? paged_key(table_row, key, B_CBLK, B_SBLK, PAGES, pc.b_sr) : key * pc.b_sr);
    c_col[j] = c_base + column(cl, pc.c_cblk, pc.c_sblk, pc.c_sc);
    if (j % 4u == 0u) b_quad[j / 4u] = b_base + min(col, max(N_READ, 4u) - 4u) * pc.b_sr;
  }
  // VEC_A_K: this lane's quads of A, as the quad offset of its row and its quad within the LANES k.
  uint a_row4[A_QUAD_LOADS], a_part[A_QUAD_LOADS];
  [[unroll]] for (uint g = 0u; g < A_QUAD_LOADS; ++g) {
    const uint quad = g * LANES + lane;
    a_row4[g] = (a_base + min(m0 + quad / max(A_ROW_QUADS, 1u), M_READ - 1u) * A_SR) / 4u;
    a_part[g] = quad % max(A_ROW_QUADS, 1u);
  }
  float bias_j[CJ];
  [[unroll]] for (uint j = 0u; j < CJ; ++j) bias_j[j] = BIAS ? B_to_f32(bias[BIAS_OFF + min(n0 + (j / 4u) * 4u * LANES + 4u * lane + j % 4u, N - 1u)]) : 0.0;

  float acc[SUMS];
  uint redo[CJ * WORDS];  // bit i of column j: C(i, j) came out NaN/Inf in pass 0 and is recomputed
  [[unroll]] for (uint e = 0u; e < CJ * WORDS; ++e) redo[e] = 0u;

  const Walk walk = Walk(K, k_last, lane, m0, M_READ, a_base, A_CBLK, A_SBLK, A_SC, A_SR, B_CBLK, B_SBLK, B_SC, PAGES, table_row);
  // Skip-zero by a redo pass (SKIP_BY_REDO, above) only where that pass is within the loop budget.
  const bool redo_zeros = SKIP_BY_REDO && K <= RESCALE_MAX_K;
  float s = 1.0;  // pass 1: every operand scaled down (score.glsl), but for skip-zero's redo
  uint pass = 0u;
  bool again;
  do {
    // The plain form, or skip-zero's selects: in every pass of a skip-zero GEMM but the first of a
    // redo_zeros one. (A uniform branch: the form not taken costs one masked step.)
    if (SKIP_BY_REDO && !(redo_zeros && pass == 0u)) accumulate(true, s, walk, a_row4, a_part, b_row, b_quad, acc);
    else accumulate(SELECTS_ALWAYS, s, walk, a_row4, a_part, b_row, b_quad, acc);

    const bool first = pass == 0u;
    bool met_bad = false;
    if (first) {
      // Write-out, RG rows at a time: the group's sums are picked from acc by unrolled selects.
      uint g = 0u;
      do {
        float v[RG * CJ];
        [[unroll]] for (uint e = 0u; e < RG * CJ; ++e) v[e] = 0.0;
        [[unroll]] for (uint gg = 0u; gg < GROUPS; ++gg)
          [[unroll]] for (uint e = 0u; e < RG * CJ; ++e) v[e] = gg == g ? acc[gg * RG * CJ + e] : v[e];
        [[unroll]] for (uint rr = 0u; rr < RG; ++rr) {
          const uint i = g * RG + rr;  // row in the tile
          const uint row = m0 + i;
          float vals[CJ];
          [[unroll]] for (uint j = 0u; j < CJ; ++j) {
            const bool inside = row < M && col_ok[j];
            const float d = v[rr * CJ + j];
            const bool bad = isnan(d) || isinf(d);
            // scale_dot (score.glsl) for a finite sum; NaN/Inf propagate unless pass 1 redoes them.
            float value = scaled_sum(d, ALPHA);
            if (BIAS) value = add_bias(value, bias_j[j]);
            vals[j] = value;
            if (!VEC_C && inside) c[c_col[j] + row * C_SR] = C_from_f32(value);
            if (REDOES) {
              const bool redo_this = bad && inside;
              met_bad = met_bad || redo_this;
              [[unroll]] for (uint w = 0u; w < WORDS; ++w)
                redo[j * WORDS + w] |= (redo_this && w == i / 32u) ? 1u << (i % 32u) : 0u;
            }
          }
          if (VEC_C)
            [[unroll]] for (uint q = 0u; q < QUADS; ++q)
              if (row < M && col_ok[q * 4u])
                c4[(c_col[q * 4u] + row * C_SR) / 4u] =
                    C4_from_vec4(vec4(vals[q * 4u], vals[q * 4u + 1u], vals[q * 4u + 2u], vals[q * 4u + 3u]));
        }
        ++g;
      } while (g < GROUPS);
    }
    if (REDOES && !first) {
      // Pass 1 (rare): the redone elements, one row at a time (a small body: llvmpipe runs it once,
      // masked, in every workgroup), each sum recomputed with scaled-down operands (skip-zero: with
      // the zeros skipped, its value then as pass 0 makes it).
      uint i = 0u;
      do {
        const uint row = m0 + i;
        [[unroll]] for (uint j = 0u; j < CJ; ++j) {
          float d = 0.0;
          [[unroll]] for (uint e = 0u; e < BM; ++e) d = e == i ? acc[e * CJ + j] : d;
          uint word = 0u;
          [[unroll]] for (uint w = 0u; w < WORDS; ++w) word = w == i / 32u ? redo[j * WORDS + w] : word;
          float value = SKIP_ZERO ? scaled_sum(d, ALPHA) : scale_rescaled_dot(d, ALPHA);
          if (BIAS) value = add_bias(value, bias_j[j]);
          if ((word & (1u << (i % 32u))) != 0u && row < M && col_ok[j]) c[c_col[j] + row * C_SR] = C_from_f32(value);
        }
        ++i;
      } while (i < BM);
    }
    again = first && may_redo && subgroupAny(met_bad);
    s = SKIP_ZERO ? 1.0 : DOWN;
    ++pass;
  } while (again);
}
