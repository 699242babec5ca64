// The score modifiers on the command line (README, "Score modifiers"), shared by `vkattn run`,
// `bench` and `mha`: those that are options of the call (registered here once, for every command),
// and the per-head tensors (ALiBi slopes, sink logits) as .npy files. Every bad value is one Error
// naming the option and the value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "vkattn/types.hpp"

namespace CLI {
class App;
}

namespace vkattn::cli {

// Registers the modifier options on a command. Each value is checked at parse time (parsed_by), so
// that a bad one is a usage error naming the option, and then stored in `parsed` (only the modifier
// fields of it are set).
void add_modifier_options(CLI::App* app, AttentionOptions* parsed);

// Copies the modifier options that add_modifier_options parsed into a call's options. Whether the
// alignment agrees with --causal is the library's check (check_attention), with its message.
void apply_modifier_options(const AttentionOptions& parsed, AttentionOptions& options);

// Per-head f32 values read from an .npy file: (heads,), or (batch, heads) where `per_batch_allowed`.
struct HeadValues {
  HeadValuesLayout layout;
  std::vector<float> values;
};

// Reads `path` for `option` ("--alibi", "--sinks"): '<f4' only, finite values, shape (heads,) or
// (batch, heads); throws Error naming the option, the file and what is wrong.
HeadValues load_head_values(const std::string& path, const char* option, int64_t batch, int64_t heads,
                            bool per_batch_allowed);

}  // namespace vkattn::cli
