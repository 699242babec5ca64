#include "bench_options.hpp"

#include <cstdint>
#include <limits>
#include <string>

#include "cli_numbers.hpp"
#include "modifier_options.hpp"
#include "window_option.hpp"

namespace vkattn::cli {
namespace {

// CLI::PositiveNumber would print DBL_MAX in full in its message.
CLI::Range positive_count() { return CLI::Range(1, std::numeric_limits<int32_t>::max()); }

// The shape: sizes, the KV layouts, the dtypes and the causal mask.
void add_shape_options(CLI::App* app, BenchOptions* o, GivenOptions& f) {
  const CLI::Range kPositive = positive_count();
  f.shape_options.push_back(app->add_option("--batch", o->batch, "Batch size")->capture_default_str()->check(kPositive));
  f.shape_options.push_back(app->add_option("--heads", o->heads, "Query heads")->capture_default_str()->check(kPositive));
  f.shape_options.push_back(
      app->add_option("--kv-heads", o->kv_heads, "Key/value heads (GQA/MQA; default: heads)")->check(kPositive));
  f.shape_options.push_back(app->add_option("--seq-q", o->seq_q, "Query sequence length(s), e.g. 512,1024,2048")
                              ->delimiter(',')
                              ->capture_default_str()
                              ->check(kPositive));
  f.shape_options.push_back(app->add_option("--seq-k", o->seq_k, "Key sequence length(s) (default: seq-q)")
                              ->delimiter(',')
                              ->check(kPositive));
  f.shape_options.push_back(
      app->add_option("--lengths", o->lengths,
                      "Keys of each sequence, one per batch entry (sets the batch without --batch), e.g. "
                      "32768,512,512: dense with kv_lengths and seq_k their maximum, with --paged the "
                      "sequences' cache lengths, with --varlen their key counts. FLOPs count each sequence's "
                      "visible pairs, kv GB/s its keys")
          ->delimiter(',')
          ->check(CLI::Range(int64_t{0}, int64_t{std::numeric_limits<int32_t>::max()})));
  f.shape_options.push_back(
      app->add_option("--paged", o->page_size,
                      "K and V in a paged KV cache of pages of this many tokens (a pool just big enough, pages "
                      "handed out shuffled, read through a block table), timed through the PreparedAttention of its PagedKv spec")
          ->check(kPositive));
  f.shape_options.push_back(
      app->add_option("--page-order", o->page_order,
                      "With --paged: nhd, pages of (page_size, kv_heads, dim) (the default: FlashAttention's and "
                      "vLLM's), or hnd, (kv_heads, page_size, dim) (FlashInfer's HND)")
          ->check(CLI::IsMember({"nhd", "hnd"})));
  f.shape_options.push_back(
      app->add_option("--shared-prefix", o->shared_prefix,
                      "With --paged: every sequence's block table starts with the same pages holding this many "
                      "tokens (whole pages, at most the shortest sequence: a prompt the batch shares); the call "
                      "reads them once for the batch (cascade, shared_prefix_pages found from the table) unless "
                      "--no-cascade")
          ->check(kPositive));
  f.shape_options.push_back(app->add_flag(
      "--no-cascade", o->no_cascade,
      "With --shared-prefix: the call as it would run without the cascade, each sequence reading the prefix "
      "(the same answers: the comparison's other half)"));
  f.shape_options.push_back(app->add_flag(
      "--v-view", o->v_view,
      "With --paged: one cache whose rows are K's, V read as their first --dim-v columns (multi-head latent "
      "attention, DeepSeek's MLA: 576-wide K rows, V their first 512), bound as one buffer and read once; kv "
      "GB/s counts K's bytes alone"));
  f.shape_options.push_back(
      app->add_option("--kv-layout", o->kv_layout,
                      "Dense K and V: bhsd, (batch, kv_heads, seq, dim) (the default), or bshd, (batch, seq, "
                      "kv_heads, dim) (PyTorch's before a transpose: a head's rows kv_heads * dim elements apart)")
          ->check(CLI::IsMember({"bhsd", "bshd"})));
  f.shape_options.push_back(app->add_flag(
      "--varlen", o->varlen,
      "The batch as one packed variable-length call (cu_seqlens), timed through the PreparedAttention of its PackedKv spec: "
      "each sequence's keys from --lengths, else drawn uniformly from [1, seq-k] for each of --batch "
      "sequences (seeded by --seed); its queries 1 when seq-q is 1, else drawn from [1, seq-q]. seq_q and "
      "seq_k report the longest"));
  f.shape_options.push_back(
      app->add_option("--kv-dtype", o->kv_dtype,
                      "K and V (dense, --paged or --varlen) stored as ggml q8_0 blocks (34 bytes per 32 values, quantized "
                      "from the random values; dims multiples of 32); kv GB/s counts the blocks' bytes")
          ->check(CLI::IsMember({"q8_0"})));
  f.shape_options.push_back(
      app->add_option("--dim", o->dim, "Head dim of Q and K (1..576)")->capture_default_str()->check(kPositive));
  f.shape_options.push_back(app->add_option("--dim-v", o->dim_v, "Head dim of V and O (default: dim)")->check(kPositive));
  f.dtype = app->add_option("--dtype", o->dtype, "Storage dtype (f32; f16 with --sweep)")
                           ->capture_default_str()
                           ->check(CLI::IsMember({"f32", "f16", "bf16"}));
  f.shape_options.push_back(app->add_option("--causal", o->causal,
                                          "Causal mask alignment. TFLOP/s count 2*(dim+dim_v) FLOPs per visible "
                                          "(query, key) pair, exactly for either alignment (seq_q != seq_k too); "
                                          "without a mask that is FlashAttention's 4*B*H*Sq*Sk*D")
                              ->capture_default_str()
                              ->check(CLI::IsMember({"none", "top-left", "bottom-right"})));
}

// How many runs are timed, and the inputs' seed.
void add_timing_options(CLI::App* app, BenchOptions* o, GivenOptions& f) {
  const CLI::Range kPositive = positive_count();
  f.warmup =
      app->add_option("--warmup", o->warmup, "Untimed runs first")->capture_default_str()->check(CLI::Range(0, 1000000));
  f.iters = app->add_option("--iters", o->iters, "Timed runs (median and minimum reported)")
                           ->capture_default_str()
                           ->check(kPositive);
  f.budget =
      app->add_option("--budget", o->budget_s,
                      "Seconds of GPU time the timed runs of each shape may take (fewer runs beyond it). Applies "
                      "without --warmup/--iters; given with them, it makes their counts caps rather than exact")
          ->capture_default_str()
      ->check(CLI::Range(0.001, 1e6));
  app->add_option("--seed", o->seed, "Seed of the random inputs")->capture_default_str();
}

// The score modifiers and split-KV.
void add_modifier_and_split_options(CLI::App* app, BenchOptions* o) {
  add_modifier_options(app, &o->modifiers);
  app->add_option("--splits", o->num_splits,
                  "Split-KV: cut each query tile's keys into this many parts, one workgroup each (the fused "
                  "path's num_splits; default: chosen from the device and the shape). Capped at the key tiles, "
                  "raised where the device needs more; the splits column shows what ran")
      ->check(CLI::Range(1u, 65535u));
  add_per_head_flags(app, &o->per_head);
}

// What else is measured and checked, the output format, the device and kernel, and the presets.
void add_run_options(CLI::App* app, BenchOptions* o, GivenOptions& f) {
  const CLI::Range kPositive = positive_count();
  app->add_flag("--check", o->check, "Compare with the fp64 CPU reference (sampled rows); fail beyond tolerance");
  app->add_flag("--backward", o->backward,
                "Time the backward pass (dQ, dK, dV) alone, its forward run before timing; FLOPs credited 2.5x the "
                "forward's; dense calls (with --path unfused, the three-stage forward and backward); --check compares "
                "every gradient with the fp64 reference");
  app->add_flag("--host-time", o->host_time,
                "Also measure the host microseconds per call of recording it into a command buffer");
  app->add_flag("--copy", o->copy,
                "Also time copying as many bytes as the call's K and V (vkCmdCopyBuffer, and a compute shader that "
                "copies 16 bytes per invocation) right after its runs, and report the GB/s at which the call reads "
                "K and V against both: on a decoding step, how close it streams the KV cache to the device's copy "
                "bandwidth");
  app->add_flag("--json", o->json, "Print JSON instead of a table");
  app->add_flag("--csv", o->csv, "Print CSV (a header, one row per shape) instead of a table");
  app->add_option("--device", o->device, "Device index or name substring (default: VKATTN_DEVICE, else best)");
  app->add_option("--kernel", o->kernel, "Fused-kernel variant (auto: subgroup on CPU devices; tiled on GPUs, except decode on GPUs of one subgroup size: the subgroup kernel's decode form)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "tiled", "rowwise", "subgroup"}));
  f.shape_options.push_back(
      app->add_option("--path", o->path,
                      "auto: the plan's choice; fused: the fused kernels; unfused: the three-stage path, writing the weights "
                      "P (B,H,Sq,Sk) (a paged cache's returns none)")
          ->capture_default_str()
          ->check(CLI::IsMember({"auto", "fused", "unfused"})));
  app->add_option("--sweep", o->sweep,
                  "A preset grid of shapes: prefill (FlashAttention's: 16k tokens, hidden 2048, dim 64/128/256, seq "
                  "512..16k, causal and not), decode (seq_q 1, seq_k 1k..128k, 32 heads, 8 KV heads, dim 128) or "
                  "scaling (seq 256..8k, fused and unfused, fitted growth of time and memory); reduced on CPU devices")
      ->check(CLI::IsMember({"prefill", "decode", "scaling"}));
  app->add_option("--max-seq", o->max_seq,
                  "With --sweep: only the preset's shapes whose sequence length (decode: seq_k) is at most this")
      ->check(kPositive);
  app->add_option("--max-memory", o->max_memory_mib,
                  "MiB of device buffers a shape may need (inputs, output, P); a sweep skips larger shapes, a "
                  "single run refuses them (default: the device's memory)")
      ->check(kPositive);
}

}  // namespace

GivenOptions add_bench_options(CLI::App* app, BenchOptions* o) {
  GivenOptions f;
  add_shape_options(app, o, f);
  add_timing_options(app, o, f);
  add_modifier_and_split_options(app, o);
  add_run_options(app, o, f);
  return f;
}


}  // namespace vkattn::cli
