// Declares IEEE handling of NaN and infinities in a compute shader's SPIR-V module.
//
// Vulkan lets a driver assume, by default, that float operands and results are never NaN or
// infinite (the spec's "Precision and Operation of SPIR-V Instructions"). The NVIDIA driver does:
// `isnan(x)` folds to false and `clamp`/`max` drop a NaN, so a NaN query row came out as 0 there
// (measured on an H100, driver 580.159.04), while lavapipe propagated it. The contract says NaN and
// Inf in an unmasked input propagate. The SignedZeroInfNanPreserve execution mode (SPIR-V 1.4 float
// controls, Vulkan 1.2 core) takes that licence away for 32-bit floats; a device that reports
// shaderSignedZeroInfNanPreserveFloat32 gets every module patched with it when it is loaded. The
// shaders stay one source: the mode is added to the embedded SPIR-V, not compiled into a variant.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace vkattn::detail {

// `module` with OpCapability SignedZeroInfNanPreserve, OpExtension "SPV_KHR_float_controls" (for
// modules older than SPIR-V 1.4) and OpExecutionMode <each entry point> SignedZeroInfNanPreserve 32
// added. A module that already declares the mode for 32-bit floats comes back unchanged. Throws
// vkattn::Error on a module that is not SPIR-V (no magic number, truncated instruction).
std::vector<uint32_t> with_nan_preserved(std::span<const uint32_t> module);

}  // namespace vkattn::detail
