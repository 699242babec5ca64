// The score modifiers on the command line (docs/semantics.md, "Score modifiers"), shared by `vkattn run`,
// `bench` and `mha`: those that are options of the call, registered here once for every command (the
// per-head tensors are per_head_options.hpp's). Every bad value is one Error naming the option and
// the value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

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

// The modifier options of a call as `vkattn bench` reports them: each as a field of `fields` (its
// JSON record, null when not set), and as text, " window L:R align A ..." (empty when none is set).
void add_modifier_option_fields(const AttentionOptions& options, nlohmann::ordered_json& fields);
std::string modifier_options_text(const AttentionOptions& options);

}  // namespace vkattn::cli
