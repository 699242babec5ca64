// The builders of the catalog's sections, one file per family (catalog_sweep.cpp,
// catalog_targeted.cpp, catalog_long.cpp, catalog_layer.cpp, catalog_backward.cpp); catalog.cpp puts them in order.
#pragma once

#include <vector>

#include "conform/catalog.hpp"

namespace vkattn::conform::detail {

// The random sweep over every axis, one section per dtype, and a few larger shapes.
void add_sweep_sections(std::vector<CaseSection>& out, uint64_t base_seed);
// Targeted cases for the promises a random sweep rarely hits (fully masked rows, poisoned hidden
// keys, clamped key lengths, NaN rows, split-KV under every mask, scales, strided layouts), and the
// representative subset the synchronization-validation runs use.
void add_targeted_sections(std::vector<CaseSection>& out, uint64_t base_seed);
// Long key ranges and sizes beyond one binding or one grid dimension.
void add_long_sections(std::vector<CaseSection>& out, uint64_t base_seed);
// The score modifiers (case_modifiers.hpp), alone and combined (catalog_modifiers.cpp).
void add_modifier_sections(std::vector<CaseSection>& out, uint64_t base_seed);
// Extreme values of every score modifier (windows past 2^31, FLT_MAX-sized and subnormal values) on
// dense, paged and packed calls and the layer (catalog_extremes.cpp).
void add_extreme_sections(std::vector<CaseSection>& out, uint64_t base_seed);
// The multi-head attention layer on top of the attention paths (catalog_layer.cpp).
void add_layer_section(std::vector<CaseSection>& out, uint64_t base_seed);
// The backward pass, dense and packed (catalog_backward.cpp).
void add_backward_section(std::vector<CaseSection>& out, uint64_t base_seed);
// Head dims past the fused kernels', forward and backward (catalog_wide.cpp).
void add_wide_sections(std::vector<CaseSection>& out, uint64_t base_seed);

}  // namespace vkattn::conform::detail
