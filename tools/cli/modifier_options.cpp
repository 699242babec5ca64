#include "modifier_options.hpp"

#include <cmath>
#include <limits>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli_numbers.hpp"
#include "run_inputs.hpp"
#include "window_option.hpp"
#include "vkattn/error.hpp"

namespace vkattn::cli {
namespace {

// --softcap's value: a finite float32 > 0; throws Error "--softcap: ..." naming the value.
float parse_softcap(const std::string& text) {
  const float c = parse_float32(text, "--softcap");
  if (!(c > 0.0f)) throw Error("--softcap: " + text + " must be > 0");
  // (The library refuses the same: a device may flush a subnormal cap to 0.)
  if (c < std::numeric_limits<float>::min())
    throw Error("--softcap: " + text + " is subnormal (below 1.17549e-38, the smallest normal f32)");
  return c;
}

}  // namespace

void add_modifier_options(CLI::App* app, AttentionOptions* parsed) {
  // Each value is checked first (parsed_by: a bad one is a usage error naming it), then stored.
  app->add_option_function<std::string>(
         "--window", [parsed](const std::string& s) { parsed->window = parse_window(s); },
         "Sliding window L:R: key j is visible to query i iff i+off-L <= j <= i+off+R (each side >= 0, "
         "or -1 for unbounded; e.g. 4096:0 with --causal)")
      ->type_name("L:R")
      ->check(parsed_by("--window", [](const std::string& s) { parse_window(s); }));
  app->add_option_function<std::string>(
         "--align", [parsed](const std::string& s) { parsed->align = parse_align(s); },
         "Diagonal of the window and ALiBi without --causal (default bottom-right: off = seq_k - seq_q; "
         "top-left: off = 0); with --causal it must agree or be absent")
      ->check(CLI::IsMember({"top-left", "bottom-right"}));
  app->add_option_function<std::string>(
         "--softcap", [parsed](const std::string& s) { parsed->softcap = parse_softcap(s); },
         "Logit softcap C > 0: s = C*tanh(s/C) (Gemma 2)")
      ->type_name("FLOAT")
      ->check(parsed_by("--softcap", [](const std::string& s) { parse_softcap(s); }));
}

void add_modifier_option_fields(const AttentionOptions& o, nlohmann::ordered_json& fields) {
  using Json = nlohmann::ordered_json;
  fields["window"] = o.window ? Json::array({o.window->left, o.window->right}) : Json(nullptr);
  fields["align"] = o.align ? Json(to_string(*o.align)) : Json(nullptr);
  fields["softcap"] = o.softcap ? Json(*o.softcap) : Json(nullptr);
}

std::string modifier_options_text(const AttentionOptions& o) {
  std::string text;
  if (o.window) text += " window " + std::to_string(o.window->left) + ":" + std::to_string(o.window->right);
  if (o.align) text += std::string(" align ") + to_string(*o.align);
  if (o.softcap) text += " softcap " + nlohmann::ordered_json(*o.softcap).dump();
  return text;
}

void apply_modifier_options(const AttentionOptions& parsed, AttentionOptions& options) {
  options.window = parsed.window;
  options.align = parsed.align;
  options.softcap = parsed.softcap;
}

}  // namespace vkattn::cli
