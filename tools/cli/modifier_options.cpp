// The score options on the command line: one --NAME per row of vkattn/score_options.hpp, its value
// read by the syntax of its type (a real, a window L:R, an alignment) and checked by the row's check.
#include "modifier_options.hpp"

#include <type_traits>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli_numbers.hpp"
#include "run_inputs.hpp"
#include "window_option.hpp"
#include "vkattn/error.hpp"
#include "vkattn/score_options.hpp"

namespace vkattn::cli {
namespace {

// `text` as `row`'s value, set in `options`; throws Error "--NAME: ..." naming the value (the row's
// check included: what the library would refuse is a usage error here).
void parse_into(const ScoreOption& row, const std::string& text, AttentionOptions& options) {
  const std::string flag = "--" + std::string(row.name);
  std::visit(
      [&](auto member) {
        using Value = typename std::remove_reference_t<decltype(options.*member)>::value_type;
        if constexpr (std::is_same_v<Value, float>) options.*member = parse_float32(text, flag);
        if constexpr (std::is_same_v<Value, Window>) options.*member = parse_window(text, flag);
        if constexpr (std::is_same_v<Value, Align>) {
          if (text != "top-left" && text != "bottom-right")
            throw Error(flag + ": '" + text + "' is not top-left or bottom-right");
          options.*member = parse_align(text);
        }
      },
      row.member);
  AttentionOptions alone;  // the value alone: whether it agrees with causal is the call's check
  row.copy(options, alone);
  try {
    row.check(alone);
  } catch (const Error& e) {
    throw Error("--" + std::string(e.what()));
  }
}

const char* value_name(const ScoreOption& row) {
  switch (row.member.index()) {
    case 0:
      return "FLOAT";
    case 1:
      return "L:R";
    default:
      return "top-left|bottom-right";
  }
}

}  // namespace

void add_modifier_options(CLI::App* app, AttentionOptions* parsed) {
  for (const ScoreOption& row : score_options()) {
    const std::string flag = "--" + std::string(row.name);
    // Checked first (parsed_by: a bad value is a usage error naming it), then stored.
    app->add_option_function<std::string>(
           flag, [parsed, &row](const std::string& s) { parse_into(row, s, *parsed); }, std::string(row.help))
        ->type_name(value_name(row))
        ->check(parsed_by(flag, [&row](const std::string& s) {
          AttentionOptions scratch;
          parse_into(row, s, scratch);
        }));
  }
}

void add_modifier_option_fields(const AttentionOptions& o, nlohmann::ordered_json& fields) {
  for (const ScoreOption& row : score_options())
    std::visit(
        [&](auto member) {
          const auto& value = o.*member;
          using Value = typename std::remove_cvref_t<decltype(value)>::value_type;
          nlohmann::ordered_json& field = fields[std::string(row.name)];
          if (!value) field = nullptr;
          else if constexpr (std::is_same_v<Value, Window>) field = {value->left, value->right};
          else if constexpr (std::is_same_v<Value, Align>) field = to_string(*value);
          else field = *value;
        },
        row.member);
}

std::string modifier_options_text(const AttentionOptions& o) { return score_options_text(o, " "); }

void apply_modifier_options(const AttentionOptions& parsed, AttentionOptions& options) {
  copy_score_options(parsed, options);
}

}  // namespace vkattn::cli
