#include "context.hpp"

#include <pybind11/stl.h>

#include <string>

namespace py = pybind11;

namespace vkattn::python {

namespace {

py::dict device_dict(const DeviceInfo& info) {
  py::dict d;
  d["index"] = info.index;
  d["name"] = info.name;
  d["type"] = to_string(info.type);
  d["driver_name"] = info.driver_name;
  d["driver_info"] = info.driver_info;
  d["api_version"] = info.api_version_string();
  d["is_cpu"] = info.is_cpu();
  d["supports_f16"] = info.supports_f16();
  d["supports_bf16"] = info.supports_bf16();
  d["subgroup_size"] = info.subgroup_size;
  d["max_shared_memory"] = info.max_shared_memory;
  d["device_memory_bytes"] = info.device_memory_bytes;
  return d;
}

// "0" or a name substring, as ContextOptions::device takes it; None: vkattn's choice.
std::string device_selector(const py::object& device) {
  if (device.is_none()) return {};
  if (py::isinstance<py::bool_>(device)) throw py::type_error("device: expected None, an int index or a name");
  if (py::isinstance<py::int_>(device)) {
    const auto index = device.cast<long long>();
    if (index < 0) throw py::value_error("device: index must be >= 0, got " + std::to_string(index));
    return std::to_string(index);
  }
  if (py::isinstance<py::str>(device)) {
    auto name = device.cast<std::string>();
    if (name.empty()) throw py::value_error("device: the name must not be empty");
    return name;
  }
  throw py::type_error("device: expected None, an int index or a name");
}

}  // namespace

void register_context(py::module_& module) {
  module.def(
      "devices",
      [] {
        std::vector<DeviceInfo> infos;
        {
          py::gil_scoped_release release;
          infos = list_devices();
        }
        py::list result;
        for (const DeviceInfo& info : infos) result.append(device_dict(info));
        return result;
      },
      "Every Vulkan device vkattn sees, as dicts (index, name, type, driver_name, api_version, is_cpu, "
      "supports_f16, ...). Creates no device.");

  py::class_<PythonContext>(module, "Context",
                            "A Vulkan device to run attention on, and the plans of the calls made on it "
                            "(a call repeating the shapes, dtypes and options of an earlier one reuses its "
                            "plan). Thread-safe: several threads may call through one Context at once.")
      .def(py::init([](const py::object& device) {
             ContextOptions options;
             options.device = device_selector(device);
             py::gil_scoped_release release;
             return std::make_unique<PythonContext>(options);
           }),
           py::arg("device") = py::none(),
           "device: None (the device the VKATTN_DEVICE environment variable names, else the first discrete "
           "GPU, then integrated, then any, then a CPU device), an index "
           "into vkattn.devices(), or a case-insensitive substring of a device name (\"llvmpipe\").")
      .def_property_readonly(
          "device", [](const PythonContext& c) { return device_dict(c.context.device_info()); },
          "The device's description, as vkattn.devices() gives it.")
      .def_property_readonly(
          "device_name", [](const PythonContext& c) { return c.context.device_info().name; }, "The device's name.")
      .def(
          "plan_cache_info",
          [](const PythonContext& c) {
            const PlanCacheStats s = c.plans.stats();
            py::dict d;
            d["size"] = s.size;
            d["capacity"] = s.capacity;
            d["hits"] = s.hits;
            d["misses"] = s.misses;
            return d;
          },
          "The plan cache: planned calls kept (size, capacity) and lookups that found one (hits) or "
          "planned (misses).")
      .def(
          "clear_plan_cache", [](PythonContext& c) { c.plans.clear(); }, "Drops every cached plan.")
      .def(
          "memory_stats",
          [](const PythonContext& c) {
            const MemoryStats s = c.context.memory_stats();
            py::dict d;
            d["current_bytes"] = s.current_bytes;
            d["peak_bytes"] = s.peak_bytes;
            d["scratch_bytes"] = s.scratch_bytes;
            d["allocations"] = s.allocations;
            return d;
          },
          "Device memory vkattn holds on this Context (bytes now and at the peak, scratch, allocations).")
      .def("__repr__", [](const PythonContext& c) {
        return "vkattn.Context(device=" + std::to_string(c.context.device_info().index) + ": '" +
               c.context.device_info().name + "')";
      });
}

}  // namespace vkattn::python
