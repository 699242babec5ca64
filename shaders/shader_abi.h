/* The contract between the shaders and the host runtime, written once: the flag bits, the
 * specialization-constant ids and the push-constant blocks of every kernel. This file compiles as
 * GLSL (included by the shaders through glslc) and as C++ (runtime/shader_abi.hpp), so neither side
 * keeps a copy of the other's layout. Push-constant members are all 32-bit, so std430 adds no
 * padding and the C++ structs match byte for byte (runtime/shader_abi.hpp checks the sizes).
 * Comments inside the macros are block comments: a line comment would swallow the continuation. */
#ifndef VKATTN_SHADER_ABI_H
#define VKATTN_SHADER_ABI_H

/* ---- Descriptor bindings (set 0, all storage buffers) of every kernel, by the name the shaders
 * declare them with and the host binds them by; X_BINDINGS is the kernel's count. What each kernel
 * reads and writes through them is its layout's (runtime/pipelines.cpp), as the shaders declare them. ---- */
/* The fused attention kernels (attention_common.glsl and every attention_*.comp that includes it) */
#define ATTENTION_Q_BINDING 0
#define ATTENTION_K_BINDING 1
#define ATTENTION_V_BINDING 2
#define ATTENTION_O_BINDING 3               /* written */
#define ATTENTION_LSE_BINDING 4             /* written */
#define ATTENTION_MASK_BINDING 5            /* or a work list's words (WORK_LIST_MASK_BINDING) */
#define ATTENTION_KV_LENGTHS_BINDING 6      /* or cache_lens, or cu_seqlens_k */
#define ATTENTION_PARTIAL_O_BINDING 7       /* written: split-KV partials in the workspace */
#define ATTENTION_PARTIAL_LSE_BINDING 8     /* written */
#define ATTENTION_ALIBI_BINDING 9
#define ATTENTION_SINKS_BINDING 10
#define ATTENTION_BLOCK_TABLE_BINDING 11    /* or cu_seqlens_q */
#define ATTENTION_REDO_BINDING 12           /* the careful pass's ballots: read and written */
#define ATTENTION_BINDINGS 13
/* attention_combine.comp */
#define COMBINE_PARTIAL_O_BINDING 0
#define COMBINE_PARTIAL_LSE_BINDING 1
#define COMBINE_O_BINDING 2                 /* written */
#define COMBINE_LSE_BINDING 3               /* written */
#define COMBINE_SINKS_BINDING 4
#define COMBINE_WORK_LIST_BINDING 5
#define COMBINE_CU_SEQLENS_Q_BINDING 6
#define COMBINE_BINDINGS 7
/* attention_softmax.comp */
#define SOFTMAX_SCORES_BINDING 0            /* read and written */
#define SOFTMAX_LSE_BINDING 1               /* written */
#define SOFTMAX_MASK_BINDING 2              /* or cu_seqlens_q (FLAG_VARLEN) */
#define SOFTMAX_KV_LENGTHS_BINDING 3        /* or cu_seqlens_k */
#define SOFTMAX_ALIBI_BINDING 4
#define SOFTMAX_SINKS_BINDING 5
#define SOFTMAX_BINDINGS 6
/* gemm.comp, gemm_subgroup.comp */
#define GEMM_A_BINDING 0
#define GEMM_B_BINDING 1
#define GEMM_C_BINDING 2                    /* written */
#define GEMM_BIAS_BINDING 3
#define GEMM_LENGTHS_BINDING 4              /* a paged B's cache lengths (GEMM_FLAG_B_PAGED_*) */
#define GEMM_BINDINGS 5
/* gemm_subgroup_texel (gemm_subgroup.comp with GEMM_TEXEL): A's and B's quads may be read through
 * uniform texel buffers of R32G32_UINT over the whole VkBuffer that holds each, after the storage
 * bindings (SPEC_GEMM_SG_TEXEL says which: GEMM_SG_TEXEL_*). For such an operand X, X_off is a full
 * 32-bit word, its element offset from the VkBuffer's first byte (not from its binding's). */
#define GEMM_A_TEXEL_BINDING 5
#define GEMM_B_TEXEL_BINDING 6
#define GEMM_TEXEL_BINDINGS 2
/* kv_append.comp */
#define KV_APPEND_K_NEW_BINDING 0
#define KV_APPEND_V_NEW_BINDING 1
#define KV_APPEND_K_CACHE_BINDING 2         /* read and written (q8_0: as words) */
#define KV_APPEND_V_CACHE_BINDING 3         /* read and written */
#define KV_APPEND_BLOCK_TABLE_BINDING 4
#define KV_APPEND_CACHE_LENS_BINDING 5
#define KV_APPEND_BINDINGS 6
/* The backward pass's kernels (attention_backward_common.glsl: attention_backward_rows.comp,
 * attention_backward_kv.comp, attention_backward_q.comp). The mask, key lengths, ALiBi and sinks keep
 * the forward's meaning; a packed batch's cu_seqlens_k is at the key lengths' binding. */
#define BACKWARD_Q_BINDING 0
#define BACKWARD_K_BINDING 1
#define BACKWARD_V_BINDING 2
#define BACKWARD_O_BINDING 3
#define BACKWARD_DO_BINDING 4
#define BACKWARD_LSE_BINDING 5
#define BACKWARD_MASK_BINDING 6
#define BACKWARD_KV_LENGTHS_BINDING 7       /* or cu_seqlens_k */
#define BACKWARD_ROWS_BINDING 8             /* D = rowsum(dO * O) per query row: written by the rows kernel */
#define BACKWARD_ALIBI_BINDING 9
#define BACKWARD_SINKS_BINDING 10
#define BACKWARD_CU_SEQLENS_Q_BINDING 11
#define BACKWARD_GRAD_A_BINDING 12          /* written: dQ (q kernel), dK (kv kernel), dsinks (rows kernel, sinks pass), S -> dS (scores kernel) */
#define BACKWARD_GRAD_B_BINDING 13          /* written: dV (kv kernel), dP -> P∘Z (scores kernel) */
#define BACKWARD_BINDINGS 14
/* merge_states_gather.comp (merging attention states: one part's rows into the combine's partials) */
#define MERGE_PART_O_BINDING 0
#define MERGE_PART_LSE_BINDING 1
#define MERGE_PARTIAL_O_BINDING 2           /* written */
#define MERGE_PARTIAL_LSE_BINDING 3         /* written */
#define MERGE_BINDINGS 4

/* Cascade (shared-prefix) paged attention (runtime/paged_cascade.cpp): the passes' key lengths
 * (cascade_lengths.comp), and the merge of the prefix pass's and the suffix pass's results
 * (cascade_merge.comp). */
#define CASCADE_LENGTHS_IN_BINDING 0
#define CASCADE_LENGTHS_OUT_BINDING 1       /* written */
#define CASCADE_LENGTHS_BINDINGS 2
#define CASCADE_MERGE_PREFIX_O_BINDING 0
#define CASCADE_MERGE_PREFIX_LSE_BINDING 1
#define CASCADE_MERGE_SUFFIX_O_BINDING 2
#define CASCADE_MERGE_SUFFIX_LSE_BINDING 3
#define CASCADE_MERGE_O_BINDING 4           /* written */
#define CASCADE_MERGE_LSE_BINDING 5         /* written */
#define CASCADE_MERGE_BINDINGS 6
/* attention_backward_reduce.comp */
#define REDUCE_PARTS_BINDING 0
#define REDUCE_OUT_BINDING 1                /* written */
#define REDUCE_BINDINGS 2
/* attention_work_list.comp */
#define WORK_LIST_LENGTHS_BINDING 0         /* cache_lens, kv_lengths or cu_seqlens_k */
#define WORK_LIST_WORDS_BINDING 1           /* read and written */
#define WORK_LIST_BINDINGS 2

/* ---- Flag bits of the fused kernels' and the row softmax's `flags` ---- */
#define CAUSAL_MASK 3u          /* bits 0-1: 0 none, 1 top-left, 2 bottom-right */
#define CAUSAL_TOP_LEFT 1u
#define CAUSAL_BOTTOM_RIGHT 2u
#define MASK_KIND_SHIFT 2u      /* bits 2-3: 0 none, 1 boolean (bytes), 2 f32, 3 f16 */
#define MASK_NONE 0u
#define MASK_BOOL 1u
#define MASK_F32 2u
#define MASK_F16 3u
#define FLAG_KV_LENGTHS 16u
#define FLAG_WRITE_LSE 32u
/* attention_tiled.comp (tiled): the host found the tensor's dim a multiple of 4 and its batch, head
 * and sequence strides multiples of 4 elements, so its rows can be read as vec4 (f32) or as four
 * 16-bit values in a uvec2; the shader also checks the element offset of the binding (q_off, k_off,
 * v_off, set per call), and reads element by element otherwise. */
#define FLAG_VEC_Q 128u
#define FLAG_VEC_K 256u
#define FLAG_VEC_V 512u
/* attention_softmax.comp: the rows are a packed variable-length batch (the batch-1 problem's seq_q and
 * seq_k are the totals); cu_seqlens_q is bound where the mask goes and cu_seqlens_k where the key
 * lengths go, and each row is confined to its sequence's keys with the sequence's own alignment. */
#define FLAG_VARLEN 1024u
/* The fused kernels: the grid's z is a work list's items, not (split, batch) (see "Work lists"). */
#define FLAG_WORK_LIST 2048u
/* attention_softmax.comp: the key lengths are a paged cache's (with FLAG_KV_LENGTHS): sequence b's keys
 * are cache_lens[b] clamped to [0, seq_k - seq_new] plus seq_new, and the causal rule and the window
 * align to them, as in the fused kernels' paged calls. */
#define FLAG_CACHE_LENGTHS 4096u

/* ---- Score modifiers (docs/semantics.md, "Score modifiers"): the bits of the MODIFIERS specialization constant of
 * every kernel that forms or normalises scores (shaders/modifiers.glsl). Off, they compile to nothing. ---- */
#define MOD_SOFTCAP 1u           /* s = SOFTCAP * tanh(s / SOFTCAP) (finite scores) */
#define MOD_ALIBI 2u             /* + -slope * |i + off - j|, slopes bound at ALIBI_BINDING */
#define MOD_ALIBI_PER_BATCH 4u   /* the slopes are (batch, heads), else (heads) */
#define MOD_SINKS 8u             /* each row's denominator gains e^sink[h], sinks bound at SINKS_BINDING */
#define MOD_ALIGN_TOP_LEFT 16u   /* the window's and ALiBi's diagonal: off = 0, else seq_k - seq_q */
/* The modifiers applied where a row ends, once: by the kernel, or by the combine on a split call (the
 * split kernels' constants lack them; the combine's SPEC_COMBINE_MODIFIERS has only them). */
#define MOD_ENDS_ROW MOD_SINKS
/* The modifiers' block of specialization constants in every kernel that forms scores: the MOD_* bits at
 * the kernel's SPEC_*_MODIFIERS, then these at the offsets below from it (shaders/modifiers.glsl; the
 * host: write_modifier_constants). A new modifier's constant is added here and nowhere else. */
#define MOD_SPEC_WINDOW_LEFT_OFFSET 1   /* uint: the window's left side, 0xffffffff = unbounded (no window: both) */
#define MOD_SPEC_WINDOW_RIGHT_OFFSET 2  /* uint: its right side, 0xffffffff = unbounded (causal stays in `flags`) */
#define MOD_SPEC_SOFTCAP_OFFSET 3       /* float: the softcap c (with MOD_SOFTCAP) */
#define MOD_SPEC_BLOCK 4                /* the bits and the constants above */
#define MOD_BAND_SPLITS 32u      /* fused kernels: key splits count from each workgroup's window start */
/* The element offsets of the modifiers' bindings share a push-constant word with another binding's
 * (a binding's offset left for the shader is below the storage-buffer alignment, at most 256 bytes,
 * so 16 bits hold it): ALiBi's is the high half of kv_len_off, the sinks' the high half of lse_off
 * (modifiers.glsl reads them; the host binds them at offsetof(...) + 2). */

/* ---- Paged KV caches (SPEC_ATTENTION_PAGE_SIZE > 0) ----
 * K and V are caches (num_pages, page_size, kv_heads, dim), or (num_pages, kv_heads, page_size, dim)
 * (hnd pages): key j of a sequence is row (page * SPEC_ATTENTION_PAGE_STRIDE + j % page_size) in
 * units of the seq stride, plus the head's stride. The push block's k_sb and v_sb are 0 (no
 * batch) and the mask's members, unused (a paged call has no explicit mask), carry the block table:
 * m_off its element offset in BLOCK_TABLE_BINDING, m_sb its row stride (max_pages), m_sh num_pages
 * (entries are clamped into [0, num_pages)), m_ss the tokens appended before the call (seq_new).
 * The key lengths' binding holds cache_lens: sequence b has clamp(cache_lens[b], 0, seq_k - seq_new)
 * + seq_new keys, seq_k being the capacity max_pages * page_size (clamped before the add: no length,
 * INT32_MIN or INT32_MAX included, overflows). */
#define BLOCK_TABLE_BINDING ATTENTION_BLOCK_TABLE_BINDING

/* ---- The careful pass (attention_subgroup.comp, SPEC_ATTENTION_CAREFUL_PASS) ----
 * The subgroup kernel runs as two dispatches on one grid: the fast pass writes, per workgroup (its
 * linear index in the grid), the ballot (uvec4) of its invocations that met a visible key with a
 * non-finite dot or V, at REDO_BINDING, a region of the call's workspace; the careful pass, after a
 * barrier, redoes those invocations' rows and returns at once where the ballot is empty. */
#define REDO_BINDING ATTENTION_REDO_BINDING

/* ---- Work lists (split-KV by each sequence's own keys, attention_work_list.comp) ----
 * A paged call with splits (or a packed batch, or a dense call with key lengths and no mask) cuts
 * each sequence's own keys, cache_lens[b] + seq_new (dense: kv_lengths[b]), into items of `chunk` keys (the last
 * shorter; a sequence without keys has none), chosen on the device from the lengths, and the split
 * dispatch covers exactly the items: its grid comes from the list (vkCmdDispatchIndirect), so no
 * workgroup is spent on keys a sequence does not have. The list lives in the call's workspace,
 * 32-bit words from its binding's start:
 *   WORK_LIST_ARGS: the split dispatch's grid (x, y, z = items) for a range of query tiles, and at
 *   WORK_LIST_LAST_ARGS for the last (shorter) range; WORK_LIST_CHUNK: keys per item;
 *   WORK_LIST_ITEMS: the items, at most max_items of them, item i being (b << 16) | s: split s (keys
 *   s * chunk ..) of sequence b; sequence b's items are i = offsets[b] .. offsets[b + 1] - 1, offsets
 *   at word WORK_LIST_ITEMS + max_items.
 *   The grid runs them in bit-reversed order: workgroup z runs the word at WORK_LIST_ITEMS + z, item i
 *   sitting at z = the number of items j whose index, its bits reversed, is below i's (items sorted
 *   by their reversed indices). So the first half of the grid runs the even items and the second the
 *   odd, each quarter the items of one residue mod 4, and so on: lavapipe hands each of its threads
 *   one contiguous run of a dispatch's workgroups, and in list order a long sequence's items sat in
 *   one run, on one thread, while the other threads' runs held the short sequences'.
 *   WORK_LIST_OFFSETS: the word where the offsets start (the kernels find an item's index there,
 *   the combine a sequence's items).
 * The fused kernels read the list at the mask's binding (such a call has no mask) with
 * FLAG_WORK_LIST, and their split-KV partials are then [item i][head][row of the range]. A packed
 * batch's (varlen) stay [split][head][packed row]: the combine finds a packed row's sequence in
 * cu_seqlens_q and merges splits 0 .. its item count - 1. */
#define WORK_LIST_ARGS 0u
#define WORK_LIST_LAST_ARGS 3u
#define WORK_LIST_CHUNK 6u
#define WORK_LIST_OFFSETS 7u
#define WORK_LIST_ITEMS 8u
#define WORK_LIST_MASK_BINDING ATTENTION_MASK_BINDING

/* ---- K and V storage (SPEC_ATTENTION_KV_FORMAT) ----
 * KV_FORMAT_AS_Q: the call's dtype, as Q. KV_FORMAT_Q8_0: ggml's q8_0 blocks (34 bytes per 32
 * elements); the k_off and v_off push words are then in 16-bit units of the binding, and element
 * indices count from its first block (shaders/kv_values.glsl). */
#define KV_FORMAT_AS_Q 0u
#define KV_FORMAT_Q8_0 1u

/* ---- Packed variable-length batches (SPEC_ATTENTION_VARLEN = 1) ----
 * Q, K, V and O are packed tensors of batch 1 (vkattn/varlen.hpp): the push block's seq_q and seq_k
 * are the totals (rows of Q and O, of K and V) and its batch strides are 0. The grid's z covers
 * (split, sequence) as it covers (split, batch). cu_seqlens_q is bound at BLOCK_TABLE_BINDING (its
 * element offset in m_off: a varlen call has no block table and no mask), cu_seqlens_k at the key
 * lengths' binding (its offset in kv_len_off's low half: a varlen call has no key lengths); the mask's m_sb and m_sh
 * carry max_seqlen_q and max_seqlen_k. Sequence
 * b is queries cu_q[b] .. cu_q[b+1] - 1 and keys cu_k[b] .. cu_k[b+1] - 1, each value clamped into
 * [0, total] and each end to at least its start (bad offsets read wrong rows, never out of bounds);
 * of a sequence longer than the bounds only the first max_seqlen_q rows are computed (the others are
 * never written: not by the kernels, not by the combine) and the first max_seqlen_k keys seen (the
 * others masked), its own lengths still aligning causal, the window and ALiBi.
 * Row and key indices inside a sequence are its own (the causal rule, the window and ALiBi align to
 * its lengths); the LSE (heads, total_q) and the split-KV partials [split][head][packed row] are
 * indexed by packed row, so that the combine runs as a batch-1 call over total_q rows. */

/* ---- Flag bits of the GEMM's `flags` ---- */
#define GEMM_FLAG_BIAS 1u         /* C += bias[bias_off + n] (bias in B's element type) */
#define GEMM_FLAG_SKIP_ZERO_A 2u  /* an A element of exactly 0 contributes nothing, even against NaN/Inf in B */
/* B is a paged KV cache read through its block table (the three-stage path over a paged cache): B's
 * key index x (its row for the scores, B_PAGED_ROWS; its column for P·V, B_PAGED_COLS) of batch b is
 * at table[bias_off + b*b_sb + x / b_cblk] * b_sblk + (x % b_cblk) * (b_sr or b_sc): b_sb is the
 * table's entries per batch (B's batch stride is through the table), b_cblk the page size, b_sblk a
 * page's elements, the table's entries clamped into [0, pages) (a bad table reads wrong keys, never
 * out of bounds). The table is bound where the bias goes (an attention GEMM has none) and B's other
 * index has no blocks. Batch b's keys end at keys_b = min(max(lengths[lens_off + b], 0) + appended,
 * capacity) (the cache length, clamped, plus the tokens appended before the call, `flags` >>
 * GEMM_FLAGS_APPENDED_SHIFT; capacity: n or k): the scores' column tiles past them are not computed
 * (their weights come out 0 and are never read) and P·V's sum stops there. */
#define GEMM_FLAG_B_PAGED_ROWS 4u
#define GEMM_FLAG_B_PAGED_COLS 8u
#define GEMM_FLAGS_APPENDED_SHIFT 8u /* flags' bits 8-31: a paged B's appended tokens (below 2^24) */
#define GEMM_FLAG_BITS 255u
/* gemm_subgroup.comp only, in its FLAGS specialization constant (never in the push constants): with
 * GEMM_FLAG_SKIP_ZERO_A, the first pass multiplies and adds without skipping zeros and the elements
 * whose sums come out NaN/Inf are redone in a second pass that skips them (k <= 16384). */
#define GEMM_SG_FLAG_SKIP_ZERO_BY_REDO 16u

/* ---- Specialization-constant ids ---- */
/* attention_tiled.comp, attention_rowwise.comp and attention_subgroup.comp (the same ids) */
#define SPEC_ATTENTION_BR 0         /* query rows per workgroup */
#define SPEC_ATTENTION_TPR 1        /* invocations per query row (rowwise, subgroup: 1) */
#define SPEC_ATTENTION_BC 2         /* keys per tile (subgroup: keys per iteration of the key loop) */
#define SPEC_ATTENTION_DQK 3        /* head dim of Q and K */
#define SPEC_ATTENTION_DV 4         /* head dim of V and O */
#define SPEC_ATTENTION_WORKGROUP 5  /* local_size_x: BR * TPR (fused), BR / 4 (rowwise), the subgroup size (subgroup) */
#define SPEC_ATTENTION_MASK_KIND 6  /* subgroup: the mask kind (MASK_*) of the pipeline; others: 0, unused */
#define SPEC_ATTENTION_PACK_GROUP 7  /* subgroup: 1 = a workgroup's rows are a GQA group's query heads x seq_q (grid y: KV heads); others: 0 */
#define SPEC_ATTENTION_RPT 8        /* tiled: query rows per row group (others: 1) */
#define SPEC_ATTENTION_HEADS 9      /* tiled: query heads of one GQA group per workgroup (others: 1) */
#define SPEC_ATTENTION_VEC 10       /* subgroup decode form: 1 = Q, K, V and O rows are read and written in 16-byte chunks; subgroup: 1 = K and V rows read so (others: 0) */
#define SPEC_ATTENTION_MODIFIERS 11     /* the modifiers' block: MOD_SPEC_BLOCK constants (11 .. 14) */
#define SPEC_ATTENTION_PAGE_SIZE 15     /* 0: dense K and V; else K and V are a paged cache of pages of this many tokens */
#define SPEC_ATTENTION_VARLEN 16        /* 1: a packed variable-length batch (see above); 0 otherwise */
#define SPEC_ATTENTION_KV_FORMAT 17     /* KV_FORMAT_*: how K and V are stored (shaders/kv_values.glsl) */
#define SPEC_ATTENTION_PAGE_STRIDE 18   /* paged: a page's stride in key rows (units of K's and V's seq strides):
                                           PAGE_SIZE for nhd pages, PAGE_SIZE * kv_heads for hnd; else 0 */
#define SPEC_ATTENTION_PREFETCH 19      /* subgroup decode form: touch the K and V rows of the key this many keys
                                           ahead (a CPU device reading a paged cache, a packed batch or BSHD K/V); 0 = none */
#define SPEC_ATTENTION_CAREFUL_PASS 20  /* attention_subgroup.comp: 0 the fast pass, 1 the careful pass (REDO_BINDING) */
#define SPEC_ATTENTION_PARTIAL 21       /* 1: a split call's kernel, writing per-split partial (O, LSE) to the workspace
                                           for the combine pass; 0: O and LSE. A constant, not a flag: the
                                           kernel holds the code of one of the two (on lavapipe each store
                                           costs JIT time, and an `if` compiles both sides) */
#define SPEC_ATTENTION_COUNT 22
/* The backward kernels (attention_backward_*.comp) */
#define SPEC_BACKWARD_DQK 0
#define SPEC_BACKWARD_DV 1
#define SPEC_BACKWARD_WORKGROUP 2
#define SPEC_BACKWARD_MODIFIERS 3       /* the modifiers' block: MOD_SPEC_BLOCK constants (3 .. 6) */
#define SPEC_BACKWARD_VARLEN 7          /* 1: a packed variable-length batch (as the fused kernels'); else 0 */
#define SPEC_BACKWARD_PARTIAL 8         /* 1: write f32 partial gradients of this split (GRAD bindings in the
                                           workspace, [split][batch][head][row][dim]); 0: the gradients */
#define SPEC_BACKWARD_DROPOUT 9         /* dropout's threshold (vkattn/dropout.hpp: floor(p * 2^32)); 0: none */
#define SPEC_BACKWARD_SINKS_PASS 10     /* attention_backward_rows.comp: 0 D per row, 1 dsinks per head */
#define SPEC_BACKWARD_ROWS 11           /* the subgroup forms (CPU devices): keys (kv) or query rows (q) per lane */
#define SPEC_BACKWARD_TILE_ROWS 12      /* the tiled forms (GPUs): query rows per tile (BR) */
#define SPEC_BACKWARD_TILE_KEYS 13      /* the tiled forms: keys per tile (BC); the workgroup a multiple of BR and BC */
#define SPEC_BACKWARD_COUNT 14
/* The tiled backward kernels' shared memory, in floats (host and shader size it from here): the key
 * block's K and V rows, each padded by one float (the tile's lanes read several keys' rows at one dim:
 * padded, they fall in different banks), the query block's Q and dO rows, its LSE and D, and the
 * BR x BC tiles of P∘Z and dS. */
#define BACKWARD_TILE_KEY_STRIDE(D) ((D) + 1u)
#define BACKWARD_TILE_FLOATS(BR, BC, DQK, DV)                                                          \
  ((BC) * (BACKWARD_TILE_KEY_STRIDE(DQK) + BACKWARD_TILE_KEY_STRIDE(DV)) + (BR) * ((DQK) + (DV)) + \
   2u * (BR) + 2u * (BR) * (BC))
/* attention_backward_reduce.comp */
#define SPEC_REDUCE_WORKGROUP 0
#define SPEC_REDUCE_COUNT 1
/* merge_states_gather.comp */
#define SPEC_MERGE_WORKGROUP 0
#define SPEC_MERGE_COUNT 1
/* attention_combine.comp */
#define SPEC_COMBINE_DV 0
#define SPEC_COMBINE_WORKGROUP 1
#define SPEC_COMBINE_MODIFIERS 2        /* MOD_SINKS or 0: the sinks join each row's denominator here */
#define SPEC_COMBINE_COUNT 3
/* attention_softmax.comp */
#define SPEC_SOFTMAX_WORKGROUP 0
#define SPEC_SOFTMAX_MODIFIERS 1        /* the modifiers' block: MOD_SPEC_BLOCK constants (1 .. 4) */
#define SPEC_SOFTMAX_QUADS 5            /* 1: the module built with SOFTMAX_QUADS (no constant of the shader's) */
#define SPEC_SOFTMAX_COUNT 6
/* kv_append.comp */
#define SPEC_KV_APPEND_FORMAT 0  /* KV_FORMAT_*: the caches' storage */
#define SPEC_KV_APPEND_COUNT 1
/* gemm.comp: a BM x BN tile of C per workgroup, TM x TN per invocation, k in steps of BK */
#define SPEC_GEMM_BM 0
#define SPEC_GEMM_BN 1
#define SPEC_GEMM_BK 2
#define SPEC_GEMM_TM 3
#define SPEC_GEMM_TN 4
#define SPEC_GEMM_WORKGROUP 5       /* (BM / TM) * (BN / TN) */
#define SPEC_GEMM_COUNT 6
/* gemm_subgroup.comp (CPU devices): one subgroup per workgroup, a ROWS x (COLS x LANES) tile of C;
 * each invocation holds COLS columns of all ROWS rows */
#define SPEC_GEMM_SG_ROWS 0         /* 1, 2, 4 or a multiple of 8 */
#define SPEC_GEMM_SG_COLS 1         /* columns per invocation */
#define SPEC_GEMM_SG_FLAGS 2        /* the call's GEMM_FLAG_* bits, compiled in (the push constants' flags are not read) */
#define SPEC_GEMM_SG_WORKGROUP 3    /* LANES: the device's subgroup size (a single size) */
#define SPEC_GEMM_SG_VEC 4          /* GEMM_SG_VEC_* bits */
#define SPEC_GEMM_SG_TEXEL 5        /* GEMM_SG_TEXEL_* bits (the gemm_subgroup_texel build; 0 in the other) */
#define SPEC_GEMM_SG_COUNT 6
/* gemm_subgroup_texel's operands read through their texel buffers (SPEC_GEMM_SG_TEXEL): each one also
 * read by quads (GEMM_SG_VEC_A_K; GEMM_SG_VEC_B_K or _B_N). Bit i: texel binding i (GEMM_A_TEXEL_BINDING + i). */
#define GEMM_SG_TEXEL_A 1u
#define GEMM_SG_TEXEL_B 2u
/* gemm_subgroup.comp's operands read or written four elements at a time (SPEC_GEMM_SG_VEC): the
 * host sets a bit where the layout allows it (strides, sizes), and the element offsets of the
 * bindings must then be multiples of 4 (else the all-scalar pipeline runs, chosen at record time) */
#define GEMM_SG_VEC_B_K 1u  /* B's rows contiguous along k (stride_col 1, no blocks), k and its strides multiples of 4 */
#define GEMM_SG_VEC_B_N 2u  /* B's columns contiguous (stride_row 1), n and the k offsets multiples of 4 */
#define GEMM_SG_VEC_C 4u    /* C's columns contiguous in quads (stride_col 1, blocks of 4k), n and its strides multiples of 4 */
#define GEMM_SG_VEC_A_K 8u  /* A's rows contiguous along k (stride_col 1, no blocks), k and its strides multiples of 4, LANES too */

/* ---- Shared memory of the fused kernels ---- */
/* Sizes in elements as functions of the specialization constants: the shaders declare their
 * shared arrays with these and the host's planner adds up their bytes (fused_shared_bytes), so the
 * limit check and the declarations cannot disagree. */
#define VEC4S(d) (((d) + 3u) / 4u)                                      /* vec4s per row of d values */
/* attention_tiled.comp (tiled): K and V tiles of BC keys, each row padded to whole slices of the TPR
 * lanes of a query row (vec4 slots: 16 bytes for f32, 8 for f16/bf16, which stay 16-bit in shared
 * memory), and the scores, then weights, of the workgroup's ROWS = BR x heads query rows (float,
 * rows padded by one against bank conflicts when the lanes of several rows read one key). */
#define TILED_STRIDE(d, TPR) ((VEC4S(d) + (TPR) - 1u) / (TPR) * (TPR))  /* vec4 slots per K or V row */
#define TILED_K_TILE(BC, DQK, TPR) ((BC) * TILED_STRIDE(DQK, TPR))       /* vec4 slots */
#define TILED_V_TILE(BC, DV, TPR) ((BC) * TILED_STRIDE(DV, TPR))         /* vec4 slots */
#define TILED_S_STRIDE(BC) ((BC) + 1u)
#define TILED_S_TILE(ROWS, BC) ((ROWS) * TILED_S_STRIDE(BC))             /* float; the mask tile first */
#define TILED_FLAG_BYTES 4u  /* the last tile some row sees (a uint) */
/* Scores of the tiled kernel are kept in units of log2(e)/2 (t = s * TILED_HALF_LOG2E, the softmax
 * weight exp2(2 (t - m))): half, so that every f32 score, FLT_MAX included, stays finite. A score
 * saturated to +-FLT_MAX is +-TILED_T_MAX = the f32 product FLT_MAX * TILED_HALF_LOG2E; bit patterns. */
#define TILED_HALF_LOG2E_BITS 0x3f38aa3bu   /* f32(log2(e) / 2) */
#define TILED_T_MAX_BITS 0x7f38aa3au        /* f32(FLT_MAX * f32(log2(e) / 2)) */
#define TILED_TWO_LN2_BITS 0x3fb17218u      /* f32(2 ln 2): back to natural units */
#define ROWWISE_K_TILE(BC, DQK) ((BC) * VEC4S(DQK))                     /* vec4 */
#define ROWWISE_V_TILE(BC, DV) ((BC) * VEC4S(DV))                       /* vec4 */
/* attention_subgroup.comp: K and V go from the storage buffers to the lanes by subgroupShuffle, in
 * chunks of one element per lane; no shared memory. */
#define SUBGROUP_CHUNKS(d, lanes) (((d) + (lanes) - 1u) / (lanes))       /* chunks of `lanes` dims per row */
#define SUBGROUP_SHARED_BYTES(BR, BC, DQK, DV) 0u                        /* bytes */

/* ---- Push-constant blocks (strides and offsets in elements of their buffer) ---- */
/* The fused kernels (attention_tiled.comp, attention_rowwise.comp). */
#define ATTENTION_PUSH_MEMBERS                                                               \
  uint seq_q, seq_k, heads, group;  /* group = heads / kv_heads */                           \
  uint splits, keys_per_split, flags; /* splits: of this dispatch (see split_base) */        \
  float scale;                                                                               \
  uint q_sb, q_sh, q_ss, q_off;                                                              \
  uint k_sb, k_sh, k_ss, k_off;                                                              \
  uint v_sb, v_sh, v_ss, v_off;                                                              \
  uint o_sb, o_sh, o_ss, o_off;                                                              \
  uint m_sb, m_sh, m_ss, m_off;                                                              \
  uint lse_off, kv_len_off; /* high halves: the sinks' and ALiBi's offsets (modifiers.glsl) */ \
  uint split_base; /* global index of this dispatch's first split */                        \
  uint tile_base;  /* global index of this dispatch's first query tile (one range of tiles) */

/* The split-KV combine (attention_combine.comp). */
#define COMBINE_PUSH_MEMBERS                                                                 \
  uint splits, rows, heads, seq_q; /* rows = batch * heads * range_rows: the range's rows */ \
  uint o_sb, o_sh, o_ss, o_off;                                                              \
  uint lse_off, write_lse; /* lse_off's high half: the sinks' offset (modifiers.glsl) */    \
  uint row_base, range_rows; /* the range's first query row; its rows per (batch, head) */  \
  uint half_log2_units; /* 1: the partial maxima are in units of log2(e)/2 (tiled kernel) */ \
  uint work_list; /* 1: a work list at binding 5; row (b, h, r)'s partials are those of its items \
                     offsets[b] .. offsets[b+1] - 1 (the offsets from its WORK_LIST_OFFSETS word) */ \
  uint packed_batches, cu_q_off; /* a packed batch's: its sequences, and cu_seqlens_q at binding 6 \
                                   (element offset cu_q_off); else 0 */                      \
  uint max_rows; /* a packed batch's max_seqlen_q: rows of a sequence past it are not written */

/* Merging attention states (merge_states_gather.comp): one part's rows [row_base, row_base +
 * range_rows) of every (batch, head), O at o_off + b*o_sb + h*o_sh + i*o_ss + d (its storage type) and
 * LSE at lse_off + (b*heads + h)*seq + i (f32), into its rows of the combine's partials of the range
 * (bound from the part's first: row (b*heads + h)*range_rows + r of partial_o_off and partial_lse_off),
 * O as f32 (dim values), the pair (LSE, 1) as the combine's (running max, sum). */
#define MERGE_PUSH_MEMBERS                                                                   \
  uint batch, heads, seq, dim, row_base, range_rows;                                         \
  uint o_sb, o_sh, o_ss, o_off, lse_off, partial_off; /* partial_off: O's low half, LSE's high */

/* The key lengths of a cascade's passes (cascade_lengths.comp), at out_off of the written binding:
 * the suffix pass's, batch of them, clamp(cache_lens[b], prefix_tokens, capacity - seq_new) -
 * prefix_tokens (cache_lens at in_off; the attention kernels' clamping rule, the prefix taken off),
 * then the prefix pass's, kv_heads of them, prefix_tokens. */
#define CASCADE_LENGTHS_PUSH_MEMBERS                                                         \
  uint batch, kv_heads, prefix_tokens, capacity, seq_new, in_off, out_off;

/* A cascade's merge (cascade_merge.comp): row (b, h, i) of the call, h = g * group + j, is the
 * prefix pass's row ((g * batch + b) * group + j) * seq_q + i (O rows of dim_v at po_off, LSE at
 * plse_off) merged with the suffix pass's row (b * heads + h) * seq_q + i (so_off, slse_off) by their
 * LSEs, into O at o_off + b*o_sb + h*o_sh + i*o_ss + d and, with write_lse, LSE at lse_off + row. */
#define CASCADE_MERGE_PUSH_MEMBERS                                                           \
  uint batch, heads, group, seq_q, dim_v;                                                    \
  uint o_sb, o_sh, o_ss, o_off, lse_off, write_lse;                                          \
  uint po_off, plse_off, so_off, slse_off;

/* The append of new tokens to a paged KV cache (kv_append.comp): element (b, g, t, d) of k_new/v_new
 * (strides *_sb, *_sh, *_ss, offset *_off) goes to token cache_lens[b] + t of sequence b, page p,
 * slot s: cache row p * page_size * kv_heads + s * slot_rows + g * head_rows (rows of kc_row, vc_row elements;
 * nhd pages: slot_rows kv_heads, head_rows 1; hnd: 1 and page_size). The caches'
 * offsets are their bindings' element offsets; cache_lens[b] is clamped into [0, capacity - seq_new]
 * and a table entry into [0, num_pages) (the attention kernels' rule), so a bad value writes wrong
 * rows of the caches, never out of bounds. q8_0 caches (SPEC_KV_APPEND_FORMAT): kc_off and vc_off in 16-bit units. */
#define KV_APPEND_PUSH_MEMBERS                                                               \
  uint batch, kv_heads, seq_new, dim_qk, dim_v;                                              \
  uint page_size, max_pages, num_pages, slot_rows, head_rows;                                \
  uint kn_sb, kn_sh, kn_ss, kn_off;                                                          \
  uint vn_sb, vn_sh, vn_ss, vn_off;                                                          \
  uint kc_off, vc_off, bt_off, lens_off;                                                     \
  uint kc_row, vc_row, write_v;

/* Building a paged call's work list (attention_work_list.comp): sequence b has clamp(cache_lens[b],
 * 0, capacity - seq_new) + seq_new keys (cache_lens at element lens_off of its binding); keys per item: the
 * total over target_items, rounded up to a multiple of granule and clamped to [min_keys, max_keys]
 * (the host's cap: lavapipe's loop limit), so that the items never exceed max_items (= batches x the
 * planned splits). tiles_full, tiles_last and groups_y: the split dispatch's x and y. A packed batch
 * (max_splits > 0, the planned splits): the lengths' binding holds cu_seqlens_k, a sequence's keys are
 * cut to max_keys_seen (max_seqlen_k, as the kernels cut them), and no sequence has more than
 * max_splits items (its partials are indexed by split: the chunk grows to fit the longest). A paged
 * sequence's keys: its length clamped to [0, capacity - seq_new], plus seq_new (no overflow). */
#define WORK_LIST_PUSH_MEMBERS                                                               \
  uint batches, capacity, seq_new, lens_off;                                                 \
  uint max_items, target_items, min_keys, max_keys, granule;                                 \
  uint tiles_full, tiles_last, groups_y;                                                     \
  uint max_splits;                                                                           \
  uint max_keys_seen; /* a packed batch's max_seqlen_k: a sequence's keys past it are not seen */

/* The row softmax of the three-stage path (attention_softmax.comp): a chunk of rows of the scores P,
 * batches b0.., heads h0.., query rows i0.., stored densely in that order; masks and LSE are
 * indexed with the global (b, h, i). */
#define SOFTMAX_PUSH_MEMBERS                                                                 \
  uint seq_q, seq_k, heads, flags;                                                           \
  uint rows, chunk_heads, chunk_rows; /* rows = chunk_batches * chunk_heads * chunk_rows */   \
  uint b0, h0, i0;                                                                           \
  uint p_off, lse_off, kv_len_off; /* high halves: the sinks' and ALiBi's offsets */          \
  uint m_sb, m_sh, m_ss, m_off;                                                              \
  uint varlen_batch; /* with FLAG_VARLEN: the sequences (cu_seqlens hold one more value each) */    \
  uint seq_new;      /* with FLAG_CACHE_LENGTHS: the tokens appended to each cache before the call */

/* The backward kernels (attention_backward_*.comp): the forward's strides for Q, K, V and O, whose
 * gradients dQ, dK, dV and dO share them (the element offsets: low half the tensor's, high half its
 * gradient's); the mask as the fused kernels' (a packed batch: m_off cu_seqlens_q's offset at
 * CU_SEQLENS_Q_BINDING, m_sb max_seqlen_q, m_sh max_seqlen_k); split: the query rows (kv kernel) or
 * keys (q kernel) of one split, the grid's z being split * batches + b; dropout's seed and offset. */
#define BACKWARD_PUSH_MEMBERS                                                                \
  uint seq_q, seq_k, heads, group;                                                           \
  uint flags;                                                                                \
  float scale;                                                                               \
  uint q_sb, q_sh, q_ss, q_off;                                                              \
  uint k_sb, k_sh, k_ss, k_off;                                                              \
  uint v_sb, v_sh, v_ss, v_off;                                                              \
  uint o_sb, o_sh, o_ss, o_off;                                                              \
  uint m_sb, m_sh, m_ss, m_off;                                                              \
  uint lse_off, kv_len_off; /* high halves: the sinks' and ALiBi's offsets (modifiers.glsl) */ \
  uint split;                                                                                \
  uint seed_lo, seed_hi, dropout_offset;
/* attention_backward_scores.comp (the three-stage path's softmax backward) reads no Q, K, V or O
 * strides: its chunk of (batch, head, query row) rows rides in those words instead (the push block is
 * at Vulkan's 128-byte minimum), with the sequences of a packed batch. */
#define BACKWARD_SCORES_B0 q_sb             /* the chunk's first batch element, */
#define BACKWARD_SCORES_H0 q_sh             /* query head */
#define BACKWARD_SCORES_I0 q_ss             /* and query row (a packed batch: packed row) */
#define BACKWARD_SCORES_CHUNK_BATCHES k_sb  /* its batch elements, */
#define BACKWARD_SCORES_CHUNK_HEADS k_sh    /* heads */
#define BACKWARD_SCORES_CHUNK_ROWS k_ss     /* and rows */
#define BACKWARD_SCORES_SEQUENCES v_sb      /* a packed batch's sequences (cu_seqlens hold one more) */

/* Summing split partials (attention_backward_reduce.comp): rows (b, h, s) of dim values, partial
 * [split][b][h][s][d] dense f32 from element 0, into the gradient at out_off + b*out_sb + h*out_sh +
 * s*out_ss + d, in the storage type; splits summed in order (deterministic). */
#define REDUCE_PUSH_MEMBERS                                                                  \
  uint batch, heads, seq, dim, splits;                                                       \
  uint out_sb, out_sh, out_ss, out_off;

/* The GEMM (gemm.comp and gemm_subgroup.comp). Batch index z = (b, h) with b = z / heads, h = z % heads. Element (r, c) of
 * operand X is at X_off + b*X_sb + h'*X_sh + r*X_sr + (c / X_cblk)*X_sblk + (c % X_cblk)*X_sc, with
 * h' = h for A and C and h' = (head_base + h) / group for B (the KV head of a GQA group). */
#define GEMM_PUSH_MEMBERS                                                                    \
  uint m, n, k, heads, group, head_base, flags;                                              \
  float alpha;                                                                               \
  uint a_off, a_sb, a_sh, a_sr, a_sc, a_cblk, a_sblk;                                        \
  uint b_off, b_sb, b_sh, b_sr, b_sc, b_cblk, b_sblk;                                        \
  uint c_off, c_sb, c_sh, c_sr, c_sc, c_cblk, c_sblk;                                        \
  uint bias_off;                                                                             \
  uint lens_off, pages; /* GEMM_FLAG_B_PAGED_*: the cache lengths' offset, the cache's pages */

#endif
