// `vkattn merge`: merge the partial results of attention over disjoint key ranges (O_i and LSE_i .npy
// files, e.g. one per device that attended its share of the keys) into the whole O and LSE, on the
// device (merge_attention_states, vkattn/merge_states.hpp).
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "npy.hpp"
#include "output_files.hpp"
#include "usage_error.hpp"
#include "vkattn/merge_states.hpp"
#include "vkattn/numeric.hpp"

namespace vkattn::cli {
namespace {

struct MergeOptions {
  std::vector<std::string> o, lse;
  std::string out, lse_out, dtype, device;
};

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + ")";
}

Buffer upload(Context& context, DType dtype, const std::vector<float>& values) {
  std::vector<std::byte> bytes(values.size() * dtype_size(dtype));
  encode(dtype, values.data(), bytes.data(), values.size());
  Buffer b = Buffer::allocate(context, bytes.size());
  b.upload(bytes.data(), bytes.size());
  return b;
}

std::vector<float> download(const Buffer& b, DType dtype, std::size_t count) {
  std::vector<std::byte> bytes(count * dtype_size(dtype));
  b.download(bytes.data(), bytes.size());
  std::vector<float> values(count);
  decode(dtype, bytes.data(), values.data(), count);
  return values;
}

int run_merge(const MergeOptions& o) {
  if (o.o.size() != o.lse.size())
    throw UsageError("--o and --lse: " + std::to_string(o.o.size()) + " outputs and " + std::to_string(o.lse.size()) +
                     " LSE files; give one --lse per --o, in the same order");
  if (o.o.size() > std::size_t(kMaxMergeParts))
    throw UsageError("--o: " + std::to_string(o.o.size()) + " parts; a merge takes at most " + std::to_string(kMaxMergeParts));
  FlagPaths outputs = {{"--out", o.out}};
  if (!o.lse_out.empty()) outputs.push_back({"--lse-out", o.lse_out});
  FlagPaths inputs;
  for (const std::string& p : o.o) inputs.push_back({"--o", p});
  for (const std::string& p : o.lse) inputs.push_back({"--lse", p});
  OutputFiles::check_destinations(outputs, inputs);

  // Every part: O (batch, heads, seq, dim) of one shape and file dtype, LSE (batch, heads, seq).
  std::vector<npy::Array> parts_o, parts_lse;
  for (std::size_t i = 0; i < o.o.size(); ++i) {
    parts_o.push_back(npy::read(o.o[i]));
    parts_lse.push_back(npy::read(o.lse[i]));
    const npy::Array &a = parts_o.back(), &l = parts_lse.back();
    if (a.shape.size() != 4) throw Error(o.o[i] + ": O of shape " + a.shape_string() + "; want (batch, heads, seq, dim)");
    if (a.shape != parts_o[0].shape || a.descr != parts_o[0].descr)
      throw Error(o.o[i] + ": " + a.descr + " " + a.shape_string() + ", but " + o.o[0] + " is " + parts_o[0].descr + " " +
                  parts_o[0].shape_string() + "; every part's O has one shape and dtype");
    const std::vector<int64_t> lse_shape(a.shape.begin(), a.shape.end() - 1);
    if (l.shape != lse_shape)
      throw Error(o.lse[i] + ": LSE of shape " + l.shape_string() + "; want " + shape_text(lse_shape) + " (its O's without dim)");
  }
  const std::vector<int64_t>& shape = parts_o[0].shape;
  const bool file_f16 = parts_o[0].kind == npy::Kind::f16;
  const DType dtype = o.dtype.empty() ? (file_f16 ? DType::f16 : DType::f32) : parse_dtype(o.dtype);

  ContextOptions options;
  options.device = o.device;
  Context context(options);
  MergeStatesSpec spec;
  spec.parts = int64_t(parts_o.size());
  spec.part = spec.out = TensorLayout::bhsd(dtype, shape[0], shape[1], shape[2], shape[3]);
  spec.lse = !o.lse_out.empty();
  check_merge_states(spec);
  std::vector<Buffer> o_buffers, lse_buffers;
  std::vector<const Buffer*> part_o;
  std::vector<BufferSlice> part_lse;
  for (std::size_t i = 0; i < parts_o.size(); ++i) {
    o_buffers.push_back(upload(context, dtype, npy::to_floats(parts_o[i], o.o[i])));
    lse_buffers.push_back(upload(context, DType::f32, npy::to_floats(parts_lse[i], o.lse[i])));
  }
  for (std::size_t i = 0; i < parts_o.size(); ++i) {
    part_o.push_back(&o_buffers[i]);
    part_lse.push_back({&lse_buffers[i], 0});
  }
  const std::size_t values = std::size_t(spec.out.required_elements()), rows = values / std::size_t(shape[3]);
  Buffer out = Buffer::allocate(context, values * dtype_size(dtype));
  Buffer lse = Buffer::allocate(context, rows * 4);
  merge_attention_states(context, spec, {part_o, part_lse, &out, spec.lse ? BufferSlice{&lse, 0} : BufferSlice{}});

  // O in the parts' file dtype ('<f2' stays '<f2'), float32 when computed in bf16 (numpy has no bf16).
  OutputFiles files;
  files.stage(o.out, npy::serialize_floats(shape, download(out, dtype, values), file_f16 && dtype == DType::f16));
  if (spec.lse) {
    const std::vector<int64_t> lse_shape(shape.begin(), shape.end() - 1);
    files.stage(o.lse_out, npy::serialize_floats(lse_shape, download(lse, DType::f32, rows), false));
  }
  files.commit();
  return 0;
}

}  // namespace

Command add_merge_command(CLI::App& parent) {
  auto o = std::make_shared<MergeOptions>();
  CLI::App* app = parent.add_subcommand(
      "merge", "Merge the results of attention over disjoint key ranges (each part's O and LSE) into the whole O and LSE");
  app->footer("Parts whose row saw no key (LSE -inf) add nothing; a row no part saw a key of gets O = 0 and LSE -inf "
              "(docs/semantics.md, \"Merging attention states\").");
  app->add_option("--o", o->o, "A part's O: (batch, heads, seq, dim), '<f4' or '<f2'; repeat, one per part")->required();
  app->add_option("--lse", o->lse, "That part's LSE: (batch, heads, seq), as `vkattn run --lse` writes it; one per --o")
      ->required();
  app->add_option("--out", o->out, "Output O: the parts' shape, in their file dtype (f32 for bf16)")->required();
  app->add_option("--lse-out", o->lse_out, "Optional output LSE: (batch, heads, seq) float32");
  app->add_option("--dtype", o->dtype, "Storage dtype to merge in (default: the parts' file dtype)")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}));
  app->add_option("--device", o->device, "Device index or name substring (default: VKATTN_DEVICE, else best)");
  return {app, [o]() { return run_merge(*o); }};
}

}  // namespace vkattn::cli
