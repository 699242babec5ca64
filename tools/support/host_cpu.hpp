#pragma once
// The processor a CPU device runs on, for benchmark records. A CPU device's name says which driver
// and code generator it is (lavapipe: "llvmpipe (LLVM 15.0.6, 256 bits)"), not which processor runs
// the JIT's code, and the same driver's figures differ from one processor to the next.
#include <string>
#include <string_view>

namespace vkattn::cli {

// The first "model name" of a /proc/cpuinfo text (x86), else its first "Hardware" or "Processor"
// (some ARM kernels), its value trimmed; "" when the text has none of them.
std::string cpu_model_from_cpuinfo(std::string_view cpuinfo);

// "<model>, <n> threads" for this machine: the model from /proc/cpuinfo ("unknown CPU" where there
// is no such file or no model in it) and the hardware threads std::thread reports.
std::string host_cpu_description();

}  // namespace vkattn::cli
