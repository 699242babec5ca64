// Push constants of attention_softmax.comp, defined once in shader_abi.h with the host's struct.
#ifndef VKATTN_SOFTMAX_PUSH_GLSL
#define VKATTN_SOFTMAX_PUSH_GLSL

#include "shader_abi.h"

layout(push_constant) uniform SoftmaxPush { SOFTMAX_PUSH_MEMBERS } pc;

#endif
