// Push constants of attention_combine.comp, defined once in shader_abi.h with the host's struct.
#ifndef VKATTN_COMBINE_PUSH_GLSL
#define VKATTN_COMBINE_PUSH_GLSL

#include "shader_abi.h"

layout(push_constant) uniform CombinePush { COMBINE_PUSH_MEMBERS } pc;

#endif
