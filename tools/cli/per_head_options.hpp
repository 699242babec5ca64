// The per-head tensors (vkattn/per_head.hpp) on the command line, for every command and K/V source,
// each under its name (per_head_option: `--alibi`, ...): `vkattn run` reads each from an .npy file;
// `vkattn bench` gives every head a fixed value when its flag is set. Every bad file is one Error
// naming the option, the file and what is wrong.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "output_files.hpp"
#include "vkattn/buffer.hpp"
#include "vkattn/context.hpp"
#include "vkattn/per_head.hpp"

namespace CLI {
class App;
}

namespace vkattn::cli {

std::string per_head_option(PerHeadTensor tensor);  // "--" and to_string(tensor)

// Registers each tensor's option: a file (`vkattn run`) or a flag (`vkattn bench`).
void add_per_head_files(CLI::App* app, PerHead<std::string>* files);
void add_per_head_flags(CLI::App* app, PerHead<bool>* given);

// How `vkattn bench` describes a tensor it ran with: "ALiBi (slopes 2^(-8(h+1)/H))", ...
const char* per_head_bench_label(PerHeadTensor tensor);

// The given files as (option, path) pairs, for OutputFiles::check_destinations' inputs.
void append_per_head_files(const PerHead<std::string>& files, FlagPaths& inputs);

// Per-head f32 values read from an .npy file: (heads,), or (batch, heads) where allows_batch_rows.
struct HeadValues {
  HeadValuesLayout layout;
  std::vector<float> values;
};

// Reads `path` for `tensor`'s option: '<f4' only, finite values, shape (heads,) or (batch, heads).
HeadValues load_head_values(const std::string& path, PerHeadTensor tensor, int64_t batch, int64_t heads);

// The tensors of one call, read or made, with their layouts.
struct PerHeadInputs {
  PerHead<std::optional<HeadValues>> tensors;

  // Reads each given file and sets its layout in `layouts`.
  static PerHeadInputs load(const PerHead<std::string>& files, int64_t batch, int64_t heads, PerHeadLayouts& layouts);
  // What `vkattn bench` runs with: for each flag set, every head's fixed value (ALiBi's slopes
  // 2^(-8(h+1)/H), exact for a power of two; sink logits around 0, as a trained model's are), (heads).
  static PerHeadInputs fixed(const PerHead<bool>& given, int64_t heads);

  // Spans into `tensors`, with their layouts, for the references.
  PerHeadValues reference() const;
  // Uploads each (f32) into `storage` and returns the buffers (nullptr where absent).
  PerHead<const Buffer*> upload(Context& context, PerHead<std::optional<Buffer>>& storage) const;
};

}  // namespace vkattn::cli
