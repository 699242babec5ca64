// Strict values on the command line. CLI11 alone reads "0x10" and "010" (octal) as integers, "-1"
// as 2^64-1 for an unsigned option, and "nan" as a number that every range check lets through; an
// empty string for a path reads as "not given". make_values_strict() adds one check to every option
// that takes a value, chosen by its type: integers are plain decimal ("-" only where the type is
// signed, no leading zeros), reals are finite decimal numbers, and no value may be empty. A value
// that fails is a usage error (exit 2) naming the option and the value. Options whose values have a
// grammar of their own (--window L:R, --shard K/N, ...) add parsed_by(): their parser runs at
// parse time, so what it refuses is a usage error too, before any file is read.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace CLI {
class App;
class Validator;
}

namespace vkattn::cli {

// "" when `text` is a decimal integer (a leading '-' only when `allow_negative`), else why not.
std::string integer_syntax_error(std::string_view text, bool allow_negative);
// "" when `text` is a finite decimal number such as 1, -0.5, 2e-3, .5; else why not.
std::string real_syntax_error(std::string_view text);
// Adds the checks above to every option of `app` and of its subcommands, by CLI11 type name: INT,
// UINT, FLOAT (set type_name("FLOAT") on a string option that holds a number) and TEXT (non-empty).
void make_values_strict(CLI::App& app);

// `text` as a float32: real_syntax_error()'s syntax, and finite once rounded to float ("1e39" is a
// finite double but an infinite float). Throws vkattn::Error "<option>: ..." naming the value.
float parse_float32(std::string_view text, const std::string& option);

// A CLI11 check that runs `parse(value)`; a vkattn::Error it throws becomes the check's message (its
// leading "<option>: " dropped, since CLI11 puts the option's name first), i.e. a usage error.
CLI::Validator parsed_by(const std::string& option, std::function<void(const std::string&)> parse);

}  // namespace vkattn::cli
