// How `vkattn` writes its outputs (tools/support/output_files.hpp): symlinks followed, devices and FIFOs
// written through, read-only files and inputs refused, and all outputs committed or none.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "output_files.hpp"
#include "support.hpp"
#include "temp_dir.hpp"

using namespace vkattn;
using vkattn::cli::OutputFiles;
using vkattn::test::contains;
using vkattn::test::error_message;
using vkattn::test::TempDir;

namespace {

namespace fs = std::filesystem;

std::vector<std::byte> bytes(const std::string& text) {
  std::vector<std::byte> out(text.size());
  std::memcpy(out.data(), text.data(), text.size());
  return out;
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::string read_text(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(file), {}};
}

}  // namespace

TEST_SUITE("unit") {
  TEST_CASE("output files: a symlink is followed and stays a link") {
    TempDir dir;
    write_text(dir.file("target"), "old");
    fs::create_symlink("target", dir.file("link"));
    fs::create_symlink("created", dir.file("dangling"));
    OutputFiles files;
    files.stage(dir.file("link"), bytes("new"));
    files.stage(dir.file("dangling"), bytes("made"));
    files.commit();
    CHECK(fs::is_symlink(dir.file("link")));
    CHECK(read_text(dir.file("target")) == "new");
    CHECK(fs::is_symlink(dir.file("dangling")));
    CHECK(read_text(dir.file("created")) == "made");
  }

  TEST_CASE("output files: a replaced file keeps its mode; no temporary is left") {
    TempDir dir;
    write_text(dir.file("o"), "old");
    ::chmod(dir.file("o").c_str(), 0640);
    {
      OutputFiles files;
      files.stage(dir.file("o"), bytes("new"));
      files.commit();
    }
    CHECK(read_text(dir.file("o")) == "new");
    CHECK((fs::status(dir.file("o")).permissions() & fs::perms::all) == (fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read));
    CHECK(dir.entries() == 1);
  }

  TEST_CASE("output files: a read-only file is refused, never replaced (root included)") {
    TempDir dir;
    write_text(dir.file("ro"), "old");
    ::chmod(dir.file("ro").c_str(), 0444);
    CHECK(contains(error_message([&] { OutputFiles::check_destination(dir.file("ro")); }), "read-only (mode 0444)"));
    OutputFiles files;
    CHECK(contains(error_message([&] { files.stage(dir.file("ro"), bytes("new")); }), "refusing to replace it"));
    CHECK(read_text(dir.file("ro")) == "old");
  }

  TEST_CASE("output files: an output naming an input is refused") {
    TempDir dir;
    write_text(dir.file("q.npy"), "input");
    fs::create_hard_link(dir.file("q.npy"), dir.file("hard.npy"));
    fs::create_symlink("q.npy", dir.file("soft.npy"));
    for (const std::string& out : {dir.file("q.npy"), dir.file("hard.npy"), dir.file("soft.npy"),
                                  (dir.path / "." / "q.npy").string()}) {
      CAPTURE(out);
      const std::string m = error_message([&] { OutputFiles::check_destinations({{"--out", out}}, {{"--q", dir.file("q.npy")}}); });
      CHECK(contains(m, "--out"));
      CHECK(contains(m, "--q"));
      CHECK(contains(m, "refusing to overwrite an input"));
    }
    CHECK(read_text(dir.file("q.npy")) == "input");
    OutputFiles::check_destinations({{"--out", dir.file("o.npy")}}, {{"--q", dir.file("q.npy")}});  // no error
  }

  TEST_CASE("output files: a second output that cannot be committed leaves the first unchanged") {
    TempDir dir;
    write_text(dir.file("o.npy"), "old");
    OutputFiles files;
    files.stage(dir.file("o.npy"), bytes("new"));
    files.stage(dir.file("busy.npy"), bytes("lse"));
    fs::create_directory(dir.file("busy.npy"));  // appears while the command runs
    CHECK(contains(error_message([&] { files.commit(); }), "busy.npy"));
    CHECK(read_text(dir.file("o.npy")) == "old");
  }

  TEST_CASE("output files: a FIFO is written through, or refused without a reader") {
    TempDir dir;
    const std::string fifo = dir.file("fifo");
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    write_text(dir.file("o.npy"), "old");
    {  // no reader: refused at commit, before anything else changed
      OutputFiles files;
      files.stage(dir.file("o.npy"), bytes("new"));
      files.stage(fifo, bytes("data"));
      CHECK(contains(error_message([&] { files.commit(); }), "no reader"));
      CHECK(read_text(dir.file("o.npy")) == "old");
    }
    {  // a reader: the data goes through, the FIFO stays a FIFO
      std::string received;
      std::thread reader([&] { received = read_text(fifo); });
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // let it block in open()
      OutputFiles files;
      files.stage(fifo, bytes("data"));
      files.commit();
      reader.join();
      CHECK(received == "data");
      CHECK(fs::is_fifo(fifo));
    }
    {  // the reader leaves before reading: the write fails and the renamed output is put back
      std::thread reader([&] { ::close(::open(fifo.c_str(), O_RDONLY)); });
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      OutputFiles files;
      files.stage(dir.file("o.npy"), bytes("new"));
      files.stage(fifo, std::vector<std::byte>(1 << 20));  // more than a pipe holds
      CHECK(contains(error_message([&] { files.commit(); }), "write failed"));
      reader.join();
      CHECK(read_text(dir.file("o.npy")) == "old");
    }
  }

  TEST_CASE("output files: a character device is written through, never replaced") {
    if (::geteuid() != 0) {
      MESSAGE("skipped: mknod needs root");
      return;
    }
    TempDir dir;
    const std::string null = dir.file("null");
    REQUIRE(::mknod(null.c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0);
    OutputFiles files;
    files.stage(null, bytes("data"));
    files.commit();
    CHECK(fs::is_character_file(null));
    CHECK(dir.entries() == 1);
    // Two outputs on one device are both written through (`--out /dev/null --lse /dev/null`), where
    // two on one regular file are refused.
    CHECK_NOTHROW(OutputFiles::check_destinations({{"--out", null}, {"--lse", null}}, {}));
    OutputFiles both;
    both.stage(null, bytes("o"));
    both.stage(null, bytes("lse"));
    both.commit();
    CHECK(fs::is_character_file(null));
    CHECK_THROWS(OutputFiles::check_destinations({{"--out", dir.file("o.npy")}, {"--lse", dir.file("o.npy")}}, {}));
  }
}
