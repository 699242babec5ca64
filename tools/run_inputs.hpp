// The inputs of `vkattn run`: .npy files read, converted and checked before any device is touched,
// so a bad file or a shape that does not agree fails fast, with one message, and writes nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "modifier_options.hpp"
#include "vkattn/problem.hpp"
#include "vkattn/types.hpp"

namespace vkattn::cli {

// What the user passed (paths and flag values as typed).
struct RunOptions {
  std::string q, k, v, mask, kv_lens, out, lse;  // empty = absent
  std::string weights, heatmap;                   // empty = absent; either needs the unfused path
  std::string path = "auto";                      // auto | fused | unfused
  std::string causal = "none";
  std::string scale;  // empty = default 1/sqrt(dim_qk); parsed as float, "inf"/"nan" included
  std::string dtype;  // empty = Q's dtype
  std::string device;
  ModifierOptions modifiers;  // --window, --align, --softcap
  std::string alibi, sinks;   // .npy files; empty = absent
};

struct RunInputs {
  AttentionLayouts layouts;  // dense BHSD layouts in the compute dtype; checked
  AttentionProblem problem;
  std::vector<float> q, k, v;      // values as read (rounded to the dtype on upload)
  std::vector<std::byte> mask;     // device bytes for layouts.mask: 0/1 bytes, f32 or f16
  std::vector<int32_t> kv_lengths;  // empty when absent
  std::optional<HeadValues> alibi, sinks;  // with layouts.alibi / layouts.sinks
  bool out_f16 = false;             // write O as '<f2' (Q was '<f2' and the dtype is not bf16)
};

// Reads and checks everything; throws vkattn::Error naming the file or the argument.
RunInputs load_run_inputs(const RunOptions& options);

// Parses a --scale value like a C float literal ("0.125", "-2", "1e-3", "inf", "nan"); throws Error
// when it is not a number. Non-finite values are returned as such (and rejected by the checks).
float parse_float(const std::string& text, const std::string& what);

}  // namespace vkattn::cli
