#include "host_cpu.hpp"

#include <fstream>
#include <iterator>
#include <thread>

namespace vkattn::cli {
namespace {

std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t\r") - first + 1);
}

// The value of the first "key : value" line whose key is `key`; "" when there is none.
std::string value_of(std::string_view text, std::string_view key) {
  while (!text.empty()) {
    const auto end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
    const auto colon = line.find(':');
    if (colon != std::string_view::npos && trim(line.substr(0, colon)) == key) return std::string(trim(line.substr(colon + 1)));
  }
  return {};
}

}  // namespace

std::string cpu_model_from_cpuinfo(std::string_view cpuinfo) {
  for (const std::string_view key : {"model name", "Hardware", "Processor"}) {
    std::string value = value_of(cpuinfo, key);
    if (!value.empty()) return value;
  }
  return {};
}

std::string host_cpu_description() {
  std::ifstream file("/proc/cpuinfo");
  const std::string cpuinfo{std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
  std::string model = cpu_model_from_cpuinfo(cpuinfo);
  if (model.empty()) model = "unknown CPU";
  const unsigned threads = std::thread::hardware_concurrency();
  return threads ? model + ", " + std::to_string(threads) + " threads" : model;
}

}  // namespace vkattn::cli
