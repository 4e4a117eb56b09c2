// A directory as bytes and back. MPSGraph serializes a compiled executable as a package, a directory
// (macOS 14: serializeToMPSGraphPackageAtURL / initWithMPSGraphPackageAtURL); the Metal executor packs
// it into the serialized executable JAX caches and unpacks it into a fresh temporary directory to load
// it. Unpacking treats the bytes as untrusted: only relative paths inside the target directory.
#pragma once

#include <string>
#include <string_view>

#include "support/status.h"

namespace jmp::exec {

// Every regular file under `dir`, by path relative to it (in a fixed order, so equal trees give equal
// bytes).
StatusOr<std::string> PackDirectory(const std::string& dir);
// Recreates what PackDirectory packed under `dir`, which must exist.
Status UnpackDirectory(std::string_view packed, const std::string& dir);

// A new empty directory under the system's temporary directory, and its removal with all it holds.
StatusOr<std::string> MakeTemporaryDirectory();
void RemoveDirectoryTree(const std::string& dir);

}  // namespace jmp::exec
