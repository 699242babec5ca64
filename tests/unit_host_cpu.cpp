// The processor named in benchmark records of CPU devices (tools/support/host_cpu.hpp): read from
// /proc/cpuinfo's text, x86 and ARM kernels' spellings.
#include <doctest/doctest.h>

#include <string>

#include "host_cpu.hpp"

using vkattn::cli::cpu_model_from_cpuinfo;

TEST_SUITE("unit") {
  TEST_CASE("cli host CPU: the first model name of /proc/cpuinfo, trimmed") {
    const std::string x86 =
        "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel\t\t: 1\nmodel name\t: AMD EPYC 7B13  \n"
        "processor\t: 1\nmodel name\t: AMD EPYC 7B13\n";
    CHECK(cpu_model_from_cpuinfo(x86) == "AMD EPYC 7B13");
    // "model" alone is not "model name".
    CHECK(cpu_model_from_cpuinfo("model\t\t: 1\n") == "");
  }
  TEST_CASE("cli host CPU: ARM kernels' Hardware or Processor line; none gives empty") {
    CHECK(cpu_model_from_cpuinfo("processor\t: 0\nBogoMIPS\t: 38.40\nHardware\t: Qualcomm SM8250\n") == "Qualcomm SM8250");
    CHECK(cpu_model_from_cpuinfo("Processor\t: AArch64 Processor rev 4 (aarch64)\nprocessor\t: 0\n") ==
          "AArch64 Processor rev 4 (aarch64)");
    CHECK(cpu_model_from_cpuinfo("") == "");
    CHECK(cpu_model_from_cpuinfo("model name\t:   \n") == "");
    CHECK(cpu_model_from_cpuinfo("no colon here\nmodel name") == "");
  }
}
