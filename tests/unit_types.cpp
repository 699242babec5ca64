// Names, parsing, element sizes and layout math (strides, required_elements) of types.hpp.
#include <doctest/doctest.h>

#include <cstring>

#include "support.hpp"

using namespace vkattn;
using vkattn::test::contains;
using vkattn::test::error_message;

TEST_SUITE("unit") {
  TEST_CASE("dtype names, sizes and parsing") {
    CHECK(dtype_size(DType::f32) == 4);
    CHECK(dtype_size(DType::f16) == 2);
    CHECK(dtype_size(DType::bf16) == 2);
    CHECK(std::strcmp(to_string(DType::f32), "f32") == 0);
    CHECK(std::strcmp(to_string(DType::f16), "f16") == 0);
    CHECK(std::strcmp(to_string(DType::bf16), "bf16") == 0);
    CHECK(parse_dtype("f32") == DType::f32);
    CHECK(parse_dtype("float32") == DType::f32);
    CHECK(parse_dtype("f16") == DType::f16);
    CHECK(parse_dtype("float16") == DType::f16);
    CHECK(parse_dtype("bf16") == DType::bf16);
    CHECK(parse_dtype("bfloat16") == DType::bf16);
    CHECK(error_message([] { parse_dtype("f64"); }) == "dtype: unknown 'f64' (expected f32, f16 or bf16)");
    CHECK(error_message([] { parse_dtype(""); }) == "dtype: unknown '' (expected f32, f16 or bf16)");
  }

  TEST_CASE("causal names and parsing") {
    CHECK(std::strcmp(to_string(Causal::none), "none") == 0);
    CHECK(std::strcmp(to_string(Causal::top_left), "top-left") == 0);
    CHECK(std::strcmp(to_string(Causal::bottom_right), "bottom-right") == 0);
    for (const Causal c : {Causal::none, Causal::top_left, Causal::bottom_right}) {
      CHECK(parse_causal(to_string(c)) == c);
    }
    const std::string message = error_message([] { parse_causal("true"); });
    CHECK(contains(message, "causal"));
    CHECK(contains(message, "'true'"));
  }

  TEST_CASE("mask types") {
    CHECK(mask_type_size(MaskType::boolean) == 1);
    CHECK(mask_type_size(MaskType::f32) == 4);
    CHECK(mask_type_size(MaskType::f16) == 2);
    CHECK(std::strcmp(to_string(MaskType::boolean), "bool") == 0);
    CHECK(std::strcmp(to_string(MaskType::f32), "f32") == 0);
    CHECK(std::strcmp(to_string(MaskType::f16), "f16") == 0);
  }

  TEST_CASE("TensorLayout: bhsd and bshd strides") {
    const TensorLayout a = TensorLayout::bhsd(DType::f16, 2, 3, 5, 7);
    CHECK(a.dtype == DType::f16);
    CHECK(a.stride_seq == 7);
    CHECK(a.stride_head == 35);
    CHECK(a.stride_batch == 105);
    CHECK(a.offset == 0);
    CHECK(a.element_count() == 210);
    CHECK(a.required_elements() == 210);
    CHECK(a.index(1, 2, 4, 6) == 209);

    // (batch, seq, heads, dim) memory viewed as BHSD: heads are adjacent within a sequence row.
    const TensorLayout b = TensorLayout::bshd(DType::f32, 2, 5, 3, 7);
    CHECK(b.batch == 2);
    CHECK(b.heads == 3);
    CHECK(b.seq == 5);
    CHECK(b.dim == 7);
    CHECK(b.stride_head == 7);
    CHECK(b.stride_seq == 21);
    CHECK(b.stride_batch == 105);
    CHECK(b.required_elements() == 210);
    CHECK(b.index(0, 1, 0, 0) == 7);
    CHECK(b.index(0, 0, 1, 0) == 21);
  }

  TEST_CASE("TensorLayout: required_elements is the last index + 1") {
    TensorLayout l = TensorLayout::bhsd(DType::f32, 2, 3, 5, 7);
    l.offset = 10;
    CHECK(l.required_elements() == 220);
    // Padded strides: the last element sits at 1*1000 + 2*100 + 4*10 + 6, plus the offset.
    l.stride_batch = 1000;
    l.stride_head = 100;
    l.stride_seq = 10;
    CHECK(l.required_elements() == 10 + 1000 + 200 + 40 + 6 + 1);
    // Broadcast (stride 0) dims add nothing.
    l.stride_batch = 0;
    CHECK(l.required_elements() == 10 + 200 + 40 + 6 + 1);
    // An empty tensor needs nothing.
    l.seq = 0;
    CHECK(l.required_elements() == 0);
    l = TensorLayout::bhsd(DType::f32, 1, 1, 1, 0);
    CHECK(l.required_elements() == 0);
  }

  TEST_CASE("TensorLayout::describe names dtype, shape and strides") {
    const std::string text = TensorLayout::bhsd(DType::bf16, 2, 8, 128, 64).describe();
    CHECK(contains(text, "bf16"));
    CHECK(contains(text, "2, 8, 128, 64"));
    CHECK(contains(text, "65536"));
  }

  TEST_CASE("MaskLayout: dense, broadcast and required_elements") {
    const MaskLayout m = MaskLayout::dense(MaskType::boolean, 2, 3, 5, 7);
    CHECK(m.stride_q == 7);
    CHECK(m.stride_head == 35);
    CHECK(m.stride_batch == 105);
    CHECK(m.required_elements() == 210);

    // A 2-D mask: batch and head indices are ignored whatever their strides say.
    MaskLayout two_d = MaskLayout::dense(MaskType::f32, 1, 1, 5, 7);
    two_d.stride_batch = 999;
    two_d.stride_head = 999;
    CHECK(two_d.required_elements() == 35);
    CHECK(two_d.index(1, 2, 4, 6) == 34);

    // (1, H, Sq, Sk): one slice per head, shared by every batch.
    MaskLayout per_head = MaskLayout::dense(MaskType::f16, 1, 3, 5, 7);
    per_head.offset = 4;
    CHECK(per_head.index(1, 2, 0, 0) == 4 + 70);
    CHECK(per_head.required_elements() == 4 + 105);
    CHECK(contains(per_head.describe(), "f16"));

    MaskLayout empty = MaskLayout::dense(MaskType::boolean, 1, 1, 0, 7);
    CHECK(empty.required_elements() == 0);
  }

  TEST_CASE("version: the library, the header's macros and CMake's project(VERSION) agree") {
    const std::string macros = std::to_string(VKATTN_VERSION_MAJOR) + "." + std::to_string(VKATTN_VERSION_MINOR) +
                               "." + std::to_string(VKATTN_VERSION_PATCH);
    CHECK(std::string(vkattn::version()) == macros);
    CHECK(std::string(VKATTN_VERSION_STRING) == macros);
    CHECK(VKATTN_VERSION == VKATTN_VERSION_MAJOR * 10000 + VKATTN_VERSION_MINOR * 100 + VKATTN_VERSION_PATCH);
    CHECK(std::string(vkattn::version()) == VKATTN_PROJECT_VERSION);  // tests/CMakeLists.txt passes PROJECT_VERSION
  }

  TEST_CASE("Error: an argument error by default, its code's name, the VkResult only for Vulkan failures") {
    const Error argument("q.dim (0) must be at least 1");
    CHECK(argument.code() == ErrorCode::invalid_argument);
    CHECK(argument.vk_result().empty());
    CHECK(argument.vk_result_code() == 0);
    CHECK(std::string(argument.what()) == "q.dim (0) must be at least 1");
    const Error device = detail::unsupported("device: too little shared memory");
    CHECK(device.code() == ErrorCode::unsupported);
    CHECK(device.vk_result_code() == 0);
    const Error vulkan(ErrorCode::device_lost, "lost", -4, "VK_ERROR_DEVICE_LOST");
    CHECK(vulkan.code() == ErrorCode::device_lost);
    CHECK(vulkan.vk_result_code() == -4);
    CHECK(vulkan.vk_result() == "VK_ERROR_DEVICE_LOST");
    CHECK(std::string(to_string(ErrorCode::invalid_argument)) == "invalid_argument");
    CHECK(std::string(to_string(ErrorCode::unsupported)) == "unsupported");
    CHECK(std::string(to_string(ErrorCode::out_of_memory)) == "out_of_memory");
    CHECK(std::string(to_string(ErrorCode::device_lost)) == "device_lost");
    CHECK(std::string(to_string(ErrorCode::vulkan_error)) == "vulkan_error");
    CHECK(std::string(to_string(static_cast<ErrorCode>(9))) == "invalid");
  }

  TEST_CASE("device types: the names `vkattn devices` prints") {
    CHECK(std::string(to_string(DeviceType::discrete)) == "discrete");
    CHECK(std::string(to_string(DeviceType::integrated)) == "integrated");
    CHECK(std::string(to_string(DeviceType::virtual_gpu)) == "virtual");
    CHECK(std::string(to_string(DeviceType::cpu)) == "cpu");
    CHECK(std::string(to_string(DeviceType::other)) == "other");
    CHECK(DeviceInfo{}.type == DeviceType::other);
  }
}
