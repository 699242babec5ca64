#include <string>

#include "layout_check.hpp"
#include "vkattn/error.hpp"
#include "vkattn/merge_types.hpp"

namespace vkattn {
namespace {

std::string shape(const TensorLayout& t) {
  return "(" + std::to_string(t.batch) + ", " + std::to_string(t.heads) + ", " + std::to_string(t.seq) + ", " +
         std::to_string(t.dim) + ")";
}

}  // namespace

void check_merge_states(const MergeStatesSpec& spec) {
  if (spec.parts < 1 || spec.parts > kMaxMergeParts)
    throw Error("parts: " + std::to_string(spec.parts) + "; a merge takes 1 to " + std::to_string(kMaxMergeParts) +
                " parts (merge groups of them, then their results)");
  detail::check_tensor_layout("part", spec.part);
  detail::check_tensor_layout("out", spec.out);
  const TensorLayout &a = spec.part, &o = spec.out;
  if (a.batch != o.batch || a.heads != o.heads || a.seq != o.seq || a.dim != o.dim)
    throw Error("out: shape " + shape(o) + " differs from part's " + shape(a));
  if (a.dtype != o.dtype) throw Error(std::string("out: dtype ") + to_string(o.dtype) + " differs from part's " + to_string(a.dtype));
}

}  // namespace vkattn
