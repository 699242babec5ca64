#include "npy_header.hpp"

#include <cstdio>
#include <limits>
#include <optional>

#include "vkattn/error.hpp"

namespace vkattn::npy {
namespace {

[[noreturn]] void fail(std::string_view name, const std::string& what) {
  throw Error(std::string(name) + ": " + what);
}

// The dict as parsed so far: each key at most once.
struct Fields {
  std::optional<std::string> descr;
  std::optional<bool> fortran_order;
  std::optional<std::vector<int64_t>> shape;
};

// Recursive descent over the Python literal subset numpy writes. Throws "malformed header" errors.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, std::string_view name) : text_(text), name_(name) {}

  Fields parse() {
    Fields header;
    skip_space();
    expect('{');
    skip_space();
    while (!accept('}')) {
      const std::string key = parse_string();
      skip_space();
      expect(':');
      skip_space();
      if (key == "descr") {
        if (header.descr) malformed("duplicate key 'descr'");
        if (peek() != '\'' && peek() != '"')
          fail(name_, "unsupported dtype (structured or non-string 'descr'); supported: <f4, <f2, |b1, <i4, <i8");
        header.descr = parse_string();
      } else if (key == "fortran_order") {
        if (header.fortran_order) malformed("duplicate key 'fortran_order'");
        header.fortran_order = parse_bool();
      } else if (key == "shape") {
        if (header.shape) malformed("duplicate key 'shape'");
        header.shape = parse_shape();
      } else {
        malformed("unexpected key '" + printable(key) + "'");
      }
      skip_space();
      if (accept(',')) {
        skip_space();
        continue;
      }
      skip_space();
      expect('}');
      break;
    }
    // Only padding may follow the dict.
    skip_space();
    if (pos_ != text_.size()) malformed("unexpected text after the dict");
    if (!header.descr) malformed("missing key 'descr'");
    if (!header.fortran_order) malformed("missing key 'fortran_order'");
    if (!header.shape) malformed("missing key 'shape'");
    return header;
  }

 private:
  [[noreturn]] void malformed(const std::string& what) const {
    fail(name_, "malformed .npy header (" + what + " at offset " + std::to_string(pos_) + ")");
  }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  bool at_end() const { return pos_ >= text_.size(); }
  bool accept(char c) {
    if (!at_end() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!accept(c)) malformed(std::string("expected '") + c + "'");
  }
  void skip_space() {
    while (!at_end() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r')) ++pos_;
  }
  // A quoted string without escapes (numpy never writes any in these keys and values).
  std::string parse_string() {
    const char quote = peek();
    if (quote != '\'' && quote != '"') malformed("expected a quoted string");
    ++pos_;
    const std::size_t start = pos_;
    while (!at_end() && text_[pos_] != quote) {
      if (text_[pos_] == '\\' || text_[pos_] == '\n') malformed("unsupported character in a string");
      ++pos_;
    }
    if (at_end()) malformed("unterminated string");
    std::string value(text_.substr(start, pos_ - start));
    ++pos_;
    return value;
  }
  bool parse_bool() {
    if (text_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (text_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    malformed("expected True or False");
  }
  int64_t parse_int() {
    if (peek() < '0' || peek() > '9') malformed("expected a non-negative integer");
    int64_t value = 0;
    while (peek() >= '0' && peek() <= '9') {
      const int digit = peek() - '0';
      if (value > (std::numeric_limits<int64_t>::max() - digit) / 10) malformed("dimension too large");
      value = value * 10 + digit;
      ++pos_;
    }
    accept('L');  // Python 2 longs, as old numpy versions wrote them
    return value;
  }
  std::vector<int64_t> parse_shape() {
    std::vector<int64_t> shape;
    expect('(');
    skip_space();
    if (accept(')')) return shape;  // a scalar
    while (true) {
      if (shape.size() >= 64) malformed("more than 64 dimensions");
      shape.push_back(parse_int());
      skip_space();
      if (accept(')')) break;
      expect(',');
      skip_space();
      if (accept(')')) break;
    }
    // Python writes one-element tuples as "(3,)"; "(3)" is an int, not a tuple.
    return shape;
  }

  std::string_view text_;
  std::string_view name_;
  std::size_t pos_ = 0;
};

}  // namespace

// A corrupt header can hold any bytes, and an error message must stay one printable line.
std::string printable(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, 64)) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) {
      out += c;
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", u);
      out += hex;
    }
  }
  if (text.size() > 64) out += "...";
  return out;
}

Header parse_header(std::string_view text, std::string_view name) {
  Fields fields = HeaderParser(text, name).parse();
  return {std::move(*fields.descr), *fields.fortran_order, std::move(*fields.shape)};
}

}  // namespace vkattn::npy
