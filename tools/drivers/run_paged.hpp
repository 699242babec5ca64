// `vkattn run` over a paged KV cache (vkattn/kv_cache.hpp): --k-cache, --v-cache, --block-table and
// --cache-lens instead of --k/--v, optionally --k-new/--v-new appended first and --k-cache-out/
// --v-cache-out written after the append. Same policy as the dense run: every input read and checked
// (check_paged_attention, check_paged_values) before a device is opened, outputs written all or none.
#pragma once

#include <string>

#include "run_inputs.hpp"

namespace vkattn::cli {

// What is wrong with the combination of options `vkattn run` was given (a dense --k with a paged
// --k-cache, a paged cache missing its block table, --mask with a paged cache, ...), as one line; ""
// when nothing is. A usage error: cmd_run.cpp reports it while parsing (exit 2).
std::string run_usage_error(const RunOptions& options);

// Runs attention over the paged cache of `options` (options.paged()) and writes the outputs; throws
// vkattn::Error naming the option, the file or the library's argument.
int run_paged(const RunOptions& options);

}  // namespace vkattn::cli
