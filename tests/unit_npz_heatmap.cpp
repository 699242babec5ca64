// The .npz reader (io/npz.hpp) on archives built here byte by byte (stored entries, with and
// without numpy's ZIP64 local extra field) and with zlib's raw deflate, plus corrupted archives; and
// the heatmap PNG writer (io/heatmap.hpp), read back with libpng.
#include <doctest/doctest.h>

#include <png.h>
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "heatmap.hpp"
#include "npy.hpp"
#include "npz.hpp"
#include "npz_write.hpp"
#include "support.hpp"
#include "temp_dir.hpp"

using namespace vkattn;
using vkattn::test::contains;
using vkattn::test::error_message;
using vkattn::test::TempDir;

namespace {

namespace fs = std::filesystem;

struct ZipEntry {
  std::string name;
  std::vector<std::byte> data;
  bool deflate = false;
  bool zip64_local = false;  // as numpy writes: local sizes 0xFFFFFFFF, real ones in a ZIP64 extra field
};

struct ZipOffsets {
  std::vector<std::size_t> local;     // offset of each local header
  std::vector<std::size_t> central;   // offset of each central directory record
};

void put(std::vector<std::byte>& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<std::byte>((value >> (8 * i)) & 0xff));
}
void put(std::vector<std::byte>& out, const std::string& text) {
  for (char c : text) out.push_back(static_cast<std::byte>(c));
}

std::vector<std::byte> raw_deflate(const std::vector<std::byte>& in) {
  z_stream z{};
  REQUIRE(deflateInit2(&z, Z_BEST_COMPRESSION, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::vector<std::byte> out(deflateBound(&z, static_cast<uLong>(in.size())));
  z.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

uint32_t crc(const std::vector<std::byte>& data) {
  return static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size())));
}

// A minimal ZIP archive: local headers and data, the central directory, the end record.
std::vector<std::byte> make_zip(const std::vector<ZipEntry>& entries, ZipOffsets* offsets = nullptr) {
  std::vector<std::byte> out;
  std::vector<std::vector<std::byte>> central;
  ZipOffsets where;
  for (const ZipEntry& e : entries) {
    const std::vector<std::byte> payload = e.deflate ? raw_deflate(e.data) : e.data;
    const uint16_t method = e.deflate ? 8 : 0;
    const uint32_t checksum = crc(e.data);
    const std::size_t local = out.size();
    where.local.push_back(local);
    put(out, 0x04034b50, 4);
    put(out, e.zip64_local ? 45 : 20, 2);  // version needed
    put(out, 0, 2);                        // flags
    put(out, method, 2);
    put(out, 0, 2);  // time
    put(out, 0x21, 2);  // date: 1980-01-01
    put(out, checksum, 4);
    put(out, e.zip64_local ? 0xffffffff : payload.size(), 4);
    put(out, e.zip64_local ? 0xffffffff : e.data.size(), 4);
    put(out, e.name.size(), 2);
    put(out, e.zip64_local ? 20 : 0, 2);
    put(out, e.name);
    if (e.zip64_local) {
      put(out, 0x0001, 2);
      put(out, 16, 2);
      put(out, e.data.size(), 8);
      put(out, payload.size(), 8);
    }
    out.insert(out.end(), payload.begin(), payload.end());

    std::vector<std::byte> record;
    put(record, 0x02014b50, 4);
    put(record, 20, 2);  // version made by
    put(record, 20, 2);  // version needed
    put(record, 0, 2);
    put(record, method, 2);
    put(record, 0, 2);
    put(record, 0x21, 2);
    put(record, checksum, 4);
    put(record, payload.size(), 4);
    put(record, e.data.size(), 4);
    put(record, e.name.size(), 2);
    put(record, 0, 2);  // extra
    put(record, 0, 2);  // comment
    put(record, 0, 2);  // disk
    put(record, 0, 2);  // internal attributes
    put(record, 0, 4);  // external attributes
    put(record, local, 4);
    put(record, e.name);
    central.push_back(std::move(record));
  }
  const std::size_t directory = out.size();
  for (const auto& record : central) {
    where.central.push_back(out.size());
    out.insert(out.end(), record.begin(), record.end());
  }
  const std::size_t directory_size = out.size() - directory;
  put(out, 0x06054b50, 4);
  put(out, 0, 2);
  put(out, 0, 2);
  put(out, entries.size(), 2);
  put(out, entries.size(), 2);
  put(out, directory_size, 4);
  put(out, directory, 4);
  put(out, 0, 2);  // comment
  if (offsets) *offsets = where;
  return out;
}

void write_file(const std::string& path, const std::vector<std::byte>& bytes) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(file.good());
}

std::vector<std::byte> npy_floats(std::vector<int64_t> shape, const std::vector<float>& values) {
  return npy::serialize_floats(shape, values, false);
}

std::vector<float> iota(std::size_t n, float start = 0.0f) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

// The two-entry archive most cases start from: "w" (2, 3) stored, "b" (4,) deflated.
std::vector<ZipEntry> sample_entries() {
  return {{"w.npy", npy_floats({2, 3}, iota(6)), false, false},
          {"b.npy", npy_floats({4}, iota(4, 10.0f)), true, false}};
}

struct Png {
  uint32_t width = 0, height = 0;
  std::vector<uint8_t> rgb;
  const uint8_t* at(uint32_t x, uint32_t y) const { return &rgb[(static_cast<std::size_t>(y) * width + x) * 3]; }
};

Png read_png(const std::string& path) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  REQUIRE(png_image_begin_read_from_file(&image, path.c_str()) != 0);
  image.format = PNG_FORMAT_RGB;
  Png png;
  png.width = image.width;
  png.height = image.height;
  png.rgb.resize(PNG_IMAGE_SIZE(image));
  REQUIRE(png_image_finish_read(&image, nullptr, png.rgb.data(), 0, nullptr) != 0);
  return png;
}

}  // namespace

TEST_SUITE("unit") {
  TEST_CASE("npy: a zero dimension does not excuse an overflowing shape") {
    // A raw version-1.0 .npy whose header holds `shape`, padded as numpy pads it, with no data.
    const auto raw_npy = [](const std::string& shape) {
      std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
      header.append(63 - (10 + header.size()) % 64, ' ');
      header += '\n';
      std::string file = "\x93NUMPY";
      file += '\x01';
      file += '\x00';
      file += static_cast<char>(header.size() & 0xff);
      file += static_cast<char>(header.size() >> 8);
      file += header;
      std::vector<std::byte> bytes(file.size());
      std::memcpy(bytes.data(), file.data(), file.size());
      return bytes;
    };
    // Found by fuzz_npy: the nonzero dimensions multiply past int64 before the zero is reached, and
    // element_count() used to overflow there (UBSan: signed integer overflow in npy.cpp).
    const std::string fuzzed = "(737, 551615, 80, 6, 80, 8000, 80, 0, 90000, 0, 0, 900, 0, 3)";
    const std::string m = error_message([&] { npy::parse(raw_npy(fuzzed), "fuzzed.npy"); });
    CHECK(contains(m, "fuzzed.npy"));
    CHECK(contains(m, "is too large"));
    // numpy's rule: with a zero the array is empty, as long as the other dimensions' product fits.
    const npy::Array empty = npy::parse(raw_npy("(1000000000, 0, 1000000000)"), "empty.npy");
    CHECK(empty.element_count() == 0);
    CHECK(empty.data.empty());
    CHECK(contains(error_message([&] { npy::parse(raw_npy("(2000000000, 0, 1000000000)"), "big.npy"); }), "is too large"));
    // The largest element count whose byte count still fits in int64 is accepted up to the data check.
    const std::string truncated = error_message([&] { npy::parse(raw_npy("(1152921504606846975,)"), "t.npy"); });
    CHECK(contains(truncated, "truncated data"));
    CHECK(contains(error_message([&] { npy::parse(raw_npy("(1152921504606846976,)"), "t.npy"); }), "is too large"));
  }

  TEST_CASE("npz: stored and deflate members round-trip") {
    TempDir dir;
    auto entries = sample_entries();
    entries.push_back({"big.npy", npy_floats({300, 20}, std::vector<float>(6000, 0.5f)), true, true});
    entries.push_back({"z64.npy", npy_floats({3}, {1.5f, -2.0f, 3.25f}), false, true});
    const std::string path = dir.file("sample.npz");
    write_file(path, make_zip(entries));

    const npz::Arrays arrays = npz::read(path);
    REQUIRE(arrays.size() == 4);
    REQUIRE(arrays.count("w") == 1);
    CHECK(arrays.at("w").shape == std::vector<int64_t>{2, 3});
    CHECK(npy::to_floats(arrays.at("w"), "w") == iota(6));
    CHECK(arrays.at("b").shape == std::vector<int64_t>{4});
    CHECK(npy::to_floats(arrays.at("b"), "b") == iota(4, 10.0f));
    CHECK(arrays.at("big").shape == std::vector<int64_t>{300, 20});
    CHECK(npy::to_floats(arrays.at("big"), "big") == std::vector<float>(6000, 0.5f));
    CHECK(npy::to_floats(arrays.at("z64"), "z64") == std::vector<float>{1.5f, -2.0f, 3.25f});

    // An empty archive is a valid (empty) .npz.
    write_file(path, make_zip({}));
    CHECK(npz::read(path).empty());
  }

  TEST_CASE("npz: written archives read back, byte for byte the same each time") {
    const std::vector<npz::Member> members = {{"out_proj.weight", npy_floats({2, 3}, iota(6))},
                                              {"query", npy_floats({1, 2, 2}, iota(4, -1.0f))},
                                              {"empty", npy_floats({0}, {})}};
    const std::vector<std::byte> bytes = npz::serialize(members);
    CHECK(npz::serialize(members) == bytes);
    const npz::Arrays arrays = npz::parse(bytes, "written.npz");
    REQUIRE(arrays.size() == 3);
    CHECK(arrays.at("out_proj.weight").shape == std::vector<int64_t>{2, 3});
    CHECK(npy::to_floats(arrays.at("out_proj.weight"), "w") == iota(6));
    CHECK(npy::to_floats(arrays.at("query"), "q") == iota(4, -1.0f));
    CHECK(arrays.at("empty").element_count() == 0);
    CHECK(npz::parse(npz::serialize({}), "none.npz").empty());
    CHECK(test::contains(test::error_message([&] { npz::serialize({members[0], members[0]}); }), "given twice"));
    CHECK(test::contains(test::error_message([&] { npz::serialize({{"", members[0].second}}); }), "empty name"));
  }

  TEST_CASE("npz: malformed archives are Errors naming the file and the entry") {
    TempDir dir;
    const std::string path = dir.file("bad.npz");
    ZipOffsets offsets;
    const std::vector<std::byte> good = make_zip(sample_entries(), &offsets);
    auto message_for = [&](const std::vector<std::byte>& bytes) {
      write_file(path, bytes);
      return error_message([&] { npz::read(path); });
    };

    SUBCASE("CRC byte flipped") {
      auto bytes = good;
      bytes[offsets.central[0] + 16] ^= std::byte{0x01};
      const std::string m = message_for(bytes);
      CHECK(contains(m, path));
      CHECK(contains(m, "'w.npy'"));
      CHECK(contains(m, "CRC-32 mismatch"));
    }
    SUBCASE("data byte flipped in a deflate member") {
      auto bytes = good;
      bytes[offsets.central[0] - 3] ^= std::byte{0x40};  // inside b.npy's compressed data
      const std::string m = message_for(bytes);
      CHECK(contains(m, path));
      CHECK(contains(m, "'b.npy'"));
    }
    SUBCASE("truncated") {
      for (std::size_t size : {std::size_t{0}, std::size_t{10}, good.size() / 2, good.size() - 1}) {
        const std::string m = message_for(std::vector<std::byte>(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(size)));
        CHECK(contains(m, path));
        CHECK(contains(m, "not a zip archive"));
      }
    }
    SUBCASE("central directory cut short") {
      auto bytes = good;
      bytes[bytes.size() - 22 + 12] = std::byte{200};  // directory size past the end of the file
      const std::string m = message_for(bytes);
      CHECK(contains(m, path));
      CHECK(contains(m, "truncated archive"));
    }
    SUBCASE("unsupported compression method") {
      auto bytes = good;
      bytes[offsets.central[1] + 10] = std::byte{12};  // bzip2
      const std::string m = message_for(bytes);
      CHECK(contains(m, path));
      CHECK(contains(m, "'b.npy'"));
      CHECK(contains(m, "unsupported compression method 12"));
    }
    SUBCASE("encrypted entry") {
      auto bytes = good;
      bytes[offsets.central[0] + 8] = std::byte{0x01};
      CHECK(contains(message_for(bytes), "encrypted"));
    }
    SUBCASE("absurd uncompressed size") {
      auto bytes = good;
      for (int i = 0; i < 4; ++i) bytes[offsets.central[1] + 24 + i] = std::byte{0x7f};
      const std::string m = message_for(bytes);
      CHECK(contains(m, "'b.npy'"));
      CHECK(contains(m, "absurd uncompressed size"));
    }
    SUBCASE("declared size does not match the data") {
      auto bytes = good;
      bytes[offsets.central[1] + 24] = static_cast<std::byte>(static_cast<unsigned>(bytes[offsets.central[1] + 24]) + 1);
      const std::string m = message_for(bytes);
      CHECK(contains(m, "'b.npy'"));
      CHECK(contains(m, "its .npy header needs"));  // found from the member's header, before inflating the rest
    }
    SUBCASE("duplicate name") {
      auto entries = sample_entries();
      entries.push_back(entries[0]);
      const std::string m = message_for(make_zip(entries));
      CHECK(contains(m, path));
      CHECK(contains(m, "duplicate array name 'w'"));
    }
    SUBCASE("a member that is not a .npy") {
      std::vector<std::byte> text;
      put(text, "hello, world");
      const std::string m = message_for(make_zip({{"notes.npy", text, true, false}}));
      CHECK(contains(m, path));
      CHECK(contains(m, "'notes.npy'"));
      CHECK(contains(m, "not a .npy file"));
    }
    SUBCASE("missing file") {
      CHECK(contains(error_message([&] { npz::read(dir.file("missing.npz")); }), "no such file"));
    }
  }

  TEST_CASE("npz: unexpected names and sizes are refused before a member is inflated") {
    // A deflated member of 8 MiB of zeros (8 KiB compressed) whose stream is then damaged in the
    // middle: inflating it in full would end in a deflate or CRC error, so seeing the name or size
    // error instead shows the archive was refused before the member was inflated.
    TempDir dir;
    const std::string path = dir.file("big.npz");
    const auto damaged_zip = [&](const std::string& name, const std::vector<std::byte>& member) {
      ZipOffsets offsets;
      std::vector<std::byte> zip = make_zip({{"w.npy", npy_floats({2}, {1.0f, 2.0f}), true, false}, {name, member, true, false}}, &offsets);
      const std::size_t payload = raw_deflate(member).size();
      zip[offsets.local[1] + 30 + name.size() + payload / 2] ^= std::byte{0x5a};
      write_file(path, zip);
    };
    const std::size_t count = std::size_t{2} << 20;
    damaged_zip("junk.npy", npy_floats({static_cast<int64_t>(count)}, std::vector<float>(count)));
    CHECK(contains(error_message([&] { npz::read(path); }), "'junk.npy'"));  // the damage, found by inflating
    const std::string m = error_message([&] {
      npz::read(path, [](const std::string& key) {
        if (key != "w") throw Error("unexpected array '" + key + "'");
      });
    });
    CHECK(m == "unexpected array 'junk'");

    // An expected name whose header says (2,) in front of 8 MiB: refused from the header.
    std::vector<std::byte> lying = npy_floats({2}, {0.0f, 0.0f});
    lying.resize(lying.size() + 8 * (std::size_t{1} << 20));
    damaged_zip("b.npy", lying);
    const std::string h = error_message([&] { npz::read(path); });
    CHECK(contains(h, "'b.npy'"));
    CHECK(contains(h, "its .npy header needs"));
  }

  TEST_CASE("npy: a header whose shape disagrees with the file size is refused") {
    TempDir dir;
    std::vector<std::byte> file = npy_floats({2, 3}, iota(6));
    file.resize(file.size() - 4);
    write_file(dir.file("short.npy"), file);
    CHECK(contains(error_message([&] { npy::read(dir.file("short.npy")); }), "truncated data"));
    file.resize(file.size() + 8);
    write_file(dir.file("long.npy"), file);
    CHECK(contains(error_message([&] { npy::read(dir.file("long.npy")); }), "bytes after the data"));
  }

  TEST_CASE("heatmap: layout, PNG round trip and errors") {
    TempDir dir;
    const int heads = 3, seq_q = 5, seq_k = 7;
    std::vector<float> weights(static_cast<std::size_t>(heads * seq_q * seq_k), 0.0f);
    weights[0] = 1.0f;                                // head 0, q 0, k 0: the maximum
    weights[static_cast<std::size_t>(seq_k) * seq_q - 1] = std::numeric_limits<float>::quiet_NaN();  // head 0, last cell
    for (int h = 1; h < heads; ++h)
      for (int i = 0; i < seq_q * seq_k; ++i) weights[static_cast<std::size_t>(h * seq_q * seq_k + i)] = 0.02f * static_cast<float>(i % 7);

    // Documented sizes: 7 -> 7 * ceil(128 / 7) = 133, 5 -> 5 * ceil(128 / 5) = 130.
    const heatmap::Layout l = heatmap::layout(heads, seq_q, seq_k);
    CHECK(l.panel_width == 133);
    CHECK(l.panel_height == 130);
    CHECK(l.columns == 3);
    CHECK(l.rows == 1);
    CHECK(l.width == 2 * heatmap::kMargin + 3 * 133 + 2 * heatmap::kGap + heatmap::kBarGap + heatmap::kBarWidth +
                         heatmap::kBarLabelWidth);
    CHECK(l.height == 2 * heatmap::kMargin + heatmap::kLabelHeight + 130);
    CHECK(heatmap::layout(16, 300, 1000).columns == 4);
    CHECK(heatmap::layout(16, 300, 1000).rows == 4);
    CHECK(heatmap::layout(5, 300, 1000).panel_width == 512);
    CHECK(heatmap::layout(5, 300, 1000).panel_height == 300);

    const std::string path = dir.file("weights.png");
    const std::vector<std::string> titles = {"layer 0 head 0", "layer 0 head 1", "layer 0 head 2"};
    heatmap::write_png(path, weights, heads, seq_q, seq_k, titles);
    const Png png = read_png(path);
    CHECK(png.width == static_cast<uint32_t>(l.width));
    CHECK(png.height == static_cast<uint32_t>(l.height));

    // Head 0's panel: the top-left cell holds the maximum, the cell right of it 0, the last cell NaN.
    const uint32_t x0 = heatmap::kMargin, y0 = heatmap::kMargin + heatmap::kLabelHeight;
    const uint8_t* hot = png.at(x0 + 5, y0 + 5);
    const uint8_t* cold = png.at(x0 + 19 + 5, y0 + 5);
    const uint8_t* nan = png.at(x0 + 133 - 3, y0 + 130 - 3);
    CHECK(std::memcmp(hot, cold, 3) != 0);
    uint8_t expected_hot[3], expected_cold[3];
    heatmap::colormap(1.0f, expected_hot);
    heatmap::colormap(0.0f, expected_cold);
    CHECK(std::memcmp(hot, expected_hot, 3) == 0);
    CHECK(std::memcmp(cold, expected_cold, 3) == 0);
    CHECK(std::memcmp(nan, hot, 3) != 0);
    CHECK(std::memcmp(nan, cold, 3) != 0);

    CHECK(contains(error_message([&] { heatmap::write_png(path, {}, 0, seq_q, seq_k); }), "no heads"));
    const std::vector<float> many(static_cast<std::size_t>(17 * 2 * 2), 0.1f);
    CHECK(contains(error_message([&] { heatmap::write_png(path, many, 17, 2, 2); }), "at most 16"));
    CHECK(contains(error_message([&] { heatmap::write_png(path, weights, heads, seq_q, seq_k + 1); }), "do not match"));
    const std::string unwritable = dir.file("no-such-dir/weights.png");
    const std::string m = error_message([&] { heatmap::write_png(unwritable, weights, heads, seq_q, seq_k); });
    CHECK(contains(m, unwritable));
    CHECK(contains(m, "cannot open"));
  }
}
