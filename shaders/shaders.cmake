# The compute shaders, one SPIR-V module per (kernel, storage dtype). Sizes are specialization
# constants set at pipeline creation; only the storage type is a compile-time macro because it
# changes the buffers' declared element types.
foreach(dtype f32 f16 bf16)
  string(TOUPPER ${dtype} DT)
  vkattn_add_shader(NAME attention_tiled_${dtype} SOURCE attention_tiled.comp DEFINES DTYPE_${DT}=1 TILED_SHUFFLE=1)
  vkattn_add_shader(NAME attention_tiled_noshuffle_${dtype} SOURCE attention_tiled.comp DEFINES DTYPE_${DT}=1)
  vkattn_add_shader(NAME attention_rowwise_${dtype} SOURCE attention_rowwise.comp DEFINES DTYPE_${DT}=1)
  vkattn_add_shader(NAME attention_subgroup_${dtype} SOURCE attention_subgroup.comp DEFINES DTYPE_${DT}=1)
  vkattn_add_shader(NAME attention_subgroup_decode_${dtype} SOURCE attention_subgroup_decode.comp DEFINES DTYPE_${DT}=1)
  vkattn_add_shader(NAME attention_combine_${dtype} SOURCE attention_combine.comp DEFINES DTYPE_${DT}=1)
  vkattn_add_shader(NAME kv_append_${dtype} SOURCE kv_append.comp DEFINES DTYPE_${DT}=1)
  # The backward pass: D and dsinks, dK and dV, dQ, and the sum of split partials.
  vkattn_add_shader(NAME attention_backward_rows_${dtype} SOURCE attention_backward_rows.comp DEFINES DTYPE_${DT}=1)
  vkattn_add_shader(NAME attention_backward_kv_${dtype} SOURCE attention_backward_kv.comp DEFINES DTYPE_${DT}=1)
  vkattn_add_shader(NAME attention_backward_q_${dtype} SOURCE attention_backward_q.comp DEFINES DTYPE_${DT}=1)
  vkattn_add_shader(NAME attention_dropout_output_${dtype} SOURCE attention_dropout_output.comp DEFINES DTYPE_${DT}=1)
  vkattn_add_shader(NAME attention_backward_kv_subgroup_${dtype} SOURCE attention_backward_kv_subgroup.comp DEFINES DTYPE_${DT}=1)
  vkattn_add_shader(NAME attention_backward_q_subgroup_${dtype} SOURCE attention_backward_q_subgroup.comp DEFINES DTYPE_${DT}=1)
  vkattn_add_shader(NAME attention_backward_reduce_${dtype} SOURCE attention_backward_reduce.comp DEFINES DTYPE_${DT}=1)
  # The three-stage path's softmax backward, between its GEMMs.
  vkattn_add_shader(NAME attention_backward_scores_${dtype} SOURCE attention_backward_scores.comp DEFINES DTYPE_${DT}=1)
  # Merging attention states: one part's rows into the combine's partials (the combine merges them).
  vkattn_add_shader(NAME merge_states_gather_${dtype} SOURCE merge_states_gather.comp DEFINES DTYPE_${DT}=1)
  # Cascade (shared-prefix) paged attention: the merge of its prefix and suffix passes.
  vkattn_add_shader(NAME cascade_merge_${dtype} SOURCE cascade_merge.comp DEFINES DTYPE_${DT}=1)
  # Their tiled forms (GPUs): shared-memory blocks of keys and query rows.
  vkattn_add_shader(NAME attention_backward_kv_tiled_${dtype} SOURCE attention_backward_kv_tiled.comp DEFINES DTYPE_${DT}=1)
  vkattn_add_shader(NAME attention_backward_q_tiled_${dtype} SOURCE attention_backward_q_tiled.comp DEFINES DTYPE_${DT}=1)
endforeach()

# A paged call's work list (no storage type) and the row softmax of the three-stage path (f32
# scores only): one module each, the softmax's also by quads (CPU devices, shaderInt64).
vkattn_add_shader(NAME attention_work_list SOURCE attention_work_list.comp)
vkattn_add_shader(NAME attention_softmax SOURCE attention_softmax.comp)
vkattn_add_shader(NAME attention_softmax_quads SOURCE attention_softmax.comp DEFINES SOFTMAX_QUADS=1)
# A cascade's key lengths of its two passes (int32 only).
vkattn_add_shader(NAME cascade_lengths SOURCE cascade_lengths.comp)

# The GEMM, one module per (A, B, C) storage-type combination the library uses, named
# gemm_<A>_<B>_<C> (and gemm_subgroup_<A>_<B>_<C>, the CPU devices' kernel): linear layers (d, d, d), scores (d, d, f32), the weighted sum (f32, d, d)
# and the three-stage backward's split partials of dK and dV (f32, d, f32).
set(_gemm_combinations "")
foreach(dtype f32 f16 bf16)
  list(APPEND _gemm_combinations "${dtype}_${dtype}_${dtype}" "${dtype}_${dtype}_f32" "f32_${dtype}_${dtype}" "f32_${dtype}_f32")
endforeach()
list(REMOVE_DUPLICATES _gemm_combinations)
foreach(combination IN LISTS _gemm_combinations)
  string(REPLACE "_" ";" _types ${combination})
  list(GET _types 0 _a)
  list(GET _types 1 _b)
  list(GET _types 2 _c)
  string(TOUPPER ${_a} _a)
  string(TOUPPER ${_b} _b)
  string(TOUPPER ${_c} _c)
  vkattn_add_shader(NAME gemm_${combination} SOURCE gemm.comp
                    DEFINES A_TYPE=TYPE_${_a} B_TYPE=TYPE_${_b} C_TYPE=TYPE_${_c})
  vkattn_add_shader(NAME gemm_subgroup_${combination} SOURCE gemm_subgroup.comp
                    DEFINES A_TYPE=TYPE_${_a} B_TYPE=TYPE_${_b} C_TYPE=TYPE_${_c})
  # Its build that may read A's and B's quads through uniform texel buffers (GEMM_TEXEL; CPU devices).
  vkattn_add_shader(NAME gemm_subgroup_texel_${combination} SOURCE gemm_subgroup.comp
                    DEFINES A_TYPE=TYPE_${_a} B_TYPE=TYPE_${_b} C_TYPE=TYPE_${_c} GEMM_TEXEL=1)
endforeach()

vkattn_write_shader_table()
