// The flag bits of the fused kernels' and the row softmax's push constants: shader_abi.h.
#ifndef VKATTN_ATTENTION_FLAGS_GLSL
#define VKATTN_ATTENTION_FLAGS_GLSL
#include "shader_abi.h"
#endif
