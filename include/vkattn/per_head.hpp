// The score modifiers given as tensors of one f32 value per head (docs/semantics.md, "Score modifiers"):
//   alibi: ALiBi slopes, (heads) or (batch, heads): bias -slope * |i + off - j| on every score;
//   sinks: attention-sink logits, (heads): each row's softmax denominator gains e^sink, with no value.
// Every call's layouts, buffers and reference inputs hold them through the bases below, so the code
// that carries them from one struct to the next copies one value (`per_head()`) or loops over
// kPerHeadTensors, and a new per-head modifier is declared here rather than in every struct. The
// members keep their names: `layouts.sinks`, `buffers.alibi`.
#pragma once

#include <array>
#include <optional>
#include <span>

#include "vkattn/types.hpp"

namespace vkattn {

class Buffer;

enum class PerHeadTensor { alibi, sinks };
inline constexpr std::array<PerHeadTensor, 2> kPerHeadTensors = {PerHeadTensor::alibi, PerHeadTensor::sinks};

// The argument's name in messages.
constexpr const char* to_string(PerHeadTensor tensor) { return tensor == PerHeadTensor::alibi ? "alibi" : "sinks"; }
// Whether the tensor may also be (batch, heads), one row per batch, besides (heads): ALiBi's slopes.
constexpr bool allows_batch_rows(PerHeadTensor tensor) { return tensor == PerHeadTensor::alibi; }

// One T for each per-head tensor: a layout (std::optional<HeadValuesLayout>, given or not), a
// buffer, a flag. Calls' structs derive from it; `per_head()` is that part of them as one value.
template <class T>
struct PerHead {
  T alibi{};
  T sinks{};

  constexpr T& operator[](PerHeadTensor t) { return t == PerHeadTensor::alibi ? alibi : sinks; }
  constexpr const T& operator[](PerHeadTensor t) const { return t == PerHeadTensor::alibi ? alibi : sinks; }
  PerHead& per_head() { return *this; }
  const PerHead& per_head() const { return *this; }
};

using PerHeadLayouts = PerHead<std::optional<HeadValuesLayout>>;

// Per-head f32 values of a score modifier in a Buffer; the layout's offset is in elements from
// buffer->offset().
struct HeadValuesRef {
  const Buffer* buffer = nullptr;  // nullptr: absent
  HeadValuesLayout layout;
};

// The per-head tensors of a CPU reference call: each a layout (given or not) and its values, element
// i of the span being index i of the layout.
struct PerHeadValues {
  std::optional<HeadValuesLayout> alibi_layout, sinks_layout;
  std::span<const float> alibi, sinks;

  std::optional<HeadValuesLayout>& layout(PerHeadTensor t) { return t == PerHeadTensor::alibi ? alibi_layout : sinks_layout; }
  const std::optional<HeadValuesLayout>& layout(PerHeadTensor t) const {
    return t == PerHeadTensor::alibi ? alibi_layout : sinks_layout;
  }
  std::span<const float>& values(PerHeadTensor t) { return t == PerHeadTensor::alibi ? alibi : sinks; }
  std::span<const float> values(PerHeadTensor t) const { return t == PerHeadTensor::alibi ? alibi : sinks; }
  PerHeadLayouts layouts() const {
    PerHeadLayouts l;
    l.alibi = alibi_layout;
    l.sinks = sinks_layout;
    return l;
  }
  PerHeadValues& per_head_values() { return *this; }
  const PerHeadValues& per_head_values() const { return *this; }
};

}  // namespace vkattn
