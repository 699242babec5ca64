// `vkattn prepare`: open a Context, build the pipelines the default path uses (Context::
// prepare_pipelines) and save them to a pipeline cache file, timing each step and each pipeline. Run it once at install
// time to ship a warm cache, or twice to see what the cache saves on this device (cold vs warm).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "vkattn/context.hpp"
#include "vkattn/problem.hpp"
#include "vkattn/types.hpp"

namespace vkattn::cli {
namespace {

struct PrepareOptions {
  std::string device;
  std::string dtype = "f32";
  std::vector<int64_t> dims = {64, 128};
  std::string cache_file;
  bool no_save = false;
};

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

Command add_prepare_command(CLI::App& parent) {
  auto o = std::make_shared<PrepareOptions>();
  CLI::App* app = parent.add_subcommand(
      "prepare", "Build the default path's pipelines, timed, and save them to a pipeline cache file");
  app->add_option("--pipeline-cache", o->cache_file,
                  "Pipeline cache file: loaded when it exists (ignored when damaged or for another "
                  "device/driver), then saved");
  app->add_flag("--no-save", o->no_save, "Do not write the pipeline cache file");
  app->add_option("--dtype", o->dtype, "Storage type: f32, f16 or bf16")
      ->capture_default_str()
      ->check(CLI::IsMember({"f32", "f16", "bf16"}));
  app->add_option("--dims", o->dims, "Head dims to prepare (comma-separated)")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, vkattn::kMaxHeadDim));  // prepare_pipelines' bound, refused before a device opens
  app->add_option("--device", o->device, "Device index or name substring (default: VKATTN_DEVICE, else the best)");
  return {app, [o]() {
            const DType dtype = parse_dtype(o->dtype);
            const auto start = std::chrono::steady_clock::now();
            ContextOptions options;
            options.device = o->device;
            options.pipeline_cache_file = o->cache_file;
            Context context(options);
            const double create_ms = ms_since(start);
            const std::size_t built_before = context.pipeline_count();
            const auto prepare_start = std::chrono::steady_clock::now();
            context.prepare_pipelines(dtype, o->dims);
            const double prepare_ms = ms_since(prepare_start);
            const std::vector<PipelineBuild> builds = context.pipeline_builds(built_before);
            std::printf("device          %s (%s)\n", context.device_info().name.c_str(),
                        context.device_info().driver_info.c_str());
            if (!o->cache_file.empty()) std::printf("pipeline cache  %s\n", context.pipeline_cache_note().c_str());
            std::printf("context         %.1f ms\n", create_ms);
            std::printf("prepare         %.1f ms (%zu pipelines, %s)\n", prepare_ms, context.pipeline_count(),
                        to_string(dtype));
            // A GPU driver compiles a pipeline when it is built; lavapipe translates it then and
            // JIT-compiles it at its first dispatch (vkattn bench's per-pipeline line).
            for (const PipelineBuild& b : builds)
              std::printf("  built %9.1f ms  #%u %s\n", b.ms, b.pipeline_id, b.pipeline.c_str());
            if (!builds.empty() && context.device_info().is_cpu())
              std::printf("  (on %s a pipeline JIT-compiles at its first dispatch, not here: vkattn bench reports it per "
                          "pipeline)\n",
                          context.device_info().name.c_str());
            std::printf("total           %.1f ms\n", ms_since(start));
            if (!o->cache_file.empty() && !o->no_save) {
              context.save_pipeline_cache(o->cache_file);
              std::printf("saved           %s (%ju bytes)\n", o->cache_file.c_str(),
                          static_cast<uintmax_t>(std::filesystem::file_size(o->cache_file)));
            }
            return 0;
          }};
}

}  // namespace vkattn::cli
