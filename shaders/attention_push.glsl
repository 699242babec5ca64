// Push constants of the fused kernels (attention_tiled.comp, attention_rowwise.comp), defined once
// in shader_abi.h with the host's struct.
#ifndef VKATTN_ATTENTION_PUSH_GLSL
#define VKATTN_ATTENTION_PUSH_GLSL

#include "shader_abi.h"

layout(push_constant) uniform AttentionPush { ATTENTION_PUSH_MEMBERS } pc;

#endif
