// `vkattn run`: attention on .npy files, for checking the library against anything that can write
// numpy arrays (PyTorch, JAX, a reference script). Inputs are checked completely before a device is
// opened; outputs are written only after the run succeeded, each whole (see output_files.hpp).
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "commands.hpp"
#include "npy.hpp"
#include "output_files.hpp"
#include "run_inputs.hpp"
#include "vkattn/attention.hpp"
#include "vkattn/buffer.hpp"
#include "vkattn/context.hpp"
#include "vkattn/error.hpp"
#include "vkattn/numeric.hpp"

namespace vkattn::cli {
namespace {

// Buffer::allocate wants at least one byte; an empty tensor still gets a (tiny) buffer.
Buffer allocate(Context& context, uint64_t bytes) { return Buffer::allocate(context, std::max<uint64_t>(bytes, 16)); }

Buffer upload_tensor(Context& context, const TensorLayout& layout, const std::vector<float>& values) {
  const DType dtype = layout.dtype;
  std::vector<std::byte> bytes(values.size() * dtype_size(dtype));
  encode(dtype, values.data(), bytes.data(), values.size());
  Buffer buffer = allocate(context, bytes.size());
  if (!bytes.empty()) buffer.upload(bytes.data(), bytes.size());
  return buffer;
}

int run(const RunOptions& options) {
  if (!options.lse.empty() && options.lse == options.out)
    throw Error("--lse and --out name the same file (" + options.out + ")");
  OutputFiles::check_destination(options.out);
  if (!options.lse.empty()) OutputFiles::check_destination(options.lse);
  const RunInputs inputs = load_run_inputs(options);
  const AttentionLayouts& layouts = inputs.layouts;
  const AttentionProblem& problem = inputs.problem;

  ContextOptions context_options;
  context_options.device = options.device;
  Context context(context_options);

  Buffer q = upload_tensor(context, layouts.q, inputs.q);
  Buffer k = upload_tensor(context, layouts.k, inputs.k);
  Buffer v = upload_tensor(context, layouts.v, inputs.v);
  const uint64_t out_bytes = static_cast<uint64_t>(layouts.out.element_count()) * dtype_size(layouts.out.dtype);
  Buffer out = allocate(context, out_bytes);
  const uint64_t rows = static_cast<uint64_t>(problem.batch * problem.heads * problem.seq_q);
  // Optional buffers: std::optional rather than default-constructed Buffers (see the report on
  // buffer.hpp: Buffer() = default needs Allocation complete).
  std::optional<Buffer> lse, mask, kv_lengths;

  AttentionArgs args;
  args.q = {&q, layouts.q};
  args.k = {&k, layouts.k};
  args.v = {&v, layouts.v};
  args.out = {&out, layouts.out};
  args.options = layouts.options;
  if (layouts.has_lse) {
    lse.emplace(allocate(context, rows * sizeof(float)));
    args.lse = {&*lse, 0};
  }
  if (layouts.mask) {
    mask.emplace(allocate(context, inputs.mask.size()));
    if (!inputs.mask.empty()) mask->upload(inputs.mask.data(), inputs.mask.size());
    args.mask = {&*mask, *layouts.mask};
  }
  if (layouts.has_kv_lengths) {
    kv_lengths.emplace(allocate(context, inputs.kv_lengths.size() * sizeof(int32_t)));
    if (!inputs.kv_lengths.empty())
      kv_lengths->upload(inputs.kv_lengths.data(), inputs.kv_lengths.size() * sizeof(int32_t));
    args.kv_lengths = {&*kv_lengths, 0};
  }

  attention(context, args);

  // O in Q's file dtype ('<f2' stays '<f2'), or float32 when computed in bf16 (numpy has no bf16).
  std::vector<std::byte> out_raw(out_bytes);
  if (out_bytes) out.download(out_raw.data(), out_bytes);
  const std::vector<int64_t> out_shape = {layouts.out.batch, layouts.out.heads, layouts.out.seq, layouts.out.dim};
  std::vector<std::byte> out_file;
  if (inputs.out_f16 && layouts.out.dtype == DType::f16) {
    out_file = npy::serialize(out_shape, "<f2", out_raw);
  } else {
    std::vector<float> values(static_cast<std::size_t>(layouts.out.element_count()));
    decode(layouts.out.dtype, out_raw.data(), values.data(), values.size());
    out_file = npy::serialize_floats(out_shape, values, inputs.out_f16);
  }

  OutputFiles files;
  files.stage(options.out, out_file);
  if (layouts.has_lse) {
    std::vector<float> values(rows);
    if (rows) lse->download(values.data(), rows * sizeof(float));
    const std::vector<int64_t> shape = {problem.batch, problem.heads, problem.seq_q};
    files.stage(options.lse, npy::serialize_floats(shape, values, false));
  }
  files.commit();
  return 0;
}

}  // namespace

Command add_run_command(CLI::App& parent) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* app = parent.add_subcommand("run", "Run attention on .npy inputs and write O (and LSE) as .npy");
  app->add_option("--q", o->q, "Q: (batch, heads, seq_q, dim_qk), '<f4' or '<f2'")->required();
  app->add_option("--k", o->k, "K: (batch, kv_heads, seq_k, dim_qk)")->required();
  app->add_option("--v", o->v, "V: (batch, kv_heads, seq_k, dim_v)")->required();
  app->add_option("--mask", o->mask,
                  "Mask: (seq_q, seq_k) or (B|1, H|1, seq_q, seq_k); bool (true = attend) or '<f4'/'<f2' (added)");
  app->add_option("--kv-lens", o->kv_lens, "Key lengths: (batch,) '<i4' or '<i8'; keys j >= kv_lens[b] are masked");
  app->add_option("--causal", o->causal, "Causal mask alignment")
      ->check(CLI::IsMember({"none", "top-left", "bottom-right"}))
      ->default_str("none");
  app->add_option("--scale", o->scale, "Score scale (default 1/sqrt(dim_qk)); any finite value");
  app->add_option("--dtype", o->dtype, "Storage dtype to compute in (default: Q's; bf16 converts the inputs)")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}));
  app->add_option("--device", o->device, "Device index or name substring (default: VKATTN_DEVICE, else best)");
  app->add_option("--out", o->out, "Output O: (batch, heads, seq_q, dim_v) in Q's dtype (f32 for bf16)")->required();
  app->add_option("--lse", o->lse, "Optional log-sum-exp output: (batch, heads, seq_q) float32");
  return {app, [o]() { return run(*o); }};
}

}  // namespace vkattn::cli
