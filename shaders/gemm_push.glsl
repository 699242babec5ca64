// Push constants and flag bits of gemm.comp, defined once in shader_abi.h with the host's struct.
#ifndef VKATTN_GEMM_PUSH_GLSL
#define VKATTN_GEMM_PUSH_GLSL

#include "shader_abi.h"

layout(push_constant) uniform GemmPush { GEMM_PUSH_MEMBERS } pc;

#endif
