// jmp_read_artifact FILE [--lower]: prints our IR (or the MPS op graph) of a portable artifact, or the
// error. Exit status 1 on bad input, so it doubles as a fuzzing and debugging entry point.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "lower/lower.h"
#include "stablehlo/ir.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s ARTIFACT [--lower]\n", argv[0]);
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto module = jmp::shlo::ReadArtifact(bytes.data(), bytes.size());
  if (!module.ok()) {
    std::fprintf(stderr, "error: %s\n", module.status().message().c_str());
    return 1;
  }
  if (argc > 2 && std::strcmp(argv[2], "--lower") == 0) {
    auto lowered = jmp::mps::LowerModule(*module);
    if (!lowered.ok()) {
      std::fprintf(stderr, "error: %s\n", lowered.status().message().c_str());
      return 1;
    }
    std::fputs(lowered->graph.ToString().c_str(), stdout);
    return 0;
  }
  std::fputs(jmp::shlo::PrintModule(*module).c_str(), stdout);
  return 0;
}
