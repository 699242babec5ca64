// Flag bits shared by the push constants of the fused kernels (attention_push.glsl) and of the
// row softmax of the three-stage path (softmax_push.glsl). Mirrored by host/attention_push.hpp.
#ifndef VKATTN_ATTENTION_FLAGS_GLSL
#define VKATTN_ATTENTION_FLAGS_GLSL

#define CAUSAL_MASK 3u        // bits 0-1: 0 none, 1 top-left, 2 bottom-right
#define CAUSAL_TOP_LEFT 1u
#define CAUSAL_BOTTOM_RIGHT 2u
#define MASK_KIND_SHIFT 2u    // bits 2-3: 0 none, 1 boolean (bytes), 2 f32, 3 f16
#define MASK_NONE 0u
#define MASK_BOOL 1u
#define MASK_F32 2u
#define MASK_F16 3u
#define FLAG_KV_LENGTHS 16u
#define FLAG_WRITE_LSE 32u
#define FLAG_PARTIAL 64u      // write per-split partial (O, LSE) to the workspace for the combine pass

#endif
