#include "exec/package_archive.h"

#include <unistd.h>
#include <algorithm>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>
#include <utility>
#include <vector>

#include "support/byte_stream.h"

namespace jmp::exec {

namespace fs = std::filesystem;

namespace {

constexpr char kWhat[] = "serialized MPSGraph package";

// A path the archive may name: relative, and no component that climbs out or is empty.
bool SafeRelative(std::string_view path) {
  if (path.empty() || path.front() == '/' || path.back() == '/' || path.find('\0') != std::string_view::npos)
    return false;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view part = path.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  return true;
}

}  // namespace

StatusOr<std::string> PackDirectory(const std::string& dir) {
  std::error_code ec;
  std::vector<std::string> files;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file(ec)) files.push_back(fs::relative(it->path(), dir, ec).generic_string());
  if (ec) return Internal(std::string("could not list ") + kWhat + " at " + dir + ": " + ec.message());
  std::sort(files.begin(), files.end());
  ByteWriter out;
  out.U64(files.size());
  for (const std::string& name : files) {
    std::ifstream f(fs::path(dir) / name, std::ios::binary);
    std::string contents((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (!f.good() && !f.eof()) return Internal(std::string("could not read ") + name + " of the " + kWhat);
    out.Bytes(name);
    out.Bytes(contents);
  }
  return std::move(out.str());
}

Status UnpackDirectory(std::string_view packed, const std::string& dir) {
  ByteReader in(reinterpret_cast<const uint8_t*>(packed.data()), packed.size(), kWhat);
  JMP_ASSIGN_OR_RETURN(size_t n, in.Count(16));
  for (size_t i = 0; i < n; ++i) {
    JMP_ASSIGN_OR_RETURN(std::string_view name, in.Bytes());
    JMP_ASSIGN_OR_RETURN(std::string_view contents, in.Bytes());
    if (!SafeRelative(name)) return in.Malformed("a file name that is not a plain relative path");
    const fs::path path = fs::path(dir) / std::string(name);
    std::error_code ec;
    fs::create_directories(path.parent_path(), ec);
    if (ec) return Internal(std::string("could not unpack the ") + kWhat + ": " + ec.message());
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    if (!f.good()) return Internal(std::string("could not write ") + path.string() + " of the " + kWhat);
  }
  if (in.left() != 0) return in.Malformed("bytes after the last file");
  return Status::Ok();
}

StatusOr<std::string> MakeTemporaryDirectory() {
  std::error_code ec;
  std::string pattern = (fs::temp_directory_path(ec) / "jax-metal-plugin-XXXXXX").string();
  if (ec) return Internal("no temporary directory: " + ec.message());
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) return Internal("could not create a temporary directory under " + pattern);
  return std::string(buf.data());
}

void RemoveDirectoryTree(const std::string& dir) {
  std::error_code ec;
  fs::remove_all(dir, ec);  // best effort: a leftover temporary directory harms nothing
}

}  // namespace jmp::exec
