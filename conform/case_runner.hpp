// Runs one conformance case: builds its seeded random inputs in the requested layouts, runs the
// device (outputs poisoned and guarded), runs the fp64 reference on the same rounded inputs and
// compares (conform/compare.hpp). Reports what it found; failing a test or a command is the caller's.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <vkattn/vkattn.hpp>

#include "conform/attention_case.hpp"

namespace vkattn::conform {

struct RunOptions {
  // automatic / fused: the fused kernels. unfused: the three-stage path, which is also asked for the
  // weights P, and they are checked too.
  AttentionPath path = AttentionPath::automatic;
  // When set, called after the device work of each case: the validation-layer messages received
  // meanwhile. Any message fails the case.
  std::function<std::vector<std::string>()> take_validation_messages;
  // When set, attention and serving (paged, packed) cases run with the plan vkattn makes for this
  // device description (a device class that is not here; conform/device_profiles.hpp) instead of the
  // local device's, and are skipped, saying why, where that plan does not fit the local device;
  // backward cases plan their backward so (their forward runs as planned here). Layer cases are
  // skipped: the layer plans for the device it runs on.
  const DeviceInfo* profile = nullptr;
};

enum class Outcome { passed, failed, skipped };

struct CaseResult {
  Outcome outcome = Outcome::passed;
  // The largest error seen (O, LSE and P) as a fraction of its dtype's tolerance: 1.0 is at the
  // limit. 0 for a case with no finite comparison (a refusal, a skip).
  double worst = 0.0;
  std::vector<std::string> problems;  // why it failed, one entry per finding (may span lines)
  std::string skip_reason;            // why it was skipped
  double seconds = 0.0;               // wall time, reference included
};

// Runs `c` on `context`. Never throws for a failing case: an exception from the library or the
// reference is a problem of the result (except where the case expects the unfused path's refusal).
CaseResult run_case(Context& context, const AttentionCase& c, const RunOptions& options);

// The frame every kind of case runs in (run_case here, run_layer_case in layer_case.hpp): skipped
// when the device cannot store `dtype`; otherwise `body` runs timed, an exception from it and each
// validation message it drew become problems, and the outcome follows from the problems.
CaseResult run_in_frame(Context& context, DType dtype, const RunOptions& options,
                        const std::function<void(CaseResult&)>& body);

}  // namespace vkattn::conform
