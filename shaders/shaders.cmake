# The compute shaders, one SPIR-V module per (kernel, storage dtype). Sizes are specialization
# constants set at pipeline creation; only the storage type is a compile-time macro because it
# changes the buffers' declared element types.
foreach(dtype f32 f16 bf16)
  string(TOUPPER ${dtype} DT)
  vkattn_add_shader(NAME attention_fused_${dtype} SOURCE attention_fused.comp DEFINES DTYPE_${DT}=1)
  vkattn_add_shader(NAME attention_rowwise_${dtype} SOURCE attention_rowwise.comp DEFINES DTYPE_${DT}=1)
  vkattn_add_shader(NAME attention_combine_${dtype} SOURCE attention_combine.comp DEFINES DTYPE_${DT}=1)
endforeach()
vkattn_write_shader_table()
