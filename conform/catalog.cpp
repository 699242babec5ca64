#include "conform/catalog.hpp"

#include "conform/catalog_sections.hpp"
#include "vkattn/error.hpp"

namespace vkattn::conform {

std::vector<CaseSection> catalog(uint64_t base_seed) {
  std::vector<CaseSection> sections;
  detail::add_sweep_sections(sections, base_seed);
  detail::add_targeted_sections(sections, base_seed);
  detail::add_modifier_sections(sections, base_seed);
  detail::add_extreme_sections(sections, base_seed);
  detail::add_long_sections(sections, base_seed);
  detail::add_layer_section(sections, base_seed);
  CaseSection paged{"paged", "paged", "paged KV cache: page sizes, nhd and hnd pages, shared pages, appends, modifiers, q8_0", {}, {},
                    paged_cases(base_seed, false), {}, {0, 4, 6, 8, 12, 15, 17, 21, 23}};
  sections.push_back(std::move(paged));
  CaseSection long_paged{"long-paged", "long", "paged KV cache of 65,536 keys with an append; a cascade over a 67,200-token prefix", {}, {},
                         paged_cases(base_seed, true), {}, {}};
  sections.push_back(std::move(long_paged));
  CaseSection varlen{"varlen", "varlen", "packed variable-length batches: empty and uneven sequences, decode, modifiers, q8_0",
                     {}, {}, packed_cases(base_seed, false), {}, {0, 3, 5, 7, 9}};
  sections.push_back(std::move(varlen));
  CaseSection long_varlen{"long-varlen", "long", "packed variable-length batch with a sequence of 70,000 keys", {}, {},
                          packed_cases(base_seed, true), {}, {}};
  sections.push_back(std::move(long_varlen));
  detail::add_backward_section(sections, base_seed);
  detail::add_wide_sections(sections, base_seed);
  return sections;
}

CaseSection catalog_section(const std::string& name, uint64_t base_seed) {
  std::string known;
  for (CaseSection& s : catalog(base_seed)) {
    if (s.name == name) return std::move(s);
    known += (known.empty() ? "" : ", ") + s.name;
  }
  throw Error("conform: no case section \"" + name + "\" (known: " + known + ")");
}

}  // namespace vkattn::conform
