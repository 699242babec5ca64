#include "modifier_options.hpp"

#include <cmath>
#include <limits>

#include <CLI/CLI.hpp>

#include "cli_numbers.hpp"
#include "npy.hpp"
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

void apply_modifier_options(const AttentionOptions& parsed, AttentionOptions& options) {
  options.window = parsed.window;
  options.align = parsed.align;
  options.softcap = parsed.softcap;
}

HeadValues load_head_values(const std::string& path, const char* option, int64_t batch, int64_t heads,
                            bool per_batch_allowed) {
  const std::string what = std::string(option) + " (" + path + ")";
  const npy::Array array = npy::read(path);
  if (array.kind != npy::Kind::f32)
    throw Error(what + ": dtype '" + array.descr + "' is not supported; use float32 ('<f4')");
  const std::string shapes = "(heads,) = (" + std::to_string(heads) + ",)" +
                             (per_batch_allowed ? " or (batch, heads) = (" + std::to_string(batch) + ", " +
                                                      std::to_string(heads) + ")"
                                                : std::string());
  const auto& s = array.shape;
  const bool per_head = s.size() == 1 && s[0] == heads;
  const bool per_batch = per_batch_allowed && s.size() == 2 && s[0] == batch && s[1] == heads;
  if (!per_head && !per_batch) throw Error(what + ": shape " + array.shape_string() + " must be " + shapes);
  HeadValues h;
  h.layout = HeadValuesLayout{per_batch ? batch : 1, heads, 0};
  h.values = npy::to_floats(array, path);
  for (std::size_t i = 0; i < h.values.size(); ++i)
    if (!std::isfinite(h.values[i]))
      throw Error(what + ": value " + std::to_string(i) + " is not finite (" + std::to_string(h.values[i]) + ")");
  return h;
}

}  // namespace vkattn::cli
