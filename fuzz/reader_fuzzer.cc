// libFuzzer entry point: the reader and the lowering on arbitrary bytes. Build with
// -DJMP_FUZZ=ON (clang), seed with fuzz/make_seeds.py, run ./jmp_reader_fuzzer CORPUS_DIR.
#include <cstddef>
#include <cstdint>

#include "lower/lower.h"
#include "stablehlo/ir.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto module = jmp::shlo::ReadArtifact(data, size);
  if (module.ok()) {
    (void)jmp::shlo::PrintModule(*module);
    (void)jmp::mps::LowerModule(*module);
  }
  return 0;
}
