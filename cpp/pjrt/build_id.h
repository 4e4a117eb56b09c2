// The identity of this build of the plugin: a hash of the plugin's own binary, so that any rebuild
// (another commit, compiler or flag) gets other persistent-cache keys (it is part of the platform
// version JAX hashes into them) and refuses executables another build serialized.
#pragma once

#include <string>

namespace jmp::pjrt {

const std::string& BuildId();  // 16 hex digits; computed once

}  // namespace jmp::pjrt
