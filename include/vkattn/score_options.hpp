// The score modifiers that are options of a call (AttentionOptions' window, align and softcap) as one
// table, a row each: the option's name, its help line, its member of AttentionOptions, its check and
// its step in the fp64 score chain (and that step's derivative). What takes options from people or prints them reads this table
// instead of naming each option: the call's checks run every row's check, the fp64 references run
// every row's score step, and the command line, the benchmark's records and the conformance suite
// register, print and tag every row. So a new option of this kind is its field in AttentionOptions,
// its row (core/score_options.cpp) and its device side (the shaders and their constants).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "vkattn/types.hpp"

namespace vkattn {

struct ScoreOption {
  // The option's member of AttentionOptions; its type is the value's: a real, a window, an alignment.
  using Member = std::variant<std::optional<float> AttentionOptions::*, std::optional<Window> AttentionOptions::*,
                              std::optional<Align> AttentionOptions::*>;

  std::string_view name;  // "softcap": the member's name, the command line's --softcap, its JSON field
  std::string_view help;  // what it does, in one line
  Member member;
  // Throws Error "<name>: ..." naming the value when the option is set to a value out of its range
  // (or, for align, disagreeing with causal). Set options only.
  void (*check)(const AttentionOptions& options) = nullptr;
  // The option's step in the score chain (docs/semantics.md): the score s, after the scale and before
  // ALiBi, given the option's value, in the fp64 references. nullptr for an option that changes no
  // score (the window masks keys; align places the window and ALiBi). Real-valued options only.
  double (*score)(double s, double value) = nullptr;
  // The step's derivative d score(s, value) / ds at the score s entering it, for the fp64 backward
  // pass (vkattn/backward_reference.hpp), which chains every step's: set exactly when `score` is.
  // softcap: 1 - tanh²(s / c).
  double (*score_derivative)(double s, double value) = nullptr;

  bool is_set(const AttentionOptions& options) const;
  // Copies the option's value (or its absence) from `from` to `to`.
  void copy(const AttentionOptions& from, AttentionOptions& to) const;
  // The value as text, as the command line takes it: "7:3" (a window), "top-left", "5" (a real, the
  // shortest text that reads back to the same float). "" when the option is not set.
  std::string text(const AttentionOptions& options) const;
  // A conformance-table tag for the value: the name, or "window, two-sided" / "window, one-sided". ""
  // for align, which is not a modifier of its own (it places the window and ALiBi).
  std::string feature(const AttentionOptions& options) const;
};

// Every score option, in the order their checks run and the command line lists them.
std::span<const ScoreOption> score_options();

// The options' text, " window 7:3 softcap 5" (`separator` " ") or " window=7:3 softcap=5" ("="):
// every set option's name and text, each after a space. "" when none is set.
std::string score_options_text(const AttentionOptions& options, std::string_view separator);

// Copies every score option from `from` to `to`, leaving the other fields of `to` as they are.
void copy_score_options(const AttentionOptions& from, AttentionOptions& to);

}  // namespace vkattn
