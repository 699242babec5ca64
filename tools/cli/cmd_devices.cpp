// `vkattn devices`: what each Vulkan device offers vkattn (the features that decide which dtypes and
// kernels it can run), as a table or as JSON for scripts and bug reports.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "commands.hpp"
#include "vkattn/context.hpp"

namespace vkattn::cli {
namespace {

struct DevicesOptions {
  bool json = false;
};

std::string yes_no(bool value) { return value ? "yes" : "no"; }

std::string kib(uint64_t bytes) { return std::to_string(bytes / 1024) + " KiB"; }

nlohmann::ordered_json to_json(const DeviceInfo& d) {
  char vendor[16];
  std::snprintf(vendor, sizeof vendor, "0x%04x", d.vendor_id);
  return {
      {"index", d.index},
      {"name", d.name},
      {"type", to_string(d.type)},
      {"vendor_id", vendor},
      {"driver_name", d.driver_name},
      {"driver_info", d.driver_info},
      {"driver_version", d.driver_version},
      {"api_version", d.api_version_string()},
      {"llvmpipe", d.is_llvmpipe},
      {"subgroup_size", d.subgroup_size},
      {"min_subgroup_size", d.min_subgroup_size},
      {"max_subgroup_size", d.max_subgroup_size},
      {"required_subgroup_size", d.required_subgroup_size},
      {"max_shared_memory", d.max_shared_memory},
      {"max_workgroup_invocations", d.max_workgroup_invocations},
      {"max_workgroup_count", {d.max_workgroup_count[0], d.max_workgroup_count[1], d.max_workgroup_count[2]}},
      {"max_storage_buffer_range", d.max_storage_buffer_range},
      {"max_push_constants_size", d.max_push_constants_size},
      {"f16", d.supports_f16()},
      {"bf16", d.supports_bf16()},
      {"shader_float16", d.shader_float16},
      {"shader_int64", d.shader_int64},
      {"preserves_nan", d.preserves_nan},
      {"cooperative_matrix", d.cooperative_matrix},
      {"push_descriptor", d.push_descriptor},
      {"timestamps", d.timestamps},
      {"timestamp_period_ns", d.timestamp_period_ns},
  };
}

void print_text(const DeviceInfo& d) {
  std::cout << "[" << d.index << "] " << d.name << " (" << to_string(d.type) << ")\n"
            << "    driver              " << d.driver_name << (d.driver_info.empty() ? "" : " " + d.driver_info) << "\n"
            << "    Vulkan API          " << d.api_version_string() << "\n"
            << "    subgroup size       " << d.subgroup_size;
  if (d.max_subgroup_size != 0)
    std::cout << " (pipelines: " << d.min_subgroup_size << ".." << d.max_subgroup_size
              << (d.required_subgroup_size ? ", a size can be required" : "") << ")";
  std::cout << "\n"
            << "    shared memory       " << kib(d.max_shared_memory) << "\n"
            << "    storage range       " << d.max_storage_buffer_range / (1024 * 1024) << " MiB\n"
            << "    f16 / bf16          " << yes_no(d.supports_f16()) << " / " << yes_no(d.supports_bf16())
            << " (shaderFloat16 " << yes_no(d.shader_float16) << ")\n"
            << "    64-bit integers     " << yes_no(d.shader_int64) << "\n"
            << "    NaN/Inf preserved   " << yes_no(d.preserves_nan)
            << (d.preserves_nan ? "" : " (the driver may drop NaN: propagation not guaranteed)") << "\n"
            << "    cooperative matrix  " << yes_no(d.cooperative_matrix) << "\n"
            << "    push descriptor     " << yes_no(d.push_descriptor)
            << (d.push_descriptor ? "" : " (required: vkattn cannot run here)") << "\n"
            << "    timestamps          " << yes_no(d.timestamps) << "\n";
  if (d.is_llvmpipe) std::cout << "    note                llvmpipe: loop-bounded kernels are used\n";
}

}  // namespace

Command add_devices_command(CLI::App& parent) {
  auto options = std::make_shared<DevicesOptions>();
  CLI::App* app = parent.add_subcommand("devices", "List the Vulkan devices and what vkattn can use on each");
  app->add_flag("--json", options->json, "Print JSON instead of a table");
  return {app, [options]() {
            const std::vector<DeviceInfo> devices = list_devices();
            if (options->json) {
              nlohmann::ordered_json out = nlohmann::ordered_json::array();
              for (const DeviceInfo& d : devices) out.push_back(to_json(d));
              std::cout << out.dump(2) << "\n";
              return 0;
            }
            if (devices.empty()) {
              std::cout << "no Vulkan devices found\n";
              return 0;
            }
            for (const DeviceInfo& d : devices) print_text(d);
            return 0;
          }};
}

}  // namespace vkattn::cli
