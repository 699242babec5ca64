// `vkattn mha`: a torch.nn.MultiheadAttention(batch_first=True) layer on the GPU, from its state_dict
// saved as .npz and batch-first .npy inputs — to check the layer against PyTorch, or to run it
// without writing C++. Everything is checked before a device is opened; outputs are written only
// after the run succeeded (output_files.hpp).
#include <memory>
#include <string>
#include <vector>

#include "cli_numbers.hpp"
#include "commands.hpp"
#include "heatmap_output.hpp"
#include "mha_inputs.hpp"
#include "modifier_options.hpp"
#include "npy.hpp"
#include "npz_write.hpp"
#include "output_files.hpp"
#include "usage_error.hpp"
#include "vkattn/context.hpp"
#include "vkattn/error.hpp"
#include "vkattn/mha.hpp"
#include "vkattn/numeric.hpp"
#include "weights_budget.hpp"
#include "window_option.hpp"

namespace vkattn::cli {
namespace {

// The per-head weights' state_dict names, "alibi_slopes and sinks" (per_head_weight_name).
std::string per_head_weight_names() {
  std::string s;
  for (std::size_t i = 0; i < kPerHeadTensors.size(); ++i)
    s += std::string(i == 0 ? "" : i + 1 == kPerHeadTensors.size() ? " and " : ", ") + per_head_weight_name(kPerHeadTensors[i]);
  return s;
}

// "--attn-weights", "--heatmap" or "--attn-weights/--heatmap": the options that asked for P.
std::string weights_flags(const MhaOptions& o) {
  std::string flags = o.attn_weights.empty() ? "" : "--attn-weights";
  if (!o.heatmap.empty()) flags += flags.empty() ? "--heatmap" : "/--heatmap";
  return flags;
}

// (batch, H, Sq, Sk) -> (batch, Sq, Sk): the mean over heads, torch's average_attn_weights.
std::vector<float> average_heads(const std::vector<float>& p, int64_t batch, int64_t heads, int64_t block) {
  std::vector<float> mean(static_cast<std::size_t>(batch * block), 0.0f);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t n = 0; n < block; ++n) {
      double sum = 0.0;
      for (int64_t h = 0; h < heads; ++h) sum += p[static_cast<std::size_t>((b * heads + h) * block + n)];
      mean[static_cast<std::size_t>(b * block + n)] = static_cast<float>(sum / static_cast<double>(heads));
    }
  return mean;
}

// --grad-out: dY, which must have the output's shape (a usage error otherwise: exit 2, nothing written).
std::vector<float> load_grad_out(const std::string& path, int64_t batch, int64_t seq_q, int64_t embed) {
  const npy::Array a = npy::read(path);
  const std::vector<int64_t> want = {batch, seq_q, embed};
  if (a.shape != want)
    throw UsageError(path + ": --grad-out must have the output's shape (batch, seq_q, E) = (" + std::to_string(batch) +
                     ", " + std::to_string(seq_q) + ", " + std::to_string(embed) + "), got " + a.shape_string());
  return npy::to_floats(a, path);
}

// Every gradient under its state_dict name (the packed in_proj_weight exactly when the layer's
// state_dict has it: mha_state_dict.hpp), then query, key and value; f32.
std::vector<std::byte> gradients_npz(const MhaBackwardResult& g, const MhaWeights& w, const MhaLoaded& l) {
  const int64_t E = w.embed_dim, kvd = w.effective_kv_heads() * (E / w.num_heads);
  std::vector<npz::Member> members;
  const auto add = [&](const std::string& name, std::vector<int64_t> shape, const std::vector<float>& values) {
    members.emplace_back(name, npy::serialize_floats(shape, values, false));
  };
  if (g.kdim == E && g.vdim == E && w.effective_kv_heads() == w.num_heads) {
    add("in_proj_weight", {E + 2 * kvd, E}, g.in_proj_weight());
  } else {
    add("q_proj_weight", {E, E}, g.q_proj_weight);
    add("k_proj_weight", {kvd, g.kdim}, g.k_proj_weight);
    add("v_proj_weight", {kvd, g.vdim}, g.v_proj_weight);
  }
  if (w.bias) add("in_proj_bias", {E + 2 * kvd}, g.in_proj_bias);
  add("out_proj.weight", {E, E}, g.out_proj_weight);
  if (w.bias) add("out_proj.bias", {E}, g.out_proj_bias);
  if (!g.sinks.empty()) add(per_head_weight_name(PerHeadTensor::sinks), {w.num_heads}, g.sinks);
  add("query", {l.batch, l.seq_q, E}, g.query);
  if (!l.key.empty()) {
    add("key", {l.batch, l.seq_k, g.kdim}, g.key);
    add("value", {l.batch, l.seq_k, g.vdim}, g.value);
  }
  return npz::serialize(members);
}

int run(const MhaOptions& o) {
  const AttentionPath path = parse_attention_path(o.path);
  const std::string flags = weights_flags(o);
  const bool want_weights = !flags.empty();
  if (want_weights && path == AttentionPath::fused)
    throw Error("--path fused cannot give " + flags +
                ": the fused path never stores the attention weights (use --path unfused or auto)");
  if (o.grad_out.empty() != o.grads_out.empty())
    throw UsageError("--grad-out and --grads-out go together: the output's gradient in, every gradient out");
  OutputFiles::check_destinations({{"--out", o.out}, {"--attn-weights", o.attn_weights}, {"--heatmap", o.heatmap},
                                   {"--grads-out", o.grads_out}},
                                  {{"--weights", o.weights},
                                   {"--grad-out", o.grad_out},
                                   {"--query", o.query},
                                   {"--key", o.key},
                                   {"--value", o.value},
                                   {"--key-padding-mask", o.key_padding_mask},
                                   {"--attn-mask", o.attn_mask}});
  const MhaLoaded loaded = load_mha_inputs(o);
  const int64_t B = loaded.batch, H = loaded.weights.num_heads, Sq = loaded.seq_q, Sk = loaded.seq_k;
  const int64_t E = loaded.weights.embed_dim;
  if (!o.heatmap.empty()) check_heatmap(o.heatmap, B, H, Sq, Sk);
  const std::vector<float> grad_out = o.grad_out.empty() ? std::vector<float>{} : load_grad_out(o.grad_out, B, Sq, E);

  ContextOptions context_options;
  context_options.device = o.device;
  Context context(context_options);
  // The layer computes P per head even when averaged, so that is what has to fit.
  if (want_weights) check_weights_fit(B, H, Sq, Sk, context.device_info(), flags);

  MultiHeadAttention layer(context, loaded.weights, loaded.dtype);
  MhaInputs inputs = loaded.inputs();
  inputs.need_weights = want_weights;
  inputs.average_weights = false;  // per head: the heatmap draws heads; averaged below when asked
  const MhaResult result = layer.forward(inputs, path);

  OutputFiles files;
  const std::vector<int64_t> out_shape = {B, Sq, E};
  files.stage(o.out, npy::serialize_floats(out_shape, result.out, loaded.out_f16));
  if (!o.attn_weights.empty()) {
    if (o.average_weights) {
      const std::vector<int64_t> shape = {B, Sq, Sk};
      files.stage(o.attn_weights, npy::serialize_floats(shape, average_heads(result.weights, B, H, Sq * Sk), false));
    } else {
      const std::vector<int64_t> shape = {B, H, Sq, Sk};
      files.stage(o.attn_weights, npy::serialize_floats(shape, result.weights, false));
    }
  }
  if (!o.heatmap.empty()) stage_heatmap(files, o.heatmap, result.weights, H, Sq, Sk);
  if (!o.grads_out.empty()) {
    inputs.need_weights = false;
    files.stage(o.grads_out, gradients_npz(layer.backward(inputs, grad_out, path), loaded.weights, loaded));
  }
  files.commit();
  return 0;
}

}  // namespace

Command add_mha_command(CLI::App& parent) {
  auto o = std::make_shared<MhaOptions>();
  CLI::App* app = parent.add_subcommand(
      "mha", "Run a torch.nn.MultiheadAttention layer (batch_first) from its state_dict (.npz) on .npy inputs");
  app->footer("Outputs are written all or none: a regular file is replaced atomically, a symlink followed, a "
              "device or FIFO written through; read-only files and the inputs themselves are refused.");
  app->add_option("--weights", o->weights,
                  "state_dict as .npz: in_proj_weight (3E,E) or q/k/v_proj_weight, in_proj_bias, out_proj.weight, "
                  "out_proj.bias; optional per-head f32 (H,) " + per_head_weight_names() + " (vkattn's score modifiers)")
      ->required();
  app->add_option("--query", o->query, "Query: (batch, seq_q, E), '<f4' or '<f2'")->required();
  app->add_option("--key", o->key, "Key: (batch, seq_k, kdim); with --value; both omitted = self-attention");
  app->add_option("--value", o->value, "Value: (batch, seq_k, vdim)");
  app->add_option("--heads", o->heads, "Number of heads H (E % H == 0)")->required()->check(CLI::Range(1, 1 << 20));
  app->add_option("--kv-heads", o->kv_heads, "KV heads (GQA; default: from k_proj_weight, else H)")
      ->check(CLI::Range(1, 1 << 20));
  app->add_option("--causal", o->causal, "Causal mask alignment")
      ->check(CLI::IsMember({"none", "top-left", "bottom-right"}))
      ->default_str("none");
  add_modifier_options(app, &o->modifiers);
  app->add_option("--key-padding-mask", o->key_padding_mask,
                  "(batch, seq_k) bool or int: nonzero = IGNORE the key (torch's convention)");
  app->add_option("--attn-mask", o->attn_mask,
                  "(seq_q, seq_k) float32 added to the scores, or bool with True = NOT allowed (torch's layer)");
  app->add_option("--dtype", o->dtype, "Storage dtype to compute in (default: the query's)")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}));
  app->add_option("--path", o->path, "Attention kernels: auto (unfused when weights are asked for), fused, unfused")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "fused", "unfused"}));
  app->add_option("--device", o->device, "Device index or name substring (default: VKATTN_DEVICE, else best)");
  app->add_option("--out", o->out, "Output: (batch, seq_q, E) float32 ('<f2' for a '<f2' query computed in f16)")
      ->required();
  CLI::Option* attn_weights = app->add_option("--attn-weights", o->attn_weights,
                                              "Optional attention weights: (batch, H, seq_q, seq_k) float32");
  app->add_flag("--average-weights", o->average_weights, "Write the weights averaged over heads: (batch, seq_q, seq_k)")
      ->needs(attn_weights);
  app->add_option("--grad-out", o->grad_out,
                  "The backward: the gradient of the output, (batch, seq_q, E) '<f4' or '<f2'; with --grads-out");
  app->add_option("--grads-out", o->grads_out,
                  "Write every gradient as float32 .npz: each state_dict entry's under its name, and query's "
                  "(self-attention: the whole input's), key's and value's");
  app->add_option("--heatmap", o->heatmap, "Draw batch 0's per-head attention weights (first 16 heads) as a PNG");
  return {app, [o]() { return run(*o); }};
}

}  // namespace vkattn::cli
