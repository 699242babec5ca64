#include "vkattn/merge_reference.hpp"

#include <cmath>
#include <limits>
#include <string>

#include "vkattn/error.hpp"

namespace vkattn::reference {

MergedStates merge_attention_states(std::span<const std::vector<double>> o, std::span<const std::vector<double>> lse,
                                    int64_t rows, int64_t dim) {
  if (o.size() != lse.size() || o.empty())
    throw Error("merge reference: " + std::to_string(o.size()) + " outputs and " + std::to_string(lse.size()) +
                " LSE arrays; one of each per part, at least one part");
  for (std::size_t i = 0; i < o.size(); ++i)
    if (o[i].size() != std::size_t(rows * dim) || lse[i].size() != std::size_t(rows))
      throw Error("merge reference: part " + std::to_string(i) + " has " + std::to_string(o[i].size()) + " values and " +
                  std::to_string(lse[i].size()) + " LSE values; want rows x dim and rows");
  const double neg_inf = -std::numeric_limits<double>::infinity();
  MergedStates merged{std::vector<double>(std::size_t(rows * dim), 0.0), std::vector<double>(std::size_t(rows), neg_inf)};
  for (int64_t r = 0; r < rows; ++r) {
    double m = neg_inf;
    for (const std::vector<double>& l : lse) m = std::max(m, l[std::size_t(r)]);
    if (m == neg_inf) continue;
    double total = 0.0;
    for (const std::vector<double>& l : lse)
      if (l[std::size_t(r)] != neg_inf) total += std::exp(l[std::size_t(r)] - m);
    merged.lse[std::size_t(r)] = m + std::log(total);
    for (std::size_t i = 0; i < o.size(); ++i) {
      if (lse[i][std::size_t(r)] == neg_inf) continue;
      const double weight = std::exp(lse[i][std::size_t(r)] - m) / total;
      for (int64_t d = 0; d < dim; ++d) merged.o[std::size_t(r * dim + d)] += weight * o[i][std::size_t(r * dim + d)];
    }
  }
  return merged;
}

}  // namespace vkattn::reference
