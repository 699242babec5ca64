#include "cli_numbers.hpp"

#include <CLI/CLI.hpp>

#include <cctype>
#include <cmath>
#include <cstdlib>

#include "vkattn/error.hpp"

namespace vkattn::cli {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Digits from `pos`; returns how many.
std::size_t digits(std::string_view text, std::size_t& pos) {
  const std::size_t start = pos;
  while (pos < text.size() && is_digit(text[pos])) ++pos;
  return pos - start;
}

std::string quoted(std::string_view text) { return "'" + std::string(text) + "'"; }

}  // namespace

std::string integer_syntax_error(std::string_view text, bool allow_negative) {
  if (text.empty()) return "empty value (give a number)";
  const std::string what = allow_negative ? " is not a decimal integer" : " is not a decimal integer >= 0";
  std::size_t pos = 0;
  if (allow_negative && text[0] == '-') pos = 1;
  const std::size_t first = pos;
  if (digits(text, pos) == 0 || pos != text.size()) return quoted(text) + what;
  if (text[first] == '0' && text.size() - first > 1) return quoted(text) + what + " (no leading zeros)";
  return "";
}

std::string real_syntax_error(std::string_view text) {
  if (text.empty()) return "empty value (give a number)";
  const std::string what = " is not a finite decimal number";
  std::size_t pos = text[0] == '-' ? 1 : 0;
  const std::size_t whole = digits(text, pos);
  std::size_t fraction = 0;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    fraction = digits(text, pos);
  }
  if (whole + fraction == 0) return quoted(text) + what;
  if (pos < text.size() && (text[pos] == 'e' || text[pos] == 'E')) {
    ++pos;
    if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) ++pos;
    if (digits(text, pos) == 0) return quoted(text) + what;
  }
  if (pos != text.size()) return quoted(text) + what;
  const std::string copy(text);
  if (!std::isfinite(std::strtod(copy.c_str(), nullptr))) return quoted(text) + " is out of range";
  return "";
}

void make_values_strict(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    if (option->get_type_size() == 0) continue;  // a flag
    const std::string type = option->get_type_name();
    auto starts = [&](const char* prefix) { return type.rfind(prefix, 0) == 0; };
    std::function<std::string(std::string&)> check;
    if (starts("UINT")) check = [](std::string& s) { return integer_syntax_error(s, false); };
    else if (starts("INT")) check = [](std::string& s) { return integer_syntax_error(s, true); };
    else if (starts("FLOAT")) check = [](std::string& s) { return real_syntax_error(s); };
    else check = [](std::string& s) { return s.empty() ? std::string("empty value") : std::string(); };
    option->check(CLI::Validator(check, "", "strict value"));
  }
  for (CLI::App* sub : app.get_subcommands({})) make_values_strict(*sub);
}

float parse_float32(std::string_view text, const std::string& option) {
  if (const std::string syntax = real_syntax_error(text); !syntax.empty()) throw Error(option + ": " + syntax);
  const std::string copy(text);
  const float value = std::strtof(copy.c_str(), nullptr);
  if (!std::isfinite(value)) throw Error(option + ": '" + copy + "' is out of float32's range");
  return value;
}

CLI::Validator parsed_by(const std::string& option, std::function<void(const std::string&)> parse) {
  return CLI::Validator(
      [option, parse](std::string& value) {
        try {
          parse(value);
        } catch (const Error& e) {
          const std::string message = e.what();
          const std::string prefix = option + ": ";
          return message.rfind(prefix, 0) == 0 ? message.substr(prefix.size()) : message;
        }
        return std::string();
      },
      "", "parsed value");
}

}  // namespace vkattn::cli
