// `vkattn run`: attention on .npy files, for checking the library against anything that can write
// numpy arrays (PyTorch, JAX, a reference script). Inputs are checked completely before a device is
// opened; outputs are written only after the run succeeded, each whole (see output_files.hpp).
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli_numbers.hpp"
#include "commands.hpp"
#include "heatmap_output.hpp"
#include "modifier_options.hpp"
#include "npy.hpp"
#include "output_files.hpp"
#include "run_call.hpp"
#include "run_dropout.hpp"
#include "run_gradients.hpp"
#include "run_inputs.hpp"
#include "run_paged.hpp"
#include "run_varlen.hpp"
#include "weights_budget.hpp"
#include "window_option.hpp"
#include "vkattn/attention.hpp"
#include "vkattn/buffer.hpp"
#include "vkattn/context.hpp"
#include "vkattn/error.hpp"

namespace vkattn::cli {
namespace {

// "--weights", "--heatmap" or "--weights/--heatmap": the options that asked for the weights P.
std::string weights_flags(const RunOptions& o) {
  std::string flags = o.weights.empty() ? "" : "--weights";
  if (!o.heatmap.empty()) flags += flags.empty() ? "--heatmap" : "/--heatmap";
  return flags;
}

int run(const RunOptions& options) {
  if (options.paged()) return run_paged(options);
  if (options.varlen()) return run_varlen(options);
  const AttentionPath path = parse_attention_path(options.path);
  const std::string flags = weights_flags(options);
  const bool want_weights = !flags.empty();
  if (want_weights && path == AttentionPath::fused)
    throw Error("--path fused cannot give " + flags +
                ": the fused path never stores the attention weights (use --path unfused or auto)");
  FlagPaths input_files = {{"--q", options.q}, {"--k", options.k}, {"--v", options.v}, {"--mask", options.mask},
                           {"--kv-lens", options.kv_lens}};
  append_per_head_files(options.per_head_files, input_files);
  input_files.push_back({"--grad-out", options.grad_out});
  FlagPaths outputs = {{"--out", options.out},         {"--lse", options.lse}, {"--weights", options.weights},
                       {"--heatmap", options.heatmap}, {"--dropout-mask", options.dropout_mask}};
  append_gradient_outputs(options, outputs);
  OutputFiles::check_destinations(outputs, input_files);
  RunInputs inputs = load_run_inputs(options);
  // The backward pass and dropout's output pass read the forward's LSE.
  if (apply_dropout_option(options, inputs.layouts.options) || options.backward()) inputs.layouts.has_lse = true;
  const AttentionLayouts& layouts = inputs.layouts;
  const std::vector<int64_t> out_shape = {layouts.out.batch, layouts.out.heads, layouts.out.seq, layouts.out.dim};
  const std::vector<float> grad_out = load_grad_out(options, layouts.out.dtype, out_shape);
  const AttentionProblem& problem = inputs.problem;
  if (!options.heatmap.empty())
    check_heatmap(options.heatmap, problem.batch, problem.heads, problem.seq_q, problem.seq_k);

  ContextOptions context_options;
  context_options.device = options.device;
  Context context(context_options);
  // Before anything is allocated: P grows with seq_q·seq_k and is the one buffer that may not fit.
  if (want_weights)
    check_weights_fit(problem.batch, problem.heads, problem.seq_q, problem.seq_k, context.device_info(), flags);

  // All of P for --weights; for --heatmap alone only the heads of batch 0 it draws.
  const int64_t weight_heads = options.weights.empty() ? heatmap_heads(problem.heads) : problem.batch * problem.heads;
  const uint64_t weight_count = want_weights ? uint64_t(weight_heads * problem.seq_q * problem.seq_k) : 0;
  const CallValues values{.q = inputs.q, .k = inputs.k, .v = inputs.v, .k_q8_0 = inputs.k_q8_0,
                          .v_q8_0 = inputs.v_q8_0, .mask = inputs.mask, .kv_lengths = inputs.kv_lengths,
                          .per_head = &inputs.per_head, .grad_out = grad_out};
  const CallResults r = run_call(context, AttentionSpec::dense(layouts, want_weights, path), values, weight_count);

  // O in Q's file dtype ('<f2' stays '<f2'), or float32 when computed in bf16 (numpy has no bf16).
  const std::vector<std::byte> out_file = output_npy(r.out, layouts.out.dtype, out_shape, inputs.out_f16);

  OutputFiles files;
  files.stage(options.out, out_file);
  const auto shape_of = [](const TensorLayout& t) { return std::vector<int64_t>{t.batch, t.heads, t.seq, t.dim}; };
  stage_gradients(files, options, r, layouts.out.dtype, inputs.out_f16, shape_of(layouts.q), shape_of(layouts.k),
                  shape_of(layouts.v));
  stage_dense_dropout_mask(files, options, layouts.options, problem.batch, problem.heads, problem.seq_q, problem.seq_k);
  if (!options.lse.empty()) {
    const std::vector<int64_t> shape = {problem.batch, problem.heads, problem.seq_q};
    files.stage(options.lse, npy::serialize_floats(shape, r.lse, false));
  }
  if (!options.weights.empty()) {
    const std::vector<int64_t> shape = {problem.batch, problem.heads, problem.seq_q, problem.seq_k};
    files.stage(options.weights, npy::serialize_floats(shape, r.weights, false));
  }
  if (!options.heatmap.empty()) stage_heatmap(files, options.heatmap, r.weights, problem.heads, problem.seq_q, problem.seq_k);
  files.commit();
  return 0;
}

}  // namespace

Command add_run_command(CLI::App& parent) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* app = parent.add_subcommand("run", "Run attention on .npy inputs and write O (and LSE, P) as .npy");
  app->footer("Outputs are written all or none: a regular file is replaced atomically, a symlink followed, a "
              "device or FIFO written through; read-only files and the inputs themselves are refused.");
  app->add_option("--q", o->q, "Q: (batch, heads, seq_q, dim_qk), '<f4' or '<f2'")->required();
  app->add_option("--k", o->k, "K: (batch, kv_heads, seq_k, dim_qk) (or a paged cache: --k-cache ...)");
  app->add_option("--v", o->v, "V: (batch, kv_heads, seq_k, dim_v)");
  app->add_option("--mask", o->mask,
                  "Mask: (seq_q, seq_k) or (B|1, H|1, seq_q, seq_k); bool (true = attend) or '<f4'/'<f2' (added)");
  app->add_option("--kv-lens", o->kv_lens, "Key lengths: (batch,) '<i4' or '<i8'; keys j >= kv_lens[b] are masked");
  app->add_option("--causal", o->causal, "Causal mask alignment")
      ->check(CLI::IsMember({"none", "top-left", "bottom-right"}))
      ->default_str("none");
  app->add_option("--scale", o->scale, "Score scale (default 1/sqrt(dim_qk)); any finite value")
      ->type_name("FLOAT")
      ->check(parsed_by("--scale", [](const std::string& s) { parse_float32(s, "--scale"); }));
  add_modifier_options(app, &o->modifiers);
  add_per_head_files(app, &o->per_head_files);
  app->add_option("--dtype", o->dtype, "Storage dtype to compute in (default: Q's; bf16 converts the inputs)")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}));
  app->add_option("--device", o->device, "Device index or name substring (default: VKATTN_DEVICE, else best)");
  app->add_option("--out", o->out, "Output O: (batch, heads, seq_q, dim_v) in Q's dtype (f32 for bf16)")->required();
  app->add_option("--lse", o->lse, "Optional log-sum-exp output: (batch, heads, seq_q) float32");
  app->add_option("--weights", o->weights,
                  "Optional attention weights P: (batch, heads, seq_q, seq_k) float32 (packed sequences: (heads, "
                  "total_q, total_k), 0 outside each row's sequence); 0 for masked keys and fully masked rows "
                  "(needs the unfused path)");
  app->add_option("--heatmap", o->heatmap,
                  "Draw batch 0's attention weights (first 16 heads) as a PNG (computes P even without --weights)");
  app->add_option("--path", o->path,
                  "auto: unfused when P is asked for, else fused; fused: one pass, never stores P; unfused: "
                  "scores, softmax, P·V")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "fused", "unfused"}));
  // A paged KV cache instead of --k/--v (run_paged.hpp).
  app->add_option("--k-cache", o->k_cache,
                  "Paged K cache instead of --k: (num_pages, page_size, kv_heads, dim_qk), or with --page-order hnd "
                  "(num_pages, kv_heads, page_size, dim_qk)");
  app->add_option("--v-cache", o->v_cache, "Paged V cache: (num_pages, page_size, kv_heads, dim_v) (hnd: heads first)");
  app->add_option("--page-order", o->page_order,
                  "How the caches order a page: nhd (page_size, kv_heads, dim), the default (FlashAttention, vLLM), "
                  "or hnd (kv_heads, page_size, dim) (FlashInfer's HND)")
      ->check(CLI::IsMember({"nhd", "hnd"}));
  app->add_option("--block-table", o->block_table,
                  "Pages of each sequence: (batch, max_pages) '<i4' or '<i8'; token t of sequence b is row "
                  "t % page_size of page block_table[b][t / page_size]");
  app->add_option("--cache-lens", o->cache_lens, "Tokens in each sequence's cache (its keys): (batch,) '<i4' or '<i8'");
  app->add_option("--k-new", o->k_new,
                  "Keys appended to the cache before attending: (batch, kv_heads, seq_new, dim_qk)");
  app->add_option("--v-new", o->v_new, "Values appended with --k-new: (batch, kv_heads, seq_new, dim_v)");
  app->add_option("--k-cache-out", o->k_cache_out, "Output: the K cache after the append, in O's dtype (q8_0: f32, the values its blocks hold)");
  app->add_option("--v-cache-out", o->v_cache_out, "Output: the V cache after the append, in O's dtype (q8_0: f32, the values its blocks hold)");
  app->add_option("--kv-dtype", o->kv_dtype,
                  "K and V (dense --k/--v, a paged cache or packed sequences) stored as ggml q8_0 blocks, quantized "
                  "from the float values given (quantize_q8_0: finite, dims multiples of 32; fused kernels only; "
                  "default: the compute dtype)")
      ->check(CLI::IsMember({"q8_0"}));
  // A packed variable-length batch instead of batched Q/K/V (run_varlen.hpp).
  app->add_option("--cu-seqlens-q", o->cu_seqlens_q,
                  "Packed sequences: Q (total_q, heads, dim_qk), K/V (total_k, kv_heads, dim) are 3-D and sequence b "
                  "is Q rows cu_q[b]..cu_q[b+1]-1: (batch + 1,) '<i4' or '<i8'; O is (total_q, heads, dim_v), "
                  "LSE (heads, total_q)");
  app->add_option("--cu-seqlens-k", o->cu_seqlens_k,
                  "With --cu-seqlens-q: sequence b attends K/V rows cu_k[b]..cu_k[b+1]-1 only; (batch + 1,)");
  app->add_option("--grad-out", o->grad_out,
                  "The backward pass: dO, O's shape; runs the forward, then writes the gradients --dq, --dk, --dv "
                  "(and --dsinks) in the inputs' layouts and dtype (float32 for bf16); dense or packed K and V");
  app->add_option("--dq", o->dq, "Output with --grad-out: dQ, Q's shape");
  app->add_option("--dk", o->dk, "Output with --grad-out: dK, K's shape (summed over each GQA group's query heads)");
  app->add_option("--dv", o->dv, "Output with --grad-out: dV, V's shape");
  app->add_option("--dsinks", o->dsinks, "Output with --grad-out and --sinks: dsinks, (heads,) float32");
  app->add_option("--dropout", o->dropout,
                  "Dropout probability P in [0, 1) on the attention weights (forward, and the backward with "
                  "--grad-out): O = (P∘keep/(1-P))·V, the keep mask drawn from Philox 4x32-10 by --seed")
      ->type_name("FLOAT")
      ->check(parsed_by("--dropout", [](const std::string& s) {
        const float p = parse_float32(s, "--dropout");
        if (!(p >= 0.0f && p < 1.0f)) throw Error("--dropout: must be in [0, 1), got " + s);
      }));
  app->add_option("--seed", o->seed, "Dropout's seed (default 0)");
  app->add_option("--dropout-mask", o->dropout_mask,
                  "Output with --dropout: the keep mask, (batch, heads, seq_q, seq_k) uint8, 1 = kept (packed: "
                  "(heads, total_q, total_k), 0 between sequences)");
  app->add_flag("--check", o->check,
                "Paged cache or packed sequences: compare O, LSE (and the caches after an append) with the fp64 "
                "CPU reference (one line on stdout; an error, and no outputs, when they differ)");
  // Which of --k/--v and the paged options go together: a usage error (exit 2), before any file is read.
  app->final_callback([o]() {
    if (const std::string error = run_usage_error(*o); !error.empty()) throw CLI::ValidationError(error);
  });
  return {app, [o]() { return run(*o); }};
}

}  // namespace vkattn::cli
