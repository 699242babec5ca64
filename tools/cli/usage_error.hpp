// A mistake in what was typed, found after CLI11's parse: options that do not go together (bench's
// --json with --csv), a --filter that matches no case. docs/command-line.md promises exit 2 for usage errors,
// as for CLI11's own parse errors; main() maps this type to 2 where any other vkattn::Error exits 1.
// (Bad values of single options are refused during the parse itself: cli_numbers.hpp, parsed_by.)
#pragma once

#include "vkattn/error.hpp"

namespace vkattn::cli {

class UsageError : public Error {
 public:
  using Error::Error;
};

}  // namespace vkattn::cli
